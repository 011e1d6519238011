#pragma once
// The manifest of a checkpoint: which run and step it holds and where each rank's
// shard is.  A checkpoint is a directory
//
//   RUN/step-00000005/manifest.json      this file (written last)
//   RUN/step-00000005/rank-00003.pt      rank 3's tensors (torch pickle)
//   RUN/latest                           "step-00000005" (the newest complete one)
//
// written as RUN/step-00000005.partial/ and renamed once every shard and the manifest
// are on disk, so a crash mid-save leaves a .partial directory that nothing loads.
// Torch-free: the CLI and the loaders share it.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace quintnet::exec {

struct ShardInfo {
  int rank = 0;
  int dp = 0, tp = 0, pp = 0, cp = 0;  // mesh coordinates of the rank that wrote it
  std::string file;            // relative to the checkpoint directory
  long long bytes = 0;         // size on disk, checked before loading (truncation)
  // Serial parameter names the rank holds a (tp-)shard of; its file holds their state
  // unless another replica's does (without ZeRO-1, only dp 0 and cp 0 write it).
  std::vector<std::string> tensors;
  // Their shapes on this rank (the tp shard's): what reassembles a parameter the shards
  // hold in ZeRO-1 pieces only.  Absent from manifests before session 34, whose shards
  // hold every parameter whole.
  std::map<std::string, std::vector<std::int64_t>> shapes;
  // Of `tensors`, those whose state (masters and moments) the file holds, whole or in
  // ZeRO-1 pieces: what spares a resharding rank the shards that hold none of its state.
  // Absent before session 35 (any of `tensors` may be there).
  std::optional<std::vector<std::string>> state;
};

struct Manifest {
  long step = 0;         // optimizer steps completed
  long total_steps = 0;  // the run's planned steps (the learning-rate schedule's length)
  double best_val_loss = 1e300;
  int epochs_without_improvement = 0;
  // The current epoch so far, summed over the replicas (dp × cp): loss x samples, correct, samples.
  std::array<double, 3> epoch_stats{};
  nlohmann::json plan;  // core::Plan::to_json() of the run
  int dp = 1, tp = 1, pp = 1, cp = 1, chunks = 1;  // cp: absent from manifests before it, 1
  std::map<std::string, int> tp_shard_dims;  // parameter name -> dim tp splits (absent: replicated)
  // Vocabulary-parallel weights -> their real rows: the serial tensor without tp's padding
  // (absent before session 34, whose merged shards keep the padding rows).
  std::map<std::string, std::int64_t> vocabulary_rows;
  std::vector<ShardInfo> shards;
};

nlohmann::json shard_to_json(const ShardInfo& s);
ShardInfo shard_from_json(const nlohmann::json& j);  // throws nlohmann's errors
nlohmann::json manifest_to_json(const Manifest& m);
// Throws core::UserError naming the file and the bad field.
Manifest read_manifest(const std::string& checkpoint_dir);
void write_manifest(const std::string& checkpoint_dir, const Manifest& m);

std::string step_dir_name(long step);  // "step-00000005"

// A checkpoint directory from what a user passes: a step directory, or a run
// directory whose `latest` file names one.  Throws core::UserError when neither.
std::string resolve_checkpoint(const std::string& path);

}  // namespace quintnet::exec
