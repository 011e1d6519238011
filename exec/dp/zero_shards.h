#pragma once
// ZeroShards — how ZeRO-1 (plan `zero_stage: 1`; Rajbhandari et al. 2020, the optimizer
// state partitioning "P_os") splits one chunk's flat parameter buffer over the dp ranks.
//
// Each DP gradient bucket is cut into dp equal pieces (the last may be shorter, or
// empty); dp rank r owns piece r of every bucket.  The rank keeps AdamW's two moments
// for its pieces only — 1/dp of the optimizer state — updates those parameters, and the
// updated pieces are then all-gathered so that every replica holds the whole model for
// the next forward.  Pieces follow the buckets, as in Megatron-LM's distributed
// optimizer, so that the reduce-scatter of a bucket hands each rank exactly its piece
// (GradBuckets::reduce_scatter_to; where the backend has none, LibTorch 1.13's Gloo
// between hosts, the buckets are all-reduced — docs/EXECUTOR.md).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "exec/comm/communicator.h"
#include "exec/dp/grad_buckets.h"

namespace quintnet::exec {

class ZeroShards {
 public:
  using Range = GradBuckets::Range;  // elements of the flat buffer

  // buckets: the DP buckets' ranges, in buffer order (GradBuckets::ranges()).
  ZeroShards(std::vector<Range> buckets, Communicator& comm, Group& dp);

  std::int64_t numel() const { return numel_; }  // elements this rank owns

  // This rank's pieces of a flat buffer, one after another (a copy).
  torch::Tensor take(const torch::Tensor& flat) const;

  // Collective over dp: every rank's `shard` (its pieces, as take() returns them, in any
  // dtype) into their places in `out`, a buffer shaped like the flat one — this rank's too.
  void gather_into(const torch::Tensor& shard, torch::Tensor& out) const;

  // This rank's pieces as ranges of the flat buffer, in the order take() concatenates them.
  std::vector<Range> pieces() const;
  Range piece(std::size_t bucket, int dp_rank) const;  // offset into the flat buffer
  std::int64_t piece_size(std::size_t bucket) const { return piece_size_[bucket]; }  // before trimming

 private:
  std::vector<Range> buckets_;
  std::vector<std::int64_t> piece_size_;  // per bucket: ceil(numel / dp)
  std::int64_t padded_ = 0;               // Σ piece_size_: what each rank sends in the all-gather
  std::int64_t numel_ = 0;
  Communicator& comm_;
  Group& dp_;
};

}  // namespace quintnet::exec
