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

torch::Tensor all_reduce(const torch::Tensor& x, const TpContext& tp) {
  torch::Tensor out = x.contiguous().clone();
  const auto start = TraceRecorder::Clock::now();
  tp.comm->all_reduce_sum(*tp.group, out);
  if (TraceRecorder* t = tp.comm->tracer())
    t->event(core::Lane::TpCollective, "allreduce", "tp all-reduce", start, TraceRecorder::Clock::now(), -1, -1,
             out.numel() * out.element_size());
  return out;
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

}  // namespace quintnet::exec
