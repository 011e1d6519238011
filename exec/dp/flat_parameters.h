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
//
// bf16 weights (plan `precision: bf16_weights`, Megatron-LM's `--bf16`): the model then
// computes with a third buffer, weights(), a bfloat16 copy of params(); params() stays
// fp32 and is what the optimizer updates and a checkpoint stores — the master weights.
// Gradients stay fp32 too: the model's bf16 parameters keep fp32 views of grads() as
// their gradients, and autograd adds each bf16 gradient into them in place (in fp32, as
// Megatron-LM's main_grad), so microbatches and DP all-reduces accumulate in fp32.
// Whoever changes params() calls refresh_weights() after.  Under ZeRO-1 the optimizer
// takes the masters over (hand_over_masters(): it keeps this dp rank's pieces, as
// Megatron-LM's distributed optimizer) and params() is gone.
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
  // `weight_dtype`: what the model computes with (fp32, or bfloat16 with fp32 masters).
  FlatParameters(torch::nn::Module& model, const std::map<std::string, int>& sharded,
                 torch::ScalarType weight_dtype = torch::kFloat32);

  // fp32: the master weights under bf16 weights.  Throws once handed over.
  torch::Tensor& params();
  const torch::Tensor& weights() const { return weights_; }  // what the model's parameters view
  bool separate_weights() const { return separate_; }
  // Copies params() into the bf16 weights (one cast); nothing when they are one buffer.
  void refresh_weights();
  // Under bf16 weights: frees params(), whose values the caller (the optimizer) keeps.
  void hand_over_masters();
  bool holds_masters() const { return params_.defined(); }
  // Sets the parameters from fp32 values of the whole buffer: params() and the bf16
  // weights, or the weights alone once the masters are handed over.
  void load_masters(const torch::Tensor& whole);
  // Each parameter's part of a buffer laid out like params() (e.g. the masters), by name,
  // shaped like the parameter.
  std::map<std::string, torch::Tensor> slot_views(const torch::Tensor& buffer) const;
  torch::Tensor& grads() { return grads_; }
  const std::vector<Slot>& slots() const { return slots_; }
  // The elements of tensor-parallel shards, and the rest — replicated on every tp rank —
  // each as few ranges as cover them, in buffer order.
  const std::vector<FlatRange>& sharded_ranges() const { return sharded_ranges_; }
  const std::vector<FlatRange>& replicated_ranges() const { return replicated_ranges_; }

  void zero_grad() { grads_.zero_(); }

 private:
  torch::Tensor params_, weights_, grads_;
  bool separate_ = false;  // weights_ is a bf16 copy of params_, not params_ itself
  std::vector<Slot> slots_;
  std::vector<FlatRange> sharded_ranges_, replicated_ranges_;
};

}  // namespace quintnet::exec
