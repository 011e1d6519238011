#include "exec/cp/ring_attention.h"

#include "exec/trace/trace_recorder.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

namespace quintnet::exec {
namespace {

using torch::Tensor;

// Tags of the ring's messages within the cp group: a forward hop s, a backward hop s.
constexpr int kForwardTag = 0;
constexpr int kBackwardTag = 1 << 20;

// The layout inside: [B, heads, tokens, d] fp32, this rank's two chunks one after the other.
struct Shapes {
  int64_t chunk = 0;   // tokens per chunk
  int64_t groups = 1;  // query heads per key/value head
  double scale = 1.0;  // 1/√d
};

Tensor half_of(const Tensor& x, int half, int64_t chunk) { return x.narrow(2, half * chunk, chunk); }

// A key/value block's heads repeated for the query heads that read them.
Tensor for_queries(const Tensor& kv, int64_t groups) { return groups == 1 ? kv : kv.repeat_interleave(groups, 1); }

// A query-head gradient summed back onto its key/value head.
Tensor onto_kv_heads(const Tensor& g, int64_t groups) {
  if (groups == 1) return g;
  return g.view({g.size(0), g.size(1) / groups, groups, g.size(2), g.size(3)}).sum(2);
}

// q's scores against one key chunk, the future masked where the chunks are the same one.
Tensor scores(const Tensor& q, const Tensor& k, bool diagonal, const Shapes& s) {
  Tensor x = torch::matmul(q, k.transpose(-2, -1)) * s.scale;
  if (diagonal) {
    const Tensor future = torch::ones({s.chunk, s.chunk}, q.options().dtype(torch::kBool)).triu(1);
    x = x.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  return x;
}

// A hop of the ring on the trace's p2p lane, from its send to its receive (kind cp-ring).
void traced_hop(const CpContext& cp, const std::string& what, TraceRecorder::Clock::time_point start, const Tensor& t) {
  TraceRecorder* r = cp.comm->tracer();
  if (!r || !r->active()) return;
  const int next = cp.group->ranks[(cp.rank() + 1) % cp.size()];
  r->event(core::Lane::P2P, "cp-ring", "cp ring: " + what + " to rank " + std::to_string(next), start,
           TraceRecorder::Clock::now(), -1, -1, t.numel() * t.element_size(), next);
}

void wait_sent(const CpContext& cp, c10d::Work& sent) {
  cp.comm->wait(sent, "context-parallel send to rank " + std::to_string(cp.group->ranks[(cp.rank() + 1) % cp.size()]));
}

// Sends `block` to the next rank of the ring while `compute` runs, and returns what the
// previous rank sent (the same shape).
template <typename Compute>
Tensor pass_on(const CpContext& cp, Tensor block, int tag, Compute compute) {
  const int n = cp.size(), next = (cp.rank() + 1) % n, previous = (cp.rank() + n - 1) % n;
  const auto start = TraceRecorder::Clock::now();
  auto sent = cp.comm->send_async(*cp.group, block, next, tag);
  compute();
  Tensor received = torch::empty_like(block);
  cp.comm->recv(*cp.group, received, previous, tag);
  wait_sent(cp, *sent);
  traced_hop(cp, "keys and values", start, block);
  return received;
}

// For each of this rank's query halves and each chunk of the key/value block that cp
// rank `owner` holds: whether the causal mask leaves anything to compute, and whether
// the pair sits on the diagonal.
template <typename Visit>
void visible_pairs(const CpContext& cp, int owner, Visit visit) {
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      const int query_chunk = cp.chunk_of(cp.rank(), a), key_chunk = cp.chunk_of(owner, b);
      if (key_chunk <= query_chunk) visit(a, b, key_chunk == query_chunk);
    }
}

struct Forward {
  Tensor out;  // [B, H, T, d]
  Tensor lse;  // [B, H, T]: log Σ exp(scores) over all keys each query sees
};

Forward ring_forward(const Tensor& q, const Tensor& k, const Tensor& v, const CpContext& cp, const Shapes& s) {
  const int n = cp.size();
  Tensor out[2], lse[2];
  for (int a = 0; a < 2; ++a) {
    out[a] = torch::zeros_like(half_of(q, a, s.chunk));
    lse[a] = torch::full({q.size(0), q.size(1), s.chunk}, -std::numeric_limits<float>::infinity(), q.options());
  }
  Tensor block = torch::stack({k, v}).contiguous();  // [2, B, KV, T, d]
  for (int step = 0; step < n; ++step) {
    const int owner = (cp.rank() + n - step) % n;
    auto attend = [&] {
      visible_pairs(cp, owner, [&](int a, int b, bool diagonal) {
        const Tensor x = scores(half_of(q, a, s.chunk), for_queries(half_of(block[0], b, s.chunk), s.groups), diagonal, s);
        const Tensor x_lse = x.logsumexp(-1);
        const Tensor part = torch::matmul(torch::exp(x - x_lse.unsqueeze(-1)), for_queries(half_of(block[1], b, s.chunk), s.groups));
        // The online softmax: both partial results rescaled to the new total.
        const Tensor total = torch::logaddexp(lse[a], x_lse);
        out[a] = out[a] * torch::exp(lse[a] - total).unsqueeze(-1) + part * torch::exp(x_lse - total).unsqueeze(-1);
        lse[a] = total;
      });
    };
    if (step + 1 < n)
      block = pass_on(cp, block, kForwardTag + step, attend);
    else
      attend();
  }
  return {torch::cat({out[0], out[1]}, 2), torch::cat({lse[0], lse[1]}, 2)};
}

struct Gradients {
  Tensor dq, dk, dv;  // [B, H|KV, T, d]
};

Gradients ring_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Forward& f, const Tensor& dout,
                        const CpContext& cp, const Shapes& s) {
  const int n = cp.size(), next = (cp.rank() + 1) % n, previous = (cp.rank() + n - 1) % n;
  const Tensor delta = (dout * f.out).sum(-1);  // Σ_j P_ij dP_ij per query: the softmax's backward term
  Tensor dq = torch::zeros_like(q);
  Tensor block = torch::stack({k, v}).contiguous();  // the key/value block this rank holds now
  Tensor block_grad = torch::zeros_like(block);      // its dK, dV so far
  for (int step = 0; step < n; ++step) {
    const int owner = (cp.rank() + n - step) % n;
    // The block moves on at once (the next rank needs it, not this rank's share of its
    // gradient); its gradient follows once this rank has added its share.
    const bool block_moves = step + 1 < n;
    const auto start = TraceRecorder::Clock::now();
    c10::intrusive_ptr<c10d::Work> block_sent;
    if (block_moves) block_sent = cp.comm->send_async(*cp.group, block, next, kBackwardTag + 2 * step);
    visible_pairs(cp, owner, [&](int a, int b, bool diagonal) {
      const Tensor qa = half_of(q, a, s.chunk), doa = half_of(dout, a, s.chunk);
      const Tensor kb = for_queries(half_of(block[0], b, s.chunk), s.groups);
      const Tensor vb = for_queries(half_of(block[1], b, s.chunk), s.groups);
      const Tensor p = torch::exp(scores(qa, kb, diagonal, s) - half_of(f.lse.unsqueeze(-1), a, s.chunk));
      const Tensor dp = torch::matmul(doa, vb.transpose(-2, -1));
      const Tensor ds = p * (dp - half_of(delta.unsqueeze(-1), a, s.chunk)) * s.scale;
      half_of(dq, a, s.chunk).add_(torch::matmul(ds, kb));
      half_of(block_grad[0], b, s.chunk).add_(onto_kv_heads(torch::matmul(ds.transpose(-2, -1), qa), s.groups));
      half_of(block_grad[1], b, s.chunk).add_(onto_kv_heads(torch::matmul(p.transpose(-2, -1), doa), s.groups));
    });
    if (n == 1) break;
    // After the last step each gradient takes one more hop: home, to the block's owner.
    const auto grad_start = TraceRecorder::Clock::now();
    auto grad_sent = cp.comm->send_async(*cp.group, block_grad, next, kBackwardTag + 2 * step + 1);
    Tensor received_grad = torch::empty_like(block_grad);
    cp.comm->recv(*cp.group, received_grad, previous, kBackwardTag + 2 * step + 1);
    if (block_moves) {
      Tensor received = torch::empty_like(block);
      cp.comm->recv(*cp.group, received, previous, kBackwardTag + 2 * step);
      wait_sent(cp, *block_sent);
      traced_hop(cp, "keys and values", start, block);
      block = received;
    }
    wait_sent(cp, *grad_sent);
    traced_hop(cp, "their gradients", grad_start, block_grad);
    block_grad = received_grad;
  }
  return {dq, block_grad[0], block_grad[1]};
}

// [B, T, heads, d] <-> [B, heads, T, d]
Tensor heads_first(const Tensor& x) { return x.transpose(1, 2).to(torch::kFloat32).contiguous(); }
// A fresh tensor (never a view): the ring's output gets its own autograd history.
Tensor tokens_first(const Tensor& x, torch::ScalarType dtype) {
  return x.transpose(1, 2).to(dtype, /*non_blocking=*/false, /*copy=*/true, torch::MemoryFormat::Contiguous);
}

// The autograd node of one ring attention: it keeps the cp group for the backward's ring.
class RingAttentionBackward : public torch::autograd::Node {
 public:
  RingAttentionBackward(CpContext cp, Shapes s, Tensor q, Tensor k, Tensor v, Forward f, torch::ScalarType q_dtype,
                        torch::ScalarType kv_dtype)
      : cp_(cp), s_(s), q_(std::move(q)), k_(std::move(k)), v_(std::move(v)), f_(std::move(f)), q_dtype_(q_dtype),
        kv_dtype_(kv_dtype) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    torch::NoGradGuard no_grad;
    const Gradients g = ring_backward(q_, k_, v_, f_, heads_first(grads[0]), cp_, s_);
    return {tokens_first(g.dq, q_dtype_), tokens_first(g.dk, kv_dtype_), tokens_first(g.dv, kv_dtype_)};
  }
  std::string name() const override { return "RingAttentionBackward"; }
  void release_variables() override { q_ = k_ = v_ = f_.out = f_.lse = Tensor(); }

 private:
  CpContext cp_;
  Shapes s_;
  Tensor q_, k_, v_;
  Forward f_;
  torch::ScalarType q_dtype_, kv_dtype_;
};

// A new autograd node, held as this LibTorch holds them: 1.13 in shared pointers, later
// versions in intrusive ones (the type of Edge::function says which).
template <typename N, typename... Args>
auto make_node(Args&&... args) {
  using Owner = decltype(torch::autograd::Edge::function);
  if constexpr (std::is_same_v<Owner, std::shared_ptr<torch::autograd::Node>>)
    return std::make_shared<N>(std::forward<Args>(args)...);
  else
    return c10::make_intrusive<N>(std::forward<Args>(args)...);
}

}  // namespace

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const CpContext& cp) {
  TORCH_CHECK(q.size(1) % 2 == 0, "ring_attention: ", q.size(1), " tokens are not two equal chunks");
  TORCH_CHECK(q.size(2) % k.size(2) == 0, "ring_attention: ", q.size(2), " query heads for ", k.size(2), " key/value heads");
  Shapes s;
  s.chunk = q.size(1) / 2;
  s.groups = q.size(2) / k.size(2);
  s.scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  Tensor qh, kh, vh;
  Forward f;
  {
    // Computed outside autograd (the node below is the backward) and outside autocast
    // (the online softmax's running sums stay fp32).
    torch::NoGradGuard no_grad;
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    qh = heads_first(q), kh = heads_first(k), vh = heads_first(v);
    f = ring_forward(qh, kh, vh, cp, s);
  }
  Tensor out = tokens_first(f.out, q.scalar_type());  // outside no-grad: it takes the node below
  if (torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())) {
    auto node = make_node<RingAttentionBackward>(cp, s, qh, kh, vh, std::move(f), q.scalar_type(), k.scalar_type());
    node->set_next_edges(torch::autograd::collect_next_edges(q, k, v));
    torch::autograd::create_gradient_edge(out, node);
  }
  return out;
}

}  // namespace quintnet::exec
