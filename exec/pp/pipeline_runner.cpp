#include "exec/pp/pipeline_runner.h"

#include "core/error.h"
#include "core/schedule_trace.h"
#include "exec/trace/trace_recorder.h"
#include "exec/train/autocast.h"

namespace quintnet::exec {

using core::Action;
using core::ActionKind;

PipelineRunner::PipelineRunner(core::Schedule schedule, ParallelModel& model, Communicator& comm, int64_t tokens,
                               int64_t hidden, bool bf16)
    : schedule_(std::move(schedule)), model_(model), comm_(comm), pp_(comm.axis("pp")), pp_rank_(pp_.rank),
      tokens_(tokens), hidden_(hidden), bf16_(bf16) {
  if (schedule_.pp != pp_.size() || schedule_.chunks != static_cast<int>(model_.chunks.size()))
    throw core::UserError("schedule " + schedule_.name + " is for pp " + std::to_string(schedule_.pp) + " with " +
                          std::to_string(schedule_.chunks) + " chunks, the model has pp " + std::to_string(pp_.size()) +
                          " with " + std::to_string(model_.chunks.size()));
  const auto& actions = schedule_.ranks[pp_rank_];
  last_grad_action_.assign(schedule_.chunks, 0);
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind == ActionKind::Backward || actions[i].kind == ActionKind::BackwardWeight)
      last_grad_action_[actions[i].chunk] = i;
}

int PipelineRunner::tag(bool grad, int mb, int to_stage) const {
  return ((grad ? 1 : 0) * schedule_.num_stages() + to_stage) * schedule_.microbatches + mb;
}

torch::Tensor PipelineRunner::stage_forward(int c, const torch::Tensor& input) {
  AutocastScope autocast(bf16_, input.device());
  // fp32 out of the stage: a no-op without autocast; with it, the p2p buffers and the
  // loss (computed outside the scope) stay fp32.
  return model_.chunks[c].model->forward(input).to(torch::kFloat32);
}

void PipelineRunner::forward(int mb, int c, const std::vector<torch::Tensor>& inputs,
                             const std::vector<torch::Tensor>& labels, torch::Tensor& stats) {
  Slot& slot = slots_[{mb, c}];
  const int stage = model_.chunks[c].stage;
  if (stage == 0) {
    slot.input = inputs[mb];
  } else if (schedule_.rank_of_stage(stage - 1) == pp_rank_) {
    // pp = 1 with several chunks: the previous stage is local.
    slot.input = slots_[{mb, c - 1}].output.detach().requires_grad_(true);
  }
  torch::Tensor out = stage_forward(c, slot.input);
  if (model_.is_last(c)) {
    const StageLoss l = model_.chunks[c].model->loss(out, labels[mb]);
    slot.output = l.loss / schedule_.microbatches;
    stats[0] += slot.output.detach();
    stats[3 + mb] += l.loss.detach();
    stats[1] += l.correct;
    stats[2] += l.count;
  } else {
    slot.output = out;
  }
}

void PipelineRunner::backward(const Action& a, size_t index) {
  ModelChunk& chunk = model_.chunks[a.chunk];
  Slot& slot = slots_[{a.mb, a.chunk}];
  if (chunk.dp) chunk.dp->sync_next_backward(index == last_grad_action_[a.chunk]);
  const std::vector<torch::Tensor> grads =
      model_.is_last(a.chunk) ? std::vector<torch::Tensor>{} : std::vector<torch::Tensor>{slot.grad_output};
  const bool has_input_grad = chunk.stage > 0;
  switch (a.kind) {
    case ActionKind::Backward:
      torch::autograd::backward({slot.output}, grads);
      break;
    case ActionKind::BackwardInput:
      // Input gradient only (the critical path); the graph is kept for BW.
      if (has_input_grad) torch::autograd::backward({slot.output}, grads, /*retain_graph=*/true, false, {slot.input});
      break;
    case ActionKind::BackwardWeight:
      torch::autograd::backward({slot.output}, grads, /*retain_graph=*/false, false, chunk.model->parameters());
      break;
    default:
      break;
  }
  if (a.kind != ActionKind::BackwardWeight && has_input_grad) {
    slot.input_grad = slot.input.grad();
    if (schedule_.rank_of_stage(chunk.stage - 1) == pp_rank_) slots_[{a.mb, a.chunk - 1}].grad_output = slot.input_grad;
  }
  if (a.kind != ActionKind::BackwardInput) {  // this (mb, chunk) is done: free its activations
    slot.output = torch::Tensor();
    slot.input = torch::Tensor();
    slot.grad_output = torch::Tensor();
  }
}

StepStats PipelineRunner::share_from_last_stage(torch::Tensor stats) {
  // The last stage computed the figures; everybody else learns them from it.
  const int last_rank = schedule_.rank_of_stage(schedule_.num_stages() - 1);
  comm_.broadcast(pp_, stats, last_rank);
  const torch::Tensor cpu = stats.cpu();
  StepStats out{cpu[0].item<double>(), cpu[1].item<double>(), cpu[2].item<double>(), {}};
  for (int64_t i = 3; i < cpu.size(0); ++i) out.mb_losses.push_back(cpu[i].item<double>());
  return out;
}

StepStats PipelineRunner::train_step(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(inputs.front().device());
  torch::Tensor stats = torch::zeros({3 + schedule_.microbatches}, options);  // loss, correct, samples, per-mb losses
  const int64_t micro = inputs.front().size(0);
  const auto& actions = schedule_.ranks[pp_rank_];
  TraceRecorder* tracer = comm_.tracer();
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    const int stage = schedule_.stage(pp_rank_, a.chunk);
    const auto start = TraceRecorder::Clock::now();
    int message_tag = -1;
    std::int64_t bytes = 0;
    switch (a.kind) {
      case ActionKind::Forward:
        forward(a.mb, a.chunk, inputs, labels, stats);
        break;
      case ActionKind::Backward:
      case ActionKind::BackwardInput:
      case ActionKind::BackwardWeight:
        backward(a, i);
        break;
      case ActionKind::SendAct:
      case ActionKind::SendGrad: {
        const bool grad = a.kind == ActionKind::SendGrad;
        Slot& slot = slots_[{a.mb, a.chunk}];
        torch::Tensor t = (grad ? slot.input_grad : slot.output).detach().contiguous();
        message_tag = tag(grad, a.mb, stage + (grad ? -1 : 1));
        bytes = t.numel() * t.element_size();
        pending_sends_.emplace_back(comm_.send_async(pp_, t, a.peer, message_tag), t);
        if (grad) slot.input_grad = torch::Tensor();
        break;
      }
      case ActionKind::RecvAct:
      case ActionKind::RecvGrad: {
        const bool grad = a.kind == ActionKind::RecvGrad;
        torch::Tensor t = torch::empty({micro, tokens_, hidden_}, inputs.front().options().dtype(torch::kFloat32));
        message_tag = tag(grad, a.mb, stage);
        bytes = t.numel() * t.element_size();
        comm_.recv(pp_, t, a.peer, message_tag);
        Slot& slot = slots_[{a.mb, a.chunk}];
        if (grad)
          slot.grad_output = t;
        else
          slot.input = t.requires_grad_(true);
        break;
      }
      case ActionKind::GradSync:
        if (model_.chunks[a.chunk].dp) {
          model_.chunks[a.chunk].dp->finish();
          if (tracer)
            for (const auto& l : model_.chunks[a.chunk].dp->last_step_launches())
              tracer->event(core::Lane::DpCollective, "allreduce", "dp bucket " + std::to_string(l.bucket), l.start,
                            l.end, -1, a.chunk, l.bytes);
        }
        break;
      case ActionKind::OptimizerStep:
        break;
    }
    if (tracer && tracer->active() && a.kind != ActionKind::OptimizerStep) {
      const auto end = TraceRecorder::Clock::now();
      const int peer = a.peer >= 0 ? pp_.ranks[a.peer] : -1;
      const core::Lane lane = core::is_p2p(a.kind) ? core::Lane::P2P
                              : a.kind == ActionKind::GradSync ? core::Lane::DpCollective
                                                                : core::Lane::Compute;
      const std::string name = core::is_p2p(a.kind) || a.kind == ActionKind::GradSync
                                   ? core::to_string(a)
                                   : std::string(core::action_name(a.kind)) + std::to_string(a.mb);
      tracer->event(lane, core::trace_kind(a.kind), name, start, end, a.mb, a.chunk, bytes, peer);
      if (a.kind == ActionKind::SendAct || a.kind == ActionKind::SendGrad) tracer->send(message_tag, peer, start);
      if (a.kind == ActionKind::RecvAct || a.kind == ActionKind::RecvGrad) tracer->recv(message_tag, peer, end);
    }
  }
  for (auto& [work, tensor] : pending_sends_) comm_.wait(*work, "pipeline send");
  pending_sends_.clear();
  slots_.clear();
  sync_tied_gradients();
  return share_from_last_stage(stats);
}

void PipelineRunner::sync_tied_gradients() {
  // The first and the last stage each hold a copy of a tied parameter (GPT-2's token
  // embedding, used as the output head); both copies must take the same step, with the
  // gradient of both uses.  Every pp rank joins one all-reduce, contributing the sum of
  // the copies it holds (zeros if none) — simple, and the tensor is a tp shard only.
  if (model_.num_stages == 1 || pp_.size() == 1) return;  // one stage: the parameter is one tensor
  std::vector<torch::Tensor> held;
  for (int c = 0; c < static_cast<int>(model_.chunks.size()); ++c)
    if (model_.is_first(c) || model_.is_last(c))
      for (const torch::Tensor& p : model_.chunks[c].model->tied_parameters()) held.push_back(p);
  const torch::Device device = model_.chunks.front().model->parameters().front().device();
  if (!tied_checked_) {  // does the model tie anything? (every rank learns it from the end stages)
    torch::Tensor numel = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    for (const auto& p : held) numel[0] = static_cast<double>(p.numel());
    comm_.all_reduce_max(pp_, numel);
    tied_numel_ = static_cast<int64_t>(numel[0].item<double>());
    tied_checked_ = true;
  }
  if (tied_numel_ == 0) return;
  torch::NoGradGuard no_grad;
  torch::Tensor sum = torch::zeros({tied_numel_}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  for (const auto& p : held) sum += p.grad().reshape({-1});
  comm_.all_reduce_sum(pp_, sum);
  for (auto& p : held) p.grad().copy_(sum.view_as(p.grad()));
}

StepStats PipelineRunner::evaluate(const torch::Tensor& input, const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  torch::Tensor stats = torch::zeros({3}, torch::TensorOptions().dtype(torch::kFloat64).device(input.device()));
  torch::Tensor x;
  // Stages in order: rank r runs its chunks c = 0, 1, ... (stages r, r + pp, ...).
  for (size_t c = 0; c < model_.chunks.size(); ++c) {
    const int stage = model_.chunks[c].stage;
    if (stage == 0) {
      x = input;
    } else if (schedule_.rank_of_stage(stage - 1) != pp_rank_) {
      x = torch::empty({input.size(0), tokens_, hidden_}, input.options().dtype(torch::kFloat32));
      comm_.recv(pp_, x, schedule_.rank_of_stage(stage - 1), tag(false, 0, stage));
    }
    x = stage_forward(static_cast<int>(c), x);
    if (model_.is_last(static_cast<int>(c))) {
      const StageLoss l = model_.chunks[c].model->loss(x, labels);
      stats[0] += l.loss * l.count;
      stats[1] += l.correct;
      stats[2] += l.count;
    } else if (schedule_.rank_of_stage(stage + 1) != pp_rank_) {
      torch::Tensor t = x.contiguous();
      comm_.wait(*comm_.send_async(pp_, t, schedule_.rank_of_stage(stage + 1), tag(false, 0, stage + 1)),
                 "pipeline send");
    }
  }
  return share_from_last_stage(stats);
}

}  // namespace quintnet::exec
