#include "exec/pp/pipeline_runner.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>

#include "core/error.h"
#include "core/schedule_delivery.h"
#include "exec/trace/trace_recorder.h"
#include "exec/train/autocast.h"

namespace quintnet::exec {

using core::Action;
using core::ActionKind;

PipelineRunner::PipelineRunner(core::Schedule schedule, ParallelModel& model, Communicator& comm, int64_t tokens,
                               int64_t hidden, bool bf16, int microbatch_threads, Recompute recompute)
    : schedule_(std::move(schedule)), model_(model), comm_(comm), pp_(comm.axis("pp")), pp_rank_(pp_.rank),
      tokens_(tokens), hidden_(hidden), bf16_(bf16), recompute_(recompute) {
  if (schedule_.pp != pp_.size() || schedule_.chunks != static_cast<int>(model_.chunks.size()))
    throw core::UserError("schedule " + schedule_.name + " is for pp " + std::to_string(schedule_.pp) + " with " +
                          std::to_string(schedule_.chunks) + " chunks, the model has pp " + std::to_string(pp_.size()) +
                          " with " + std::to_string(model_.chunks.size()));
  steps_ = core::interpret(schedule_, pp_rank_);
  delivered_before_ = core::delivered_before(schedule_, pp_rank_);
  if (microbatch_threads > 1) {
    if (recompute_ != Recompute::None) throw core::UserError("microbatches side by side do not recompute activations");
    if (comm_.world_size() != 1 || model_.chunks.size() != 1)
      throw core::UserError("microbatches side by side need a one-rank run with one chunk");
    side_by_side_ = std::make_unique<MicrobatchThreads>(microbatch_threads,
                                                        std::max(1, at::get_num_threads() / microbatch_threads));
  }
}

torch::Tensor PipelineRunner::stage_forward(int c, const torch::Tensor& input) {
  AutocastScope autocast(bf16_, input.device());
  RecomputeScope recompute(recompute_);
  // fp32 between stages: a no-op without autocast; with it, the p2p buffers stay fp32.
  // The last stage's output goes to the loss as computed: each model's loss reads it in
  // fp32 its own way (GPT-2 a block of rows at a time: no fp32 copy of its logits).
  torch::Tensor out = model_.chunks[c].model->forward(input);
  return model_.is_last(c) ? out : out.to(torch::kFloat32);
}

void PipelineRunner::forward(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const int mb = step.action.mb, c = step.action.chunk;
  Slot& slot = slots_[{mb, c}];
  if (step.stage == 0) {
    slot.input = (*inputs_)[mb];
  } else if (schedule_.rank_of_stage(step.stage - 1) == pp_rank_) {
    // pp = 1 with several chunks: the previous stage is local.
    slot.input = slots_[{mb, c - 1}].output.detach().requires_grad_(true);
  }
  torch::Tensor out = stage_forward(c, slot.input);
  if (model_.is_last(c)) {
    const StageLoss l = model_.chunks[c].model->loss(out, (*labels_)[mb]);
    slot.output = l.loss / schedule_.microbatches;
    stats_[StepStats::kLoss] += slot.output.detach();
    stats_[StepStats::kFirstMicrobatchLoss + mb] += l.loss.detach();
    stats_[StepStats::kCorrect] += l.correct;
    stats_[StepStats::kSamples] += l.count;
  } else {
    slot.output = out;
  }
  trace(step, start);
}

void PipelineRunner::backward(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const Action& a = step.action;
  ModelChunk& chunk = model_.chunks[a.chunk];
  Slot& slot = slots_[{a.mb, a.chunk}];
  if (chunk.dp) chunk.dp->sync_next_backward(step.completes_gradients);
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
  trace(step, start);
}

void PipelineRunner::send(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const Action& a = step.action;
  Slot& slot = slots_[{a.mb, a.chunk}];
  const bool grad = step.message->grad;
  torch::Tensor t = (grad ? slot.input_grad : slot.output).detach().contiguous();
  pending_sends_[*step.message] = PendingSend{comm_.send_async(pp_, t, a.peer, step.message->tag(schedule_)), t};
  if (grad) slot.input_grad = torch::Tensor();
  trace(step, start, t.numel() * t.element_size());
}

void PipelineRunner::release_delivered_sends(const core::Step& step) {
  for (const core::Message& m : delivered_before_[step.index]) {
    const auto sent = pending_sends_.find(m);
    comm_.wait(*sent->second.work, "pipeline send");  // delivered: returns at once
    pending_sends_.erase(sent);
  }
}

void PipelineRunner::recv(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const Action& a = step.action;
  const torch::Tensor& first_input = inputs_->front();
  torch::Tensor t =
      torch::empty({first_input.size(0), tokens_, hidden_}, first_input.options().dtype(torch::kFloat32));
  comm_.recv(pp_, t, a.peer, step.message->tag(schedule_));
  Slot& slot = slots_[{a.mb, a.chunk}];
  if (step.message->grad)
    slot.grad_output = t;
  else
    slot.input = t.requires_grad_(true);
  trace(step, start, t.numel() * t.element_size());
}

void PipelineRunner::grad_sync(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  ModelChunk& chunk = model_.chunks[step.action.chunk];
  if (chunk.dp) {
    chunk.dp->finish();
    if (TraceRecorder* tracer = comm_.tracer())
      for (const auto& l : chunk.dp->last_step_launches())
        tracer->event(core::Lane::DpCollective, "allreduce", "dp bucket " + std::to_string(l.bucket), l.start, l.end,
                      -1, step.action.chunk, l.bytes);
  }
  trace(step, start);
}

void PipelineRunner::trace(const core::Step& step, TraceRecorder::Clock::time_point start, std::int64_t bytes) {
  TraceRecorder* tracer = comm_.tracer();
  if (!tracer || !tracer->active()) return;
  const auto end = TraceRecorder::Clock::now();
  const int peer = step.action.peer >= 0 ? pp_.ranks[step.action.peer] : -1;
  tracer->event(step.lane, step.kind, step.name, start, end, step.action.mb, step.action.chunk, bytes, peer);
  if (core::is_send(step.action.kind))
    tracer->send(step.message->tag(schedule_), peer, start);
  if (core::is_recv(step.action.kind))
    tracer->recv(step.message->tag(schedule_), peer, end);
}

StepStats::Read StepStats::read(const std::vector<double>& v) {
  return {v[kLoss], v[kCorrect], v[kSamples], std::vector<double>(v.begin() + kFirstMicrobatchLoss, v.end())};
}

StepStats::Read StepStats::read() const {
  const torch::Tensor cpu = figures.cpu().contiguous();
  return read(std::vector<double>(cpu.data_ptr<double>(), cpu.data_ptr<double>() + cpu.numel()));
}

void PipelineRunner::share_from_last_stage(torch::Tensor& stats) {
  // The last stage computed the figures; everybody else learns them from it.
  const int last_rank = schedule_.rank_of_stage(schedule_.num_stages() - 1);
  comm_.broadcast(pp_, stats, last_rank);
}

StepStats PipelineRunner::train_step_side_by_side(const std::vector<torch::Tensor>& inputs,
                                                   const std::vector<torch::Tensor>& labels) {
  // One stage, so each microbatch is a whole forward and backward pass.  A worker asks
  // autograd for its microbatch's gradients instead of accumulating them (two threads
  // adding into one buffer would add in a random order); they are added here, in
  // microbatch order, as the sequential loop adds them.  Rounds of size() microbatches.
  ModelChunk& chunk = model_.chunks.front();
  const std::vector<torch::Tensor> params = chunk.model->parameters();
  const int m = schedule_.microbatches;
  struct Microbatch {
    torch::Tensor scaled_loss, loss, correct;
    double count = 0;
    std::vector<torch::Tensor> grads;
  };
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(inputs.front().device());
  torch::Tensor stats = torch::zeros({3 + m}, options);  // as train_step's
  for (int first = 0; first < m; first += side_by_side_->size()) {
    std::vector<Microbatch> done(std::min(side_by_side_->size(), m - first));
    side_by_side_->run(static_cast<int>(done.size()), [&](int i) {
      const int mb = first + i;
      const StageLoss l = chunk.model->loss(stage_forward(0, inputs[mb]), labels[mb]);
      Microbatch& d = done[i];
      d.scaled_loss = l.loss / m;
      d.grads = torch::autograd::grad({d.scaled_loss}, params, {}, false, false, /*allow_unused=*/true);
      d.scaled_loss = d.scaled_loss.detach();
      d.loss = l.loss.detach();
      d.correct = l.correct;
      d.count = l.count;
    });
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < done.size(); ++i) {
      const Microbatch& d = done[i];
      stats[StepStats::kLoss] += d.scaled_loss;
      stats[StepStats::kFirstMicrobatchLoss + first + static_cast<int>(i)] += d.loss;
      stats[StepStats::kCorrect] += d.correct;
      stats[StepStats::kSamples] += d.count;
      for (size_t j = 0; j < params.size(); ++j)
        if (d.grads[j].defined()) params[j].grad().add_(d.grads[j]);
    }
  }
  share_from_last_stage(stats);
  return {stats};
}

StepStats PipelineRunner::train_step(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels) {
  if (side_by_side_) return train_step_side_by_side(inputs, labels);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(inputs.front().device());
  stats_ = torch::zeros({3 + schedule_.microbatches}, options);  // loss, correct, samples, per-mb losses
  inputs_ = &inputs;
  labels_ = &labels;
  for (const core::Step& step : steps_) {
    RECORD_USER_SCOPE(step.name);  // the action frames its ops in a profile (--profile, --nvtx)
    core::run_step(step, *this);
    // After the action, not before: by then the transport's thread has surely marked the
    // send done, so the wait does not stall on it.
    release_delivered_sends(step);
  }
  for (auto& [message, send] : pending_sends_) comm_.wait(*send.work, "pipeline send");
  pending_sends_.clear();
  slots_.clear();
  inputs_ = labels_ = nullptr;
  sync_tied_gradients();
  torch::Tensor stats = std::exchange(stats_, torch::Tensor());
  share_from_last_stage(stats);
  return {stats};
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

EvalStats PipelineRunner::evaluate(const torch::Tensor& input, const torch::Tensor& labels) {
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
      comm_.recv(pp_, x, schedule_.rank_of_stage(stage - 1), core::Message{false, 0, stage - 1, stage}.tag(schedule_));
    }
    x = stage_forward(static_cast<int>(c), x);
    if (model_.is_last(static_cast<int>(c))) {
      const StageLoss l = model_.chunks[c].model->loss(x, labels);
      stats[0] += l.loss * l.count;
      stats[1] += l.correct;
      stats[2] += l.count;
    } else if (schedule_.rank_of_stage(stage + 1) != pp_rank_) {
      torch::Tensor t = x.contiguous();
      comm_.wait(*comm_.send_async(pp_, t, schedule_.rank_of_stage(stage + 1),
                                   core::Message{false, 0, stage, stage + 1}.tag(schedule_)),
                 "pipeline send");
    }
  }
  share_from_last_stage(stats);
  const torch::Tensor v = stats.cpu();
  return {v[0].item<double>(), v[1].item<double>(), v[2].item<double>()};
}

}  // namespace quintnet::exec
