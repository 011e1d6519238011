#include "exec/tp/vocab_parallel.h"

namespace quintnet::exec {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Loss_i = log Σ_v exp(z_iv − m_i) − (z_i,t_i − m_i), with m_i the global max; every sum
// over v is a local sum all-reduced over the group.  Gradient: softmax − one-hot, each
// rank on its own columns.  The tp group is used by the forward only (apply runs it at
// once), so it goes in as a pointer and is not saved for the backward.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor targets, int64_t first,
                               const TpContext* group) {
    const TpContext& tp = *group;
    torch::Tensor z = logits.detach();
    torch::Tensor max = std::get<0>(z.max(-1));
    if (tp.size() > 1) tp.comm->all_reduce_max(*tp.group, max);
    torch::Tensor shifted = z - max.unsqueeze(-1);
    torch::Tensor exp = shifted.exp();
    torch::Tensor sum = exp.sum(-1);
    const int64_t cols = z.size(-1);
    torch::Tensor mine = (targets >= first) & (targets < first + cols);
    torch::Tensor local = (targets - first).clamp(0, cols - 1);
    torch::Tensor target_logit = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1) * mine.to(z.dtype());
    if (tp.size() > 1) {
      torch::Tensor both = torch::stack({sum, target_logit});  // one all-reduce for the two sums
      tp.comm->all_reduce_sum(*tp.group, both);
      sum = both[0];
      target_logit = both[1];
    }
    torch::Tensor ignored = targets < 0;
    torch::Tensor loss = (sum.log() - target_logit).masked_fill(ignored, 0.0);
    ctx->save_for_backward({exp / sum.unsqueeze(-1), local, mine & ~ignored, ignored});
    return loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor softmax = saved[0], local = saved[1], mine = saved[2], ignored = saved[3];
    torch::Tensor g = softmax.clone();
    g.scatter_add_(-1, local.unsqueeze(-1), -mine.to(g.dtype()).unsqueeze(-1));
    g = g * grad[0].masked_fill(ignored, 0.0).unsqueeze(-1);
    return {g, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

VocabShard vocab_shard(int64_t vocab, const TpContext& tp) {
  const int64_t padded = (vocab + tp.size() - 1) / tp.size() * tp.size();
  VocabShard s;
  s.rows = padded / tp.size();
  s.first = tp.rank() * s.rows;
  s.valid = std::max<int64_t>(0, std::min(vocab - s.first, s.rows));
  return s;
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(int64_t vocab, int64_t dim, const TpContext& tp)
    : tp_(tp), vocab_(vocab), shard_(vocab_shard(vocab, tp)) {
  torch::Tensor w = torch::zeros({shard_.rows, dim});
  // GPT-2's initialisation, N(0, 0.02), drawn for the whole vocabulary so every tp
  // degree starts from the same model.
  torch::Tensor full = torch::randn({vocab, dim}) * 0.02;
  if (shard_.valid > 0) w.narrow(0, 0, shard_.valid).copy_(full.narrow(0, shard_.first, shard_.valid));
  weight = register_parameter("weight", w);
}

torch::Tensor VocabParallelEmbeddingImpl::forward(const torch::Tensor& ids) {
  if (tp_.size() == 1) return torch::embedding(weight, ids);
  torch::Tensor mine = (ids >= shard_.first) & (ids < shard_.first + shard_.valid);
  torch::Tensor local = (ids - shard_.first).masked_fill(~mine, 0);
  torch::Tensor out = torch::embedding(weight, local) * mine.unsqueeze(-1).to(weight.dtype());
  return reduce_from_tp(out, tp_);
}

torch::Tensor VocabParallelEmbeddingImpl::logits(const torch::Tensor& h) {
  torch::Tensor x = copy_to_tp(h, tp_);  // every rank needs all of h; its gradient is summed
  return torch::matmul(x, weight.narrow(0, 0, shard_.valid).t());
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& targets,
                                           int64_t first, const TpContext& tp) {
  return VocabParallelCrossEntropy::apply(local_logits, targets, first, &tp);
}

}  // namespace quintnet::exec
