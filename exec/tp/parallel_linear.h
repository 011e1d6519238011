#pragma once
// ColumnParallelLinear and RowParallelLinear (Megatron-LM's contracts).
//
// ColumnParallelLinear: Y = X Aᵀ + b with A split by rows (output features) across
// tp ranks: rank r holds out/tp output features.  Input: the full X (copy_to_tp).
// Output: this rank's slice of Y, or the whole Y with gather_output.
//
// RowParallelLinear: A split by columns (input features).  Input: this rank's slice
// of X (input_is_parallel) or the full X (then scattered).  Output: the full Y, the
// partial products all-reduced (reduce_from_tp), the bias added once after.
//
// Under sequence parallelism (TpContext::sequence_parallel) the column-parallel layers
// take this rank's part of the sequence and gather the rest (keeping only their part for
// the backward: sequence_parallel_linear), and the row-parallel layer reduce-scatters its
// output along the sequence instead of all-reducing it.
//
// Bitwise TP invariance, on request (TpContext::bitwise_invariant): a BLAS multiplies
// an [M, N] block differently for different N (kernel choice, blocking), so a shard's
// columns differ in the last bit from the same columns of the serial layer (well
// within the 1e-5 of the equivalence tests).  With the option ColumnParallelLinear
// computes its output features in fixed blocks of kOutputBlock (when the shard divides
// into them): the serial layer and every tp degree run the very same GEMMs on the same
// data, and a shard equals the serial slice bitwise.  It costs 2-8 small GEMMs and a
// cat where one GEMM would do, so training runs without it.
//
// Both can load their shard from the serial layer's full weight (load_full) and give
// the full weight back (full_weight), which is how one serial checkpoint loads into
// any tp degree.
#include <torch/torch.h>

#include "exec/tp/tp_ops.h"

namespace quintnet::exec {

// The whole input of a column-parallel layer (copy_to_tp, or gather_sequence under
// sequence parallelism).
torch::Tensor column_input(const torch::Tensor& x, const TpContext& tp);

class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  // with_bias false: Y = X Aᵀ (Llama's layers); `bias` stays undefined.
  ColumnParallelLinearImpl(int64_t in_features, int64_t out_features, const TpContext& tp, bool gather_output = false,
                           bool with_bias = true);
  torch::Tensor forward(const torch::Tensor& x);  // x: the full input, the same on every tp rank

  // Slices rows [r·out/tp, (r+1)·out/tp) of the serial weight [out, in] and bias [out].
  void load_full(const torch::Tensor& weight, const torch::Tensor& bias);
  static constexpr int kWeightShardDim = 0;  // weight and bias are split along dim 0
  static constexpr int64_t kOutputBlock = 32;  // output features per GEMM with bitwise_invariant

  torch::Tensor weight, bias;

 private:
  TpContext tp_;  // a copy: two pointers to the communicator and group, which outlive the layer
  bool gather_output_;
};
TORCH_MODULE(ColumnParallelLinear);

class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(int64_t in_features, int64_t out_features, const TpContext& tp, bool input_is_parallel = true,
                        bool with_bias = true);
  torch::Tensor forward(const torch::Tensor& x);

  // Slices columns [r·in/tp, (r+1)·in/tp) of the serial weight [out, in]; bias whole.
  void load_full(const torch::Tensor& weight, const torch::Tensor& bias);
  static constexpr int kWeightShardDim = 1;  // weight split along dim 1; bias replicated

  torch::Tensor weight, bias;

 private:
  TpContext tp_;  // a copy: two pointers to the communicator and group, which outlive the layer
  bool input_is_parallel_;
};
TORCH_MODULE(RowParallelLinear);

// The key (or value) projection of grouped-query attention — g heads of width d — over
// the tp group, without bias.  Where tp divides g it is column-parallel (rank r holds
// heads [r·g/tp, (r+1)·g/tp)).  Where tp exceeds g (a multiple of it: the plan validator
// says so) a rank's query heads all read one key/value head, held by tp/g ranks: every
// rank keeps the whole weight [g·d, in] and computes that one head, so its gradient is
// partial on each rank (only its own query heads' share) — the model lists it among its
// partial_gradient_parameters, which the trainer sums over the tp group.
class KeyValueParallelLinearImpl : public torch::nn::Module {
 public:
  KeyValueParallelLinearImpl(int64_t in_features, int64_t heads, int64_t head_dim, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);  // x: as a ColumnParallelLinear's -> [.., local_heads() · d]
  bool sharded() const { return heads_ % tp_.size() == 0; }
  int64_t local_heads() const { return sharded() ? heads_ / tp_.size() : 1; }
  static constexpr int kWeightShardDim = 0;  // where sharded()
  torch::Tensor weight;

 private:
  TpContext tp_;
  int64_t heads_, head_dim_;
};
TORCH_MODULE(KeyValueParallelLinear);

}  // namespace quintnet::exec

namespace quintnet::exec {

// The fused query/key/value projection of attention as one column-parallel layer.
// Its weight is [3, out/tp, in]: the q, k and v rows of this rank's heads, split along
// dim 1 — so one GEMM per rank computes its heads' q, k and v, and the serial weight
// [3, out, in] shards like any other (tp_shard_dims reports dim 1).
class QkvParallelLinearImpl : public torch::nn::Module {
 public:
  QkvParallelLinearImpl(int64_t in_features, int64_t out_features, const TpContext& tp);
  // x [.., in] -> {q, k, v}, each [.., out/tp]
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  static constexpr int kWeightShardDim = 1;  // weight [3, out, in] and bias [3, out] split along dim 1

  torch::Tensor weight, bias;

 private:
  TpContext tp_;
};
TORCH_MODULE(QkvParallelLinear);

}  // namespace quintnet::exec
