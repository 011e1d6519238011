#pragma once
// Reading a checkpoint's per-rank shards back, and reassembling serial (unsharded)
// tensors from them: the tensor-parallel shards of a parameter, held by the dp-rank-0
// members of one pipeline stage, are concatenated along the dimension the manifest
// records: what `quintnet checkpoint export` writes out.  Resuming on another mesh
// reads the shards one at a time instead (reshard.h).
#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exec/checkpoint/manifest.h"

namespace quintnet::exec {

using TensorMap = std::map<std::string, torch::Tensor>;

// Shard keys: "param/<name>" (the fp32 masters), "exp_avg/<name>", "exp_avg_sq/<name>"
// per parameter, and "rng/cpu" for the rank's CPU generator state.  Under ZeRO-1 a rank
// holds the state of the parameters its pieces cover whole, and of the others the parts
// it owns, flattened, as "param/<name>@<first element>" (and exp_avg, exp_avg_sq); the
// manifest records each parameter's shape.  (Version-1 checkpoints: params always whole.)
// Without ZeRO-1 the replicas' state is one state: only the shards of dp 0 and cp 0 hold
// it (since session 34), the others' hold "rng/cpu" alone.

inline const std::vector<std::string> kStateKinds = {"param/", "exp_avg/", "exp_avg_sq/"};

// A state key taken apart: its kind (an index into kStateKinds), the parameter's name,
// and for a ZeRO-1 piece the first element it holds (-1: the tensor whole).  Empty for
// the other keys (rng/cpu).  Throws core::UserError naming `path` for a START that is
// not a number.
struct StateKey {
  size_t kind = 0;
  std::string name;
  std::int64_t start = -1;
};
std::optional<StateKey> parse_state_key(const std::string& key, const std::string& path);

// Copies the ZeRO-1 pieces of tensor `key` ("<kind><name>") that `shard` (read from
// `path`) holds — its entries "key@START" — into their places in `dest`, the tensor
// flattened; returns how many values they held.  Throws core::UserError naming `path`
// for a START that is not a number or a piece outside `dest`.
std::int64_t copy_pieces(const TensorMap& shard, const std::string& key, torch::Tensor dest, const std::string& path);

class ShardReader {
 public:
  ShardReader(std::string checkpoint_dir, Manifest manifest);

  // One rank's shard, read once and kept.  Throws core::UserError for a missing,
  // truncated or unreadable file.
  const TensorMap& shard(int rank);
  // The same, read afresh and not kept: what reads a checkpoint one shard at a time.
  TensorMap read(int rank);
  // The shard files read so far (each read counts, kept or not), and their bytes.
  int files_read() const { return files_read_; }
  long long bytes_read() const { return bytes_read_; }
  std::string shard_path(int rank) const;  // the file of rank `rank`'s shard
  // Rank `rank`'s tensor `kind + name` (kind from kStateKinds): from its shard, or for
  // ZeRO-1 state assembled from the shards of its dp group (the ranks of its tp and
  // pp coordinates).  Throws core::UserError when it is missing or incomplete.
  torch::Tensor tensor(int rank, const std::string& kind, const std::string& name);
  // The serial tensor `kind + name`: its tp shards concatenated, a vocabulary's padding
  // rows dropped (checkpoints before session 34 keep them: the manifest lacks the rows).
  torch::Tensor serial(const std::string& kind, const std::string& name);
  // Every parameter name the checkpoint holds, in manifest order.
  std::vector<std::string> parameter_names() const;
  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }

 private:
  const ShardInfo& holder(const std::string& name, int tp) const;
  std::vector<std::int64_t> shape_of(int rank, const std::string& name);

  std::string dir_;
  Manifest manifest_;
  std::map<int, TensorMap> cache_;
  int files_read_ = 0;
  long long bytes_read_ = 0;
};

}  // namespace quintnet::exec
