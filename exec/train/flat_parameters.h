#pragma once
// FlatParameters — every parameter of a model as a view into one contiguous buffer,
// and every gradient as a view into a second one (Megatron-LM's contiguous gradient
// buffer).  Why: a model has ~100 small tensors; the optimizer, gradient clipping
// and the data-parallel all-reduce then run a handful of large operations instead
// of hundreds of small ones, and a DP bucket is a slice of the gradient buffer that
// is all-reduced in place, without copies.
//
// Layout: parameters in reverse registration order — the order the backward pass
// produces their gradients — so gradient buckets are consecutive ranges.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace quintnet::exec {

class FlatParameters {
 public:
  struct Slot {
    std::string name;
    torch::Tensor param;  // the model's parameter, now a view into params()
    int64_t offset = 0, numel = 0;
  };

  // Re-seats the parameters of `model` (and their gradients) as views.  `sharded`
  // names the tensor-parallel shards (see tp_shard_dims), for the gradient norm.
  FlatParameters(torch::nn::Module& model, const std::map<std::string, int>& sharded);

  torch::Tensor& params() { return params_; }
  torch::Tensor& grads() { return grads_; }
  const std::vector<Slot>& slots() const { return slots_; }
  // 1 for elements of tensor-parallel shards, 0 for replicated ones.
  const torch::Tensor& sharded_mask() const { return sharded_mask_; }

  void zero_grad() { grads_.zero_(); }

 private:
  torch::Tensor params_, grads_, sharded_mask_;
  std::vector<Slot> slots_;
};

// AdamW (decoupled weight decay, bias correction: the same arithmetic as
// torch::optim::AdamW) over the flat buffers: a dozen tensor operations per step.
class FlatAdamW {
 public:
  FlatAdamW(FlatParameters& flat, double weight_decay, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  void step(double lr);

  long steps() const { return step_; }
  void set_steps(long steps) { step_ = steps; }  // resuming from a checkpoint
  torch::Tensor& exp_avg() { return exp_avg_; }
  torch::Tensor& exp_avg_sq() { return exp_avg_sq_; }

 private:
  FlatParameters& flat_;
  double weight_decay_, beta1_, beta2_, eps_;
  long step_ = 0;
  torch::Tensor exp_avg_, exp_avg_sq_;
};

}  // namespace quintnet::exec
