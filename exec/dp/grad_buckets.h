#pragma once
// GradBuckets — data-parallel gradient averaging that overlaps the backward pass.
//
// The gradients live in one flat buffer (FlatParameters) in the order the backward
// produces them; a bucket is a consecutive range of about `bucket_mb` megabytes.  A
// hook on each parameter's gradient accumulator runs *after* the gradient has been
// added to .grad (a hook on the tensor itself runs before: the original Python
// QuintNet's bug); when every parameter of a bucket is ready, the bucket's slice of
// the buffer is divided by dp and all-reduced in place, asynchronously, while the
// backward continues.  finish() waits for the buckets.
//
// Gradient accumulation: only the backward of the last microbatch of a step is
// synchronised (sync_next_backward(true)); the earlier ones just accumulate locally.
//
// ZeRO-1 (reduce_scatter_to): a bucket is reduce-scattered instead, each dp rank
// receiving the average of its own piece only — half the bytes of an all-reduce.
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "exec/comm/communicator.h"
#include "exec/dp/flat_parameters.h"

namespace quintnet::exec {

class ZeroShards;

class GradBuckets {
 public:
  GradBuckets(FlatParameters& flat, Communicator& comm, Group& dp, double bucket_mb);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Whether the next backward pass launches the all-reduces (the last microbatch).
  void sync_next_backward(bool sync);
  // Launches the buckets the backward did not complete, waits for all.  Once per step.
  void finish();

  // ZeRO-1, where the backend reduce-scatters (Communicator::can_reduce_scatter): after
  // finish() only this rank's pieces (`shards`, built on ranges()) of the gradient buffer
  // hold the average; the rest holds this rank's own gradients over dp.  Buckets holding one of
  // `whole` — parameters whose whole gradient is needed afterwards (GPT-2's tied
  // embedding, summed over the pipeline next) — are still all-reduced.
  void reduce_scatter_to(std::shared_ptr<const ZeroShards> shards, const std::vector<torch::Tensor>& whole);
  // The pieces averaged after finish() when reduce-scattering; null: the whole buffer.
  const ZeroShards* scattered_to() const { return shards_.get(); }

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Each bucket's range of the flat gradient buffer, in buffer order.
  using Range = FlatRange;
  std::vector<Range> ranges() const;
  // The last finished step's all-reduces, in launch order: for tests and traces.
  struct Launch {
    int bucket;
    std::int64_t bytes;
    std::chrono::steady_clock::time_point start, end;
  };
  const std::vector<Launch>& last_step_launches() const { return finished_; }

  void mark_ready(int slot);  // called by the accumulator hooks

 private:
  struct Bucket {
    int64_t offset = 0, numel = 0;
    int slots = 0, ready = 0;
    bool launched = false;
    bool scatter = false;  // reduce-scattered (ZeRO-1), else all-reduced
    torch::Tensor view;    // the bucket's range of the gradient buffer
    torch::Tensor send, piece;  // reduce-scatter: the bucket padded to dp equal parts, and this rank's part
    c10::intrusive_ptr<c10d::Work> work;
  };
  void launch(int bucket);

  FlatParameters& flat_;
  Communicator& comm_;
  Group& dp_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // slot -> bucket
  std::shared_ptr<const ZeroShards> shards_;
  // Whatever pointer type grad_accumulator returns (shared_ptr in LibTorch 1.13,
  // intrusive_ptr in 2.x): the accumulators stay alive while their hooks are registered.
  using AccumulatorPtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));
  std::vector<AccumulatorPtr> accumulators_;
  std::vector<std::uintptr_t> hook_keys_;
  bool sync_ = true;
  std::vector<Launch> launches_;  // this step's
  std::vector<Launch> finished_;  // the last finished step's
};

}  // namespace quintnet::exec
