#pragma once
// Which samples make up each global batch, and which part of it is this rank's.
//
// The order depends only on (seed, epoch): global batch k of an epoch is the same
// set of samples whatever the mesh, so runs of different layouts compare step by
// step.  The global batch is cut into dp contiguous shards, each shard into the
// microbatches of one step:   batch = [dp0: mb0 mb1 ... | dp1: mb0 mb1 ... | ...].
#include <cstdint>
#include <vector>

namespace quintnet::exec {

class BatchSampler {
 public:
  BatchSampler(int64_t dataset_size, int64_t global_batch, std::uint64_t seed, bool shuffle = true);

  int64_t batches_per_epoch() const { return dataset_size_ / global_batch_; }  // the last partial batch is dropped
  // Sample indices of microbatch `mb` (of `microbatches`) on dp rank `dp_rank` (of `dp`).
  std::vector<int64_t> microbatch(int epoch, int64_t batch, int dp_rank, int dp, int mb, int microbatches) const;
  // The whole global batch (for checks and the serial reference).
  std::vector<int64_t> global_batch(int epoch, int64_t batch) const;

 private:
  const std::vector<int64_t>& order(int epoch) const;

  int64_t dataset_size_, global_batch_;
  std::uint64_t seed_;
  bool shuffle_;
  mutable int cached_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace quintnet::exec
