#include "exec/models/recompute.h"

#include <atomic>

#include "exec/models/random_state.h"
#include "exec/precision/autocast.h"

namespace quintnet::exec {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local Recompute mode_now = Recompute::None;
std::atomic<long> blocks_run_again{0};

// What the backward needs to run a block's forward again as it ran.
struct BlockCall : torch::CustomClassHolder {
  BlockForward forward;
  std::vector<torch::Tensor> params;  // the block's, in the node's input order
  torch::Tensor random_state;         // the generator's before the forward
  bool autocast = false;
};

// Inputs: the block's input, its parameters (so that their gradients flow out of this
// node's backward into their accumulators: the DP hooks fire there), the call.
struct CheckpointedBlock : torch::autograd::Function<CheckpointedBlock> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor input, at::TensorList /*params: call->params*/,
                               c10::intrusive_ptr<BlockCall> call) {
    ctx->save_for_backward({input});
    call->random_state = random_state(input.device());
    call->autocast = autocast_active(input.device());
    torch::Tensor out = call->forward(input);  // a custom forward records no graph
    ctx->saved_data["call"] = c10::IValue::make_capsule(std::move(call));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto call = c10::static_intrusive_pointer_cast<BlockCall>(ctx->saved_data["call"].toCapsule());
    const torch::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(ctx->needs_input_grad(0));
    const torch::Device device = input.device();
    const torch::Tensor now = swap_random_state(device, call->random_state);
    torch::Tensor out;
    {
      torch::AutoGradMode with_graph(true);
      AutocastScope autocast(call->autocast, device);
      out = call->forward(input);
    }
    swap_random_state(device, now);  // the masks after this one come as they would have
    ++blocks_run_again;
    // Differentiate towards what this backward pass asks for: the input (B, BI), the
    // parameters (B, BW: ZB-H1 asks for them apart), or both.  Slot 0 is the input,
    // 1 + i parameter i; the last (the call) gets no gradient.
    const size_t n = call->params.size();
    variable_list wrt, result(1 + n + 1);
    std::vector<size_t> slots;
    if (ctx->needs_input_grad(0)) wrt.push_back(input), slots.push_back(0);
    for (size_t i = 0; i < n; ++i)
      if (ctx->needs_input_grad(1 + i)) wrt.push_back(call->params[i]), slots.push_back(1 + i);
    if (!wrt.empty()) {
      const variable_list d = torch::autograd::grad({out}, wrt, {grads[0]}, /*retain_graph=*/false,
                                                    /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t k = 0; k < d.size(); ++k) result[slots[k]] = d[k];
    }
    return result;
  }
};

}  // namespace

RecomputeScope::RecomputeScope(Recompute mode) : before_(mode_now) { mode_now = mode; }
RecomputeScope::~RecomputeScope() { mode_now = before_; }

bool recomputing(Recompute mode) { return mode_now == mode && torch::GradMode::is_enabled(); }

long blocks_recomputed() { return blocks_run_again.load(); }

torch::Tensor run_block(torch::nn::Module& block, BlockForward forward, const torch::Tensor& input) {
  if (!recomputing(Recompute::Full)) return forward(input);
  auto call = c10::make_intrusive<BlockCall>();
  call->forward = std::move(forward);
  call->params = block.parameters();
  return CheckpointedBlock::apply(input, at::TensorList(call->params), call);
}

}  // namespace quintnet::exec
