#include "exec/models/chunked_cross_entropy.h"

#include <algorithm>

namespace quintnet::exec {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets) {
    const int64_t n = logits.size(0), block = cross_entropy_block_rows(logits);
    torch::Tensor lse = torch::empty({n}, logits.options().dtype(torch::kFloat32));
    torch::Tensor sum = torch::zeros({}, lse.options());
    for (int64_t at = 0; at < n; at += block) {
      const int64_t rows = std::min(block, n - at);
      const torch::Tensor x = logits.narrow(0, at, rows).to(torch::kFloat32);
      const torch::Tensor t = targets.narrow(0, at, rows);
      const torch::Tensor l = x.logsumexp(1);
      lse.narrow(0, at, rows).copy_(l);
      const torch::Tensor picked = x.gather(1, t.clamp_min(0).unsqueeze(1)).squeeze(1);
      sum += (l - picked).masked_fill(t < 0, 0.0).sum();
    }
    ctx->save_for_backward({logits, targets, lse});
    return sum;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &targets = saved[1], &lse = saved[2];
    const torch::Tensor g = grad_outputs[0].to(torch::kFloat32);
    const int64_t n = logits.size(0), block = cross_entropy_block_rows(logits);
    torch::Tensor grad = torch::empty_like(logits);
    for (int64_t at = 0; at < n; at += block) {
      const int64_t rows = std::min(block, n - at);
      const torch::Tensor t = targets.narrow(0, at, rows);
      // d/dx of (lse - x[t]) = softmax(x) - onehot(t); rows without a target: 0.
      torch::Tensor p = (logits.narrow(0, at, rows).to(torch::kFloat32) - lse.narrow(0, at, rows).unsqueeze(1)).exp_();
      p.scatter_add_(1, t.clamp_min(0).unsqueeze(1), torch::full({rows, 1}, -1.0, p.options()));
      p.mul_((t >= 0).unsqueeze(1).to(torch::kFloat32) * g);
      grad.narrow(0, at, rows).copy_(p);
    }
    return {grad, torch::Tensor()};
  }
};

}  // namespace

int64_t cross_entropy_block_rows(const torch::Tensor& logits) {
  const int64_t budget = logits.is_cuda() ? (int64_t{1} << 26) : (int64_t{1} << 22);
  return std::max<int64_t>(1, budget / std::max<int64_t>(1, logits.size(1)));
}

torch::Tensor chunked_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets) {
  return ChunkedCrossEntropy::apply(logits, targets);
}

}  // namespace quintnet::exec
