#include "exec/tp/tp_ops.h"

#include "exec/trace/trace_recorder.h"

namespace quintnet::exec {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A backward pass needs the tp group its forward used.  autograd keeps what a
// Function saves as IValues; a capsule holds a copy of the TpContext (two pointers
// to the run's communicator and group, which outlive every graph) with its type.
struct SavedTpContext : torch::CustomClassHolder {
  explicit SavedTpContext(const TpContext& c) : tp(c) {}
  TpContext tp;
};
void save(AutogradContext* ctx, const TpContext& tp) {
  ctx->saved_data["tp"] = c10::IValue::make_capsule(c10::make_intrusive<SavedTpContext>(tp));
}
const TpContext& saved(AutogradContext* ctx) {
  return static_cast<const SavedTpContext*>(ctx->saved_data["tp"].toCapsule().get())->tp;
}

// A tp collective on the trace's tp-collective lane.
void traced(const TpContext& tp, const char* kind, const char* name, TraceRecorder::Clock::time_point start,
            const torch::Tensor& t) {
  if (TraceRecorder* r = tp.comm->tracer())
    r->event(core::Lane::TpCollective, kind, name, start, TraceRecorder::Clock::now(), -1, -1,
             t.numel() * t.element_size());
}

torch::Tensor all_reduce(const torch::Tensor& x, const TpContext& tp) {
  torch::Tensor out = x.contiguous().clone();
  const auto start = TraceRecorder::Clock::now();
  tp.comm->all_reduce_sum(*tp.group, out);
  traced(tp, "allreduce", "tp all-reduce", start, out);
  return out;
}

// Sequence parallelism's collectives along dim 1.
void check_tokens_divide(const torch::Tensor& x, const TpContext& tp) {
  TORCH_CHECK(x.size(1) % tp.size() == 0, "sequence parallel: ", x.size(1), " tokens are not divisible by tp ", tp.size());
}
torch::Tensor own_part(const torch::Tensor& x, const TpContext& tp) {
  check_tokens_divide(x, tp);
  return x.chunk(tp.size(), 1)[tp.rank()].contiguous();
}
torch::Tensor all_gather_sequence(const torch::Tensor& x, const TpContext& tp) {
  const auto start = TraceRecorder::Clock::now();
  torch::Tensor out = tp.comm->all_gather(*tp.group, x.contiguous(), 1);
  traced(tp, "allgather", "tp all-gather (sequence)", start, out);
  return out;
}
torch::Tensor reduce_scatter(const torch::Tensor& x, const TpContext& tp) {
  const auto start = TraceRecorder::Clock::now();
  if (!tp.comm->can_reduce_scatter(*tp.group, x)) {  // LibTorch 1.13's Gloo, bf16: an all-reduce, then this rank's part
    torch::Tensor sum = x.contiguous().clone();
    tp.comm->all_reduce_sum(*tp.group, sum);
    torch::Tensor out = own_part(sum, tp);
    traced(tp, "reducescatter", "tp reduce-scatter (sequence)", start, sum);
    return out;
  }
  check_tokens_divide(x, tp);
  // Sequence first, so that the tp parts of the sequence lie one after another.
  torch::Tensor in = x.transpose(0, 1).contiguous();
  std::vector<int64_t> part_shape = in.sizes().vec();
  part_shape[0] /= tp.size();
  torch::Tensor part = torch::empty(part_shape, in.options());
  if (auto work = tp.comm->reduce_scatter_sum_async(*tp.group, in, part)) tp.comm->wait(*work, "tp reduce-scatter (sequence)");
  traced(tp, "reducescatter", "tp reduce-scatter (sequence)", start, in);
  return part.transpose(0, 1).contiguous();
}

torch::Tensor own_slice(const torch::Tensor& x, const TpContext& tp) {
  const int64_t last = x.size(-1);
  TORCH_CHECK(last % tp.size() == 0, "tensor parallel: last dimension ", last, " not divisible by tp ", tp.size());
  return x.chunk(tp.size(), -1)[tp.rank()].contiguous();
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp) {
    save(ctx, tp);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_reduce(g[0], saved(ctx)), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp) {
    save(ctx, tp);
    return all_reduce(x, tp);
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], torch::Tensor()}; }
};

struct GatherFromTp : torch::autograd::Function<GatherFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp) {
    save(ctx, tp);
    return tp.comm->all_gather(*tp.group, x, -1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {own_slice(g[0], saved(ctx)), torch::Tensor()};
  }
};

struct ScatterToTp : torch::autograd::Function<ScatterToTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp) {
    save(ctx, tp);
    return own_slice(x, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const TpContext& c = saved(ctx);
    return {c.comm->all_gather(*c.group, g[0], -1), torch::Tensor()};
  }
};

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp, bool replicated_gradients) {
    save(ctx, tp);
    ctx->saved_data["replicated"] = replicated_gradients;
    return all_gather_sequence(x, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const TpContext& tp = saved(ctx);
    // Partial sums (the column-parallel layer's input gradient) are reduced; gradients
    // every rank computed alike (a replicated head) are only sliced.
    return {ctx->saved_data["replicated"].toBool() ? own_part(g[0], tp) : reduce_scatter(g[0], tp), torch::Tensor(),
            torch::Tensor()};
  }
};

struct ReduceScatterSequence : torch::autograd::Function<ReduceScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp) {
    save(ctx, tp);
    return reduce_scatter(x, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_gather_sequence(g[0], saved(ctx)), torch::Tensor()};
  }
};

struct ScatterSequence : torch::autograd::Function<ScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TpContext& tp) {
    save(ctx, tp);
    return own_part(x, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_gather_sequence(g[0], saved(ctx)), torch::Tensor()};
  }
};

struct SequenceParallelLinear : torch::autograd::Function<SequenceParallelLinear> {
  // No bias here (LibTorch 1.13's custom functions take no undefined tensor): the
  // caller adds it, and autograd sums its gradient.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight, const TpContext& tp) {
    save(ctx, tp);
    ctx->save_for_backward({x, weight});
    return torch::nn::functional::linear(all_gather_sequence(x, tp), weight);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const TpContext& tp = saved(ctx);
    const auto saved_vars = ctx->get_saved_variables();
    const torch::Tensor &x = saved_vars[0], &weight = saved_vars[1];
    const torch::Tensor grad = g[0].contiguous();
    const torch::Tensor full = all_gather_sequence(x, tp);  // again, rather than kept
    const int64_t in = weight.size(1), out = weight.size(0);
    const torch::Tensor grad_2d = grad.reshape({-1, out});
    const torch::Tensor grad_weight = grad_2d.t().mm(full.reshape({-1, in}));
    // Each rank's input gradient is a partial sum over its output features: reduce, and
    // keep this rank's part of the sequence.
    const torch::Tensor grad_x = reduce_scatter(grad.matmul(weight), tp);
    return {grad_x, grad_weight, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor copy_to_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : CopyToTp::apply(x, tp);
}
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : ReduceFromTp::apply(x, tp);
}
torch::Tensor gather_from_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : GatherFromTp::apply(x, tp);
}
torch::Tensor scatter_to_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : ScatterToTp::apply(x, tp);
}

torch::Tensor gather_sequence(const torch::Tensor& x, const TpContext& tp, bool replicated_gradients) {
  return tp.size() == 1 ? x : GatherSequence::apply(x, tp, replicated_gradients);
}
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : ReduceScatterSequence::apply(x, tp);
}
torch::Tensor scatter_sequence(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : ScatterSequence::apply(x, tp);
}
torch::Tensor sequence_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                       const TpContext& tp) {
  if (tp.size() == 1) return torch::nn::functional::linear(x, weight, bias);
  const torch::Tensor y = SequenceParallelLinear::apply(x, weight, tp);
  return bias.defined() ? y + bias : y;
}

}  // namespace quintnet::exec
