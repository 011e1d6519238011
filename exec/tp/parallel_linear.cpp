#include "exec/tp/parallel_linear.h"

#include <cmath>

#include "exec/precision/autocast.h"

namespace quintnet::exec {
namespace {

int64_t shard(int64_t n, const TpContext& tp, const char* what) {
  TORCH_CHECK(n % tp.size() == 0, what, " ", n, " is not divisible by tp ", tp.size());
  return n / tp.size();
}

// The serial layer's initialisation (PyTorch's nn.Linear: U(-1/sqrt(in), 1/sqrt(in)));
// parallel layers are normally loaded from a serial model, see models/.
void init_like_linear(torch::Tensor& w, torch::Tensor& b, int64_t in_features) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  torch::NoGradGuard no_grad;
  w.uniform_(-bound, bound);
  if (b.defined()) b.uniform_(-bound, bound);
}

}  // namespace

// The whole input of a column-parallel layer: the same tensor on every rank, or under
// sequence parallelism the ranks' parts of the sequence gathered.
torch::Tensor column_input(const torch::Tensor& x, const TpContext& tp) {
  return tp.sequence_parallel ? gather_sequence(x, tp) : copy_to_tp(x, tp);
}

namespace {

// Under sequence parallelism the product keeps only this rank's part of its input
// (sequence_parallel_linear) — except under autocast, whose casts that function does not
// replay, and for bitwise-invariant tests, which need the blocked GEMMs.
bool keeps_sequence_part(const torch::Tensor& x, const TpContext& tp) {
  return tp.sequence_parallel && tp.size() > 1 && !tp.bitwise_invariant && !autocast_active(x.device());
}

}  // namespace

ColumnParallelLinearImpl::ColumnParallelLinearImpl(int64_t in_features, int64_t out_features, const TpContext& tp,
                                                   bool gather_output, bool with_bias)
    : tp_(tp), gather_output_(gather_output) {
  const int64_t local_out = shard(out_features, tp, "ColumnParallelLinear: out_features");
  weight = register_parameter("weight", torch::empty({local_out, in_features}));
  if (with_bias) bias = register_parameter("bias", torch::empty({local_out}));
  init_like_linear(weight, bias, in_features);
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  const int64_t out = weight.size(0);
  torch::Tensor y;
  if (keeps_sequence_part(x, tp_)) {
    y = sequence_parallel_linear(x, weight, bias, tp_);
  } else if (!tp_.bitwise_invariant || out % kOutputBlock != 0 || out == kOutputBlock) {
    y = torch::nn::functional::linear(column_input(x, tp_), weight, bias);
  } else {
    const torch::Tensor input = column_input(x, tp_);
    std::vector<torch::Tensor> blocks;
    for (int64_t start = 0; start < out; start += kOutputBlock)
      blocks.push_back(torch::nn::functional::linear(input, weight.narrow(0, start, kOutputBlock),
                                                     bias.defined() ? bias.narrow(0, start, kOutputBlock) : bias));
    y = torch::cat(blocks, -1);
  }
  return gather_output_ ? gather_from_tp(y, tp_) : y;
}

void ColumnParallelLinearImpl::load_full(const torch::Tensor& w, const torch::Tensor& b) {
  torch::NoGradGuard no_grad;
  weight.copy_(w.chunk(tp_.size(), 0)[tp_.rank()]);
  if (bias.defined()) bias.copy_(b.chunk(tp_.size(), 0)[tp_.rank()]);
}

RowParallelLinearImpl::RowParallelLinearImpl(int64_t in_features, int64_t out_features, const TpContext& tp,
                                             bool input_is_parallel, bool with_bias)
    : tp_(tp), input_is_parallel_(input_is_parallel) {
  const int64_t local_in = shard(in_features, tp, "RowParallelLinear: in_features");
  weight = register_parameter("weight", torch::empty({out_features, local_in}));
  if (with_bias) bias = register_parameter("bias", torch::empty({out_features}));
  init_like_linear(weight, bias, in_features);
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor local = input_is_parallel_ ? x : scatter_to_tp(x, tp_);
  torch::Tensor partial = torch::matmul(local, weight.t());
  // Under sequence parallelism each rank keeps its part of the sequence of the sum (and
  // adds the bias to it: its gradient is then partial, summed by the trainer).
  const torch::Tensor sum = tp_.sequence_parallel ? reduce_scatter_sequence(partial, tp_) : reduce_from_tp(partial, tp_);
  return bias.defined() ? sum + bias : sum;
}

void RowParallelLinearImpl::load_full(const torch::Tensor& w, const torch::Tensor& b) {
  torch::NoGradGuard no_grad;
  weight.copy_(w.chunk(tp_.size(), 1)[tp_.rank()]);
  if (bias.defined()) bias.copy_(b);
}

}  // namespace quintnet::exec

namespace quintnet::exec {

KeyValueParallelLinearImpl::KeyValueParallelLinearImpl(int64_t in_features, int64_t heads, int64_t head_dim,
                                                       const TpContext& tp)
    : tp_(tp), heads_(heads), head_dim_(head_dim) {
  TORCH_CHECK(heads % tp.size() == 0 || tp.size() % heads == 0, "KeyValueParallelLinear: ", heads,
              " key/value heads and tp ", tp.size(), ": one must divide the other");
  weight = register_parameter("weight", torch::empty({local_heads() * head_dim * (sharded() ? 1 : heads), in_features}));
  torch::Tensor no_bias;
  init_like_linear(weight, no_bias, in_features);
}

torch::Tensor KeyValueParallelLinearImpl::forward(const torch::Tensor& x) {
  // Replicated: the head this rank's query heads read (ranks r·g/tp .. share it).
  const torch::Tensor w = sharded() ? weight : weight.narrow(0, tp_.rank() * heads_ / tp_.size() * head_dim_, head_dim_);
  return keeps_sequence_part(x, tp_) ? sequence_parallel_linear(x, w, {}, tp_)
                                     : torch::nn::functional::linear(column_input(x, tp_), w);
}

QkvParallelLinearImpl::QkvParallelLinearImpl(int64_t in_features, int64_t out_features, const TpContext& tp) : tp_(tp) {
  const int64_t local_out = out_features / tp.size();
  TORCH_CHECK(out_features % tp.size() == 0, "QkvParallelLinear: out_features ", out_features,
              " is not divisible by tp ", tp.size());
  weight = register_parameter("weight", torch::empty({3, local_out, in_features}));
  bias = register_parameter("bias", torch::empty({3, local_out}));
  torch::Tensor w = weight.view({3 * local_out, in_features}), b = bias.view({3 * local_out});
  init_like_linear(w, b, in_features);
}

std::vector<torch::Tensor> QkvParallelLinearImpl::forward(const torch::Tensor& x) {
  const int64_t local_out = weight.size(1);
  const torch::Tensor w = weight.view({3 * local_out, weight.size(2)}), b = bias.view({-1});
  torch::Tensor y = keeps_sequence_part(x, tp_) ? sequence_parallel_linear(x, w, b, tp_)
                                                : torch::nn::functional::linear(column_input(x, tp_), w, b);
  return y.chunk(3, -1);
}

}  // namespace quintnet::exec
