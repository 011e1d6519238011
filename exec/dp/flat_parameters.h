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

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace quintnet::exec {

// A range of elements of a flat buffer.
struct FlatRange {
  std::int64_t offset = 0, numel = 0;
};

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
  // The elements of tensor-parallel shards, and the rest — replicated on every tp rank —
  // each as few ranges as cover them, in buffer order.
  const std::vector<FlatRange>& sharded_ranges() const { return sharded_ranges_; }
  const std::vector<FlatRange>& replicated_ranges() const { return replicated_ranges_; }

  void zero_grad() { grads_.zero_(); }

 private:
  torch::Tensor params_, grads_;
  std::vector<Slot> slots_;
  std::vector<FlatRange> sharded_ranges_, replicated_ranges_;
};

}  // namespace quintnet::exec
