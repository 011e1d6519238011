#include "exec/models/attention.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <atomic>
#include <cmath>
#include <limits>

#include "exec/kernels/attention_cpu.h"
#include "exec/models/random_state.h"
#include "exec/models/recompute.h"
#include "exec/precision/autocast.h"

namespace quintnet::exec {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<long> cores_recomputed{0};

// q, k, v as the kernel reads them: the same strides, the head dim contiguous.
bool kernel_can_read(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  for (const torch::Tensor* t : {&q, &k, &v})
    if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat32 || t->dim() != 4 || t->stride(3) != 1 ||
        t->stride(2) != t->size(3) || t->strides() != q.strides() || t->sizes() != q.sizes())
      return false;
  return true;
}

kernels::AttentionDims dims_of(const torch::Tensor& q, bool causal) {
  kernels::AttentionDims s;
  s.batch = q.size(0);
  s.tokens = q.size(1);
  s.heads = q.size(2);
  s.head_dim = q.size(3);
  s.stride_b = q.stride(0);
  s.stride_t = q.stride(1);
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  s.causal = causal;
  return s;
}

// (batch, head) pairs are independent: split them over the intra-op threads.
template <class F>
void for_each_head(const kernels::AttentionDims& s, F f) {
  const int64_t pairs = s.batch * s.heads;
  const int64_t work = s.tokens * s.tokens * s.head_dim;  // per pair
  at::parallel_for(0, pairs, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work)), f);
}

// keep_probs false (selective recomputation): the backward runs the forward kernel
// again for the softmax instead of keeping it between the passes.
struct FusedAttention : torch::autograd::Function<FusedAttention> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal,
                               bool keep_probs) {
    torch::Tensor out = torch::empty(q.sizes(), q.options());
    torch::Tensor probs = softmax_and_output(q, k, v, causal, out);
    ctx->save_for_backward(keep_probs ? variable_list{q, k, v, probs} : variable_list{q, k, v});
    ctx->saved_data["causal"] = causal;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const bool causal = ctx->saved_data["causal"].toBool();
    torch::Tensor probs;
    if (saved.size() == 4) {
      probs = saved[3];
    } else {
      torch::Tensor unused_out = torch::empty(q.sizes(), q.options());
      probs = softmax_and_output(q, k, v, causal, unused_out);
      ++cores_recomputed;
    }
    const kernels::AttentionDims s = dims_of(q, causal);
    const torch::Tensor dout = grads[0].contiguous();
    torch::Tensor dq = torch::empty(q.sizes(), q.options()), dk = torch::empty(q.sizes(), q.options()),
                  dv = torch::empty(q.sizes(), q.options());
    for_each_head(s, [&](int64_t first, int64_t last) {
      kernels::attention_backward(s, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                  probs.data_ptr<float>(), dout.data_ptr<float>(), dq.data_ptr<float>(),
                                  dk.data_ptr<float>(), dv.data_ptr<float>(), first, last);
    });
    return {dq, dk, dv, torch::Tensor(), torch::Tensor()};
  }

  // The kernel's forward into `out`; returns the softmax [B, H, T, T].
  static torch::Tensor softmax_and_output(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          bool causal, torch::Tensor& out) {
    const kernels::AttentionDims s = dims_of(q, causal);
    torch::Tensor probs = torch::empty({s.batch, s.heads, s.tokens, s.tokens}, q.options());
    for_each_head(s, [&](int64_t first, int64_t last) {
      kernels::attention_forward(s, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                 out.data_ptr<float>(), probs.data_ptr<float>(), first, last);
    });
    return probs;
  }
};

torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                        double dropout, bool training) {
  const int64_t t = q.size(1);
  // [B, T, H, d] -> [B, H, T, d]; the 1/√d scale on q ([.., T, d]), not on the scores ([.., T, T]).
  const torch::Tensor qh = q.transpose(1, 2) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));
  torch::Tensor scores = torch::matmul(qh, k.transpose(1, 2).transpose(-2, -1));
  if (causal) {
    const torch::Tensor future = torch::ones({t, t}, q.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  const torch::Tensor weights = torch::dropout(torch::softmax(scores, -1), dropout, training);
  return torch::matmul(weights, v.transpose(1, 2)).transpose(1, 2).contiguous();
}

// The composition under selective recomputation: the forward keeps q, k, v, the
// generator's state (for the dropout masks) and whether autocast was on; the backward
// runs the composition again as it ran and differentiates it.
struct RecomputedReference : torch::autograd::Function<RecomputedReference> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal,
                               double dropout, bool training) {
    ctx->save_for_backward({q, k, v});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["training"] = training;
    ctx->saved_data["autocast"] = autocast_active(q.device());
    if (training && dropout > 0.0) ctx->saved_data["random_state"] = random_state(q.device());
    return reference(q, k, v, causal, dropout, training);  // a custom forward records no graph
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list qkv = ctx->get_saved_variables();
    for (torch::Tensor& t : qkv) t = t.detach().requires_grad_(true);
    const torch::Device device = qkv[0].device();
    const bool draws = ctx->saved_data.count("random_state") > 0;
    const torch::Tensor now = draws ? swap_random_state(device, ctx->saved_data["random_state"].toTensor()) : torch::Tensor();
    torch::Tensor out;
    {
      torch::AutoGradMode with_graph(true);
      AutocastScope autocast(ctx->saved_data["autocast"].toBool(), device);
      out = reference(qkv[0], qkv[1], qkv[2], ctx->saved_data["causal"].toBool(), ctx->saved_data["dropout"].toDouble(),
                      ctx->saved_data["training"].toBool());
    }
    if (draws) swap_random_state(device, now);  // the masks after this one come as they would have
    ++cores_recomputed;
    variable_list d = torch::autograd::grad({out}, qkv, {grads[0]});
    return {d[0], d[1], d[2], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// The composition, recomputed in the backward under selective recomputation.
torch::Tensor composition(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                          double dropout, bool training) {
  if (recomputing(Recompute::Selective))
    return RecomputedReference::apply(q, k, v, causal, dropout, training);
  return reference(q, k, v, causal, dropout, training);
}

}  // namespace

long attention_cores_recomputed() { return cores_recomputed.load(); }

torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                                  double dropout, bool training) {
  return reference(q, k, v, causal, dropout, training);
}

bool sdpa_available() { return TORCH_VERSION_MAJOR >= 2; }

torch::Tensor attention_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                             double dropout) {
#if TORCH_VERSION_MAJOR >= 2
  // SDPA takes [B, H, T, d]: transposed views, no copies.
  return at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), {}, dropout, causal)
      .transpose(1, 2)
      .contiguous();
#else
  (void)q, (void)k, (void)v, (void)causal, (void)dropout;
  throw std::logic_error("attention_sdpa: needs LibTorch 2.x (check sdpa_available())");
#endif
}

torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                             double dropout, bool training) {
  const double p = training ? dropout : 0.0;
  // On a GPU, LibTorch 2.x's flash / memory-efficient kernels, dropout included: they
  // draw the mask inside the kernel (Philox, from the CUDA generator, so full
  // recomputation redraws it) and never write the [B, H, T, T] weights — the
  // composition below wrote them in fp32, forward and backward, in every layer.
  if (sdpa_available() && q.device().is_cuda()) return attention_sdpa(q, k, v, causal, p);
  if (p > 0.0) return composition(q, k, v, causal, dropout, training);
  // On the CPU for heads 64 wide or more its flash kernel beats ours (attention_bench
  // on 2.15, forward + backward: 5.8 vs 7.6 ms for GPT-2 124M's heads; ours wins on the
  // 16-wide heads of the ViT and the Brown GPT-2, 1.2 vs 1.4 ms and 0.75 vs 0.91 ms).
  // With dropout the CPU keeps the composition: its masks are the ones the equivalence
  // tests and the recomputation draw alike.
  if (sdpa_available() && q.size(3) >= 64) return attention_sdpa(q, k, v, causal);
  if (q.device().is_cpu() && q.scalar_type() == torch::kBFloat16) {
    // In bf16 (autocast, or bf16 weights): the kernel in fp32 on upcast copies (as
    // LibTorch's own CPU attention accumulates in fp32), its output rounded back to bf16
    // — what autocast's next projection would do to it anyway.
    const torch::Tensor qf = q.to(torch::kFloat32), kf = k.to(torch::kFloat32), vf = v.to(torch::kFloat32);
    if (kernel_can_read(qf, kf, vf))
      return FusedAttention::apply(qf, kf, vf, causal, !recomputing(Recompute::Selective)).to(torch::kBFloat16);
  }
  if (!kernel_can_read(q, k, v)) return composition(q, k, v, causal, dropout, training);
  return FusedAttention::apply(q, k, v, causal, !recomputing(Recompute::Selective));
}

}  // namespace quintnet::exec
