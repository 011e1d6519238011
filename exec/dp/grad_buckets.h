#pragma once
// GradBuckets — data-parallel gradient averaging that overlaps the backward pass.
//
// Parameters are packed, in reverse registration order (the order the backward
// produces their gradients), into buckets of about `bucket_mb` megabytes.  A hook on
// each parameter's gradient accumulator runs *after* the gradient has been added to
// .grad (a hook on the tensor itself runs before: the original Python QuintNet's
// bug); when every parameter of a bucket is ready, the bucket is flattened, divided by
// dp and all-reduced asynchronously while the backward continues.  finish() waits
// for the buckets and writes the averages back into .grad.
//
// Gradient accumulation: only the backward of the last microbatch of a step is
// synchronised (sync_next_backward(true)); the earlier ones just accumulate locally.
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <vector>

#include "exec/comm/communicator.h"

namespace quintnet::exec {

class GradBuckets {
 public:
  GradBuckets(std::vector<torch::Tensor> params, Communicator& comm, Group& dp, double bucket_mb);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Whether the next backward pass launches the all-reduces (the last microbatch).
  void sync_next_backward(bool sync);
  // Launches what the backward did not (parameters without gradient), waits for
  // every bucket, writes the averaged gradients back.  Call once per step.
  void finish();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Per step, for tests and the trace: when each bucket's all-reduce was launched
  // and finished, in launch order, and how many all-reduces ran.
  struct Launch {
    int bucket;
    std::int64_t bytes;
    std::chrono::steady_clock::time_point start, end;
  };
  const std::vector<Launch>& last_step_launches() const { return finished_; }

  void mark_ready(int param_index);  // called by the accumulator hooks

 private:
  struct Bucket {
    std::vector<int> params;
    torch::Tensor flat;
    int ready = 0;
    bool launched = false;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void launch(int bucket);

  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  Group& dp_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // param index -> bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<std::uintptr_t> hook_keys_;
  bool sync_ = true;
  std::vector<Launch> launches_;  // this step's, in launch order
  std::vector<Launch> finished_;  // the last finished step's
};

}  // namespace quintnet::exec
