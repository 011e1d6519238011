#pragma once
// The four autograd functions tensor parallelism is made of (Megatron-LM's names):
//
//   copy_to_tp      forward: identity          backward: all-reduce (sum)
//   reduce_from_tp  forward: all-reduce (sum)  backward: identity
//   gather_from_tp  forward: all-gather (last dim)  backward: take own slice
//   scatter_to_tp   forward: take own slice (last dim)  backward: all-gather
//
// A column-parallel layer starts with copy_to_tp (each rank needs the whole input;
// the gradients of the input are partial sums); a row-parallel layer ends with
// reduce_from_tp (each rank holds a partial sum of the output).
//
// Sequence parallelism (plan `sequence_parallel`; Korthikanti et al. 2022): between the
// tensor-parallel regions — LayerNorms, residual adds, dropout — each rank holds its
// 1/tp of the sequence (dim 1 of [batch, tokens, hidden]).  Three more functions:
//
//   gather_sequence          forward: all-gather (dim 1)  backward: reduce-scatter (dim 1),
//                            or with replicated_gradients: take own part
//   reduce_scatter_sequence  forward: reduce-scatter (dim 1)  backward: all-gather (dim 1)
//   scatter_sequence         forward: take own part (dim 1)   backward: all-gather (dim 1)
//
// A column-parallel layer then starts with gather_sequence, a row-parallel one ends with
// reduce_scatter_sequence; the embedding's output is scattered and the head's input
// gathered.  (Where the backend has no reduce-scatter — LibTorch 1.13's Gloo between
// hosts — it is an all-reduce of which each rank keeps its part: the same values, twice
// the bytes.)
#include <torch/torch.h>

#include "exec/comm/communicator.h"

namespace quintnet::exec {

// The tensor-parallel group a layer works in; size 1 makes every op an identity.
struct TpContext {
  Communicator* comm = nullptr;
  Group* group = nullptr;
  // Column-parallel layers compute their outputs in fixed blocks so that a shard equals
  // the serial layer's slice bitwise (see parallel_linear.h).  Several small GEMMs cost
  // more than one: only tests that ask for bitwise equality switch it on.
  bool bitwise_invariant = false;
  // Activations outside the tensor-parallel regions split along the sequence (above).
  bool sequence_parallel = false;

  int size() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank : 0; }
};

torch::Tensor copy_to_tp(const torch::Tensor& x, const TpContext& tp);
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TpContext& tp);
torch::Tensor gather_from_tp(const torch::Tensor& x, const TpContext& tp);
torch::Tensor scatter_to_tp(const torch::Tensor& x, const TpContext& tp);

torch::Tensor gather_sequence(const torch::Tensor& x, const TpContext& tp, bool replicated_gradients = false);
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, const TpContext& tp);
torch::Tensor scatter_sequence(const torch::Tensor& x, const TpContext& tp);

// A column-parallel layer's product under sequence parallelism, gather_sequence(x)·Wᵀ + b,
// that keeps only x — this rank's part of the sequence — for the backward and gathers it
// again there (as Megatron-LM does): the gathered input, tp times larger, is not stored.
// weight [out, in], bias [out].
torch::Tensor sequence_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                       const TpContext& tp);

}  // namespace quintnet::exec
