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
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "exec/comm/communicator.h"
#include "exec/train/flat_parameters.h"

namespace quintnet::exec {

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

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Each bucket's range of the flat gradient buffer, in buffer order.
  struct Range {
    std::int64_t offset = 0, numel = 0;
  };
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
    torch::Tensor view;  // the bucket's range of the gradient buffer
    c10::intrusive_ptr<c10d::Work> work;
  };
  void launch(int bucket);

  FlatParameters& flat_;
  Communicator& comm_;
  Group& dp_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // slot -> bucket
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
