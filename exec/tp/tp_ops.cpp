#include "exec/tp/tp_ops.h"

#include "exec/trace/trace_recorder.h"

namespace quintnet::exec {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The TpContext travels through autograd as an address in saved_data; the layers
// that own it outlive every graph built through them.
int64_t pack(const TpContext* tp) { return reinterpret_cast<int64_t>(tp); }
const TpContext& unpack(AutogradContext* ctx) {
  return *reinterpret_cast<const TpContext*>(ctx->saved_data["tp"].toInt());
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
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_reduce(g[0], unpack(ctx)), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return all_reduce(x, *reinterpret_cast<const TpContext*>(tp));
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], torch::Tensor()}; }
};

struct GatherFromTp : torch::autograd::Function<GatherFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    const TpContext& c = *reinterpret_cast<const TpContext*>(tp);
    return c.comm->all_gather(*c.group, x, -1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {own_slice(g[0], unpack(ctx)), torch::Tensor()};
  }
};

struct ScatterToTp : torch::autograd::Function<ScatterToTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return own_slice(x, *reinterpret_cast<const TpContext*>(tp));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const TpContext& c = unpack(ctx);
    return {c.comm->all_gather(*c.group, g[0], -1), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor copy_to_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : CopyToTp::apply(x, pack(&tp));
}
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : ReduceFromTp::apply(x, pack(&tp));
}
torch::Tensor gather_from_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : GatherFromTp::apply(x, pack(&tp));
}
torch::Tensor scatter_to_tp(const torch::Tensor& x, const TpContext& tp) {
  return tp.size() == 1 ? x : ScatterToTp::apply(x, pack(&tp));
}

}  // namespace quintnet::exec
