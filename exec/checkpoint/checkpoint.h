#pragma once
// Checkpoints of a parallel training run: every rank writes its own shard (its
// parameters, AdamW moments and RNG state; no communication of tensors), rank 0
// writes the manifest (plan, step, learning-rate schedule length, early-stopping
// state, the current epoch's statistics) and renames the directory into place — the
// layout and the crash guarantees are in manifest.h.
//
// Loading into the same mesh reads the rank's own shard and continues bit for bit;
// loading into a different mesh (dp, tp, pp or chunks changed) copies into each rank
// the parts of the shards' tensors that overlap its own, one shard at a time
// (reshard.h).  The data order depends only on the step, so a resumed run
// sees the batches the uninterrupted one would have.
#include <memory>
#include <string>
#include <vector>

#include "core/plan.h"
#include "exec/checkpoint/manifest.h"
#include "exec/comm/communicator.h"
#include "exec/parallel/flat_adamw.h"
#include "exec/parallel/parallel_model.h"

namespace quintnet::exec {

using Optimizers = std::vector<std::unique_ptr<FlatAdamW>>;

class CheckpointWriter {
 public:
  // `keep`: complete checkpoints kept in run_dir (older ones are deleted); 0 keeps all.
  CheckpointWriter(std::string run_dir, int keep) : run_dir_(std::move(run_dir)), keep_(keep) {}

  // Collective: every rank calls it with the same `progress` (step, total_steps,
  // early-stopping state, dp-summed epoch statistics).  Returns the directory written.
  std::string save(Communicator& comm, const core::Plan& plan, ParallelModel& pm, const Optimizers& optimizers,
                   Manifest progress) const;

 private:
  void prune() const;
  std::string run_dir_;
  int keep_;
};

// What load_checkpoint restored, and what this rank read to do it.
struct LoadedCheckpoint {
  Manifest manifest;
  bool resharded = false;  // written on another mesh (or another number of chunks)
  int shards_read = 0;     // of the manifest's shards
  long long bytes_read = 0;
};

// Collective.  Restores parameters, optimizer moments and steps (and the RNG state
// when the mesh is unchanged) from `path` (a step directory or a run directory with
// `latest`).  Throws core::UserError for a checkpoint of another model or a damaged one.
LoadedCheckpoint load_checkpoint(const std::string& path, Communicator& comm, const core::Plan& plan, ParallelModel& pm,
                         const Optimizers& optimizers);

}  // namespace quintnet::exec
