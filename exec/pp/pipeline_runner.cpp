#include "exec/pp/pipeline_runner.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <stdexcept>

#include "core/error.h"
#include "core/schedule_generators.h"
#include "exec/trace/trace_recorder.h"
#include "exec/precision/autocast.h"

namespace quintnet::exec {

using core::Action;
using core::ActionKind;

PipelineRunner::Walk::Walk(core::Schedule s, Communicator& comm, Group& pp, int rank, int64_t tokens, int64_t hidden)
    : schedule(std::move(s)),
      steps(core::interpret(schedule, rank)),
      messages(comm, pp, schedule, rank, tokens, hidden) {}

namespace {

// The schedule must be for this model's pipeline: checked before anything reads it.
core::Schedule checked(core::Schedule s, const ParallelModel& model, const Group& pp) {
  if (s.pp != pp.size() || s.chunks != static_cast<int>(model.chunks.size()))
    throw core::UserError("schedule " + s.name + " is for pp " + std::to_string(s.pp) + " with " +
                          std::to_string(s.chunks) + " chunks, the model has pp " + std::to_string(pp.size()) +
                          " with " + std::to_string(model.chunks.size()));
  return s;
}

}  // namespace

PipelineRunner::PipelineRunner(core::Schedule schedule, ParallelModel& model, Communicator& comm, int64_t tokens,
                               int64_t hidden, core::Precision precision, int microbatch_threads, Recompute recompute)
    : model_(model),
      comm_(comm),
      pp_(comm.axis(core::Axis::Pp)),
      pp_rank_(pp_.rank),
      tokens_(tokens),
      hidden_(hidden),
      precision_(precision),
      recompute_(recompute),
      training_(checked(std::move(schedule), model, pp_), comm, pp_, pp_rank_, tokens, hidden),
      evaluation_(core::make_forward_only(pp_.size(), 1, static_cast<int>(model.chunks.size())), comm, pp_, pp_rank_,
                  tokens, hidden),
      tied_(comm) {
  if (microbatch_threads > 1) {
    if (recompute_ != Recompute::None) throw core::UserError("microbatches side by side do not recompute activations");
    if (comm_.world_size() != 1 || model_.chunks.size() != 1)
      throw core::UserError("microbatches side by side need a one-rank run with one chunk");
    side_by_side_ = std::make_unique<MicrobatchThreads>(microbatch_threads,
                                                        std::max(1, at::get_num_threads() / microbatch_threads));
  } else {
    one_pool_ = std::make_unique<OnePoolThreads>();
  }
}

torch::Tensor PipelineRunner::stage_forward(int c, const torch::Tensor& input) {
  AutocastScope autocast(precision_ == core::Precision::Bf16, input.device());
  RecomputeScope recompute(recompute_);
  // Under bf16 weights the stage's input (images, or fp32 from the previous stage) is
  // cast to bf16 inside the graph, so its gradient leaves the stage in fp32 again.
  const bool bf16_weights = precision_ == core::Precision::Bf16Weights && input.is_floating_point();
  // fp32 between stages: a no-op in fp32; in bf16, the p2p buffers stay fp32.
  // The last stage's output goes to the loss as computed: each model's loss reads it in
  // fp32 its own way (GPT-2 a block of rows at a time: no fp32 copy of its logits).
  torch::Tensor out = model_.chunks[c].model->forward(bf16_weights ? input.to(torch::kBFloat16) : input);
  return model_.is_last(c) ? out : out.to(torch::kFloat32);
}

void PipelineRunner::forward(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const int mb = step.action.mb, c = step.action.chunk;
  Slot& slot = slot_of(mb, c);
  if (step.stage == 0) {
    slot.input = (*inputs_)[mb];
  } else if (walk_->schedule.rank_of_stage(step.stage - 1) == pp_rank_) {
    // pp = 1 with several chunks: the previous stage is local.
    slot.input = slots_[{mb, c - 1}].output.detach().requires_grad_(true);
    if (walk_ == &evaluation_) slots_.erase({mb, c - 1});  // no backward will read it
  }
  torch::Tensor out = stage_forward(c, slot.input);
  if (model_.is_last(c))
    add_loss(mb, model_.chunks[c].model->loss(out, (*labels_)[mb]), slot);
  else
    slot.output = out;
  trace(step, start);
}

void PipelineRunner::add_loss(int mb, const StageLoss& l, Slot& slot) {
  if (walk_ == &evaluation_) {
    stats_[EvalStats::kLossSum] += l.loss * l.count;
    stats_[EvalStats::kCorrect] += l.correct;
    stats_[EvalStats::kSamples] += l.count;
    return;
  }
  slot.output = l.loss / walk_->schedule.microbatches;
  slot.loss = l;
  if (!in_round_) add_figures(mb, slot);  // side by side: after the round, in microbatch order
}

void PipelineRunner::add_figures(int mb, Slot& slot) {
  const torch::Tensor loss = slot.loss.loss.detach();
  stats_[StepStats::kLoss] += loss / walk_->schedule.microbatches;  // what the backward starts from
  stats_[StepStats::kFirstMicrobatchLoss + mb] += loss;
  stats_[StepStats::kCorrect] += slot.loss.correct;
  stats_[StepStats::kSamples] += slot.loss.count;
  slot.loss = StageLoss();
}

void PipelineRunner::backward(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const Action& a = step.action;
  ModelChunk& chunk = model_.chunks[a.chunk];
  Slot& slot = slot_of(a.mb, a.chunk);
  if (chunk.dp) chunk.dp->sync_next_backward(step.completes_gradients);
  const std::vector<torch::Tensor> grads =
      model_.is_last(a.chunk) ? std::vector<torch::Tensor>{} : std::vector<torch::Tensor>{slot.grad_output};
  const bool has_input_grad = chunk.stage > 0;
  if (in_round_) {
    // Side by side (one stage: no input gradient): this microbatch's weight gradients on
    // their own, added to the others' in microbatch order after the round.
    if (a.kind != ActionKind::BackwardInput)
      slot.weight_grads = torch::autograd::grad({slot.output}, chunk.model->parameters(), grads, false, false,
                                                /*allow_unused=*/true);
  } else if (a.kind == ActionKind::Backward) {
    torch::autograd::backward({slot.output}, grads);
  } else if (a.kind == ActionKind::BackwardInput) {
    // Input gradient only (the critical path); the graph is kept for BW.
    if (has_input_grad) torch::autograd::backward({slot.output}, grads, /*retain_graph=*/true, false, {slot.input});
  } else if (a.kind == ActionKind::BackwardWeight) {
    torch::autograd::backward({slot.output}, grads, /*retain_graph=*/false, false, chunk.model->parameters());
  }
  if (a.kind != ActionKind::BackwardWeight && has_input_grad) {
    slot.input_grad = slot.input.grad();
    if (walk_->schedule.rank_of_stage(chunk.stage - 1) == pp_rank_)
      slots_[{a.mb, a.chunk - 1}].grad_output = slot.input_grad;
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
  Slot& slot = slot_of(a.mb, a.chunk);
  const bool grad = step.message->grad;
  const int64_t bytes = walk_->messages.send(*step.message, a.peer, (grad ? slot.input_grad : slot.output).detach());
  if (grad) slot.input_grad = torch::Tensor();
  if (walk_ == &evaluation_) slots_.erase({a.mb, a.chunk});  // sent on: nothing reads it again
  trace(step, start, bytes);
}

void PipelineRunner::recv(const core::Step& step) {
  const auto start = TraceRecorder::Clock::now();
  const Action& a = step.action;
  torch::Tensor t = walk_->messages.recv(*step.message, a.peer, inputs_->front());
  Slot& slot = slot_of(a.mb, a.chunk);
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
  if (!tracer || !tracer->active() || walk_ != &training_) return;  // evaluation is not in the trace
  const auto end = TraceRecorder::Clock::now();
  const int peer = step.action.peer >= 0 ? pp_.ranks[step.action.peer] : -1;
  tracer->event(step.lane, step.kind, step.name, start, end, step.action.mb, step.action.chunk, bytes, peer);
  if (core::is_send(step.action.kind)) tracer->send(walk_->messages.tag(*step.message), peer, start);
  if (core::is_recv(step.action.kind)) tracer->recv(walk_->messages.tag(*step.message), peer, end);
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
  const core::Schedule& schedule = training_.schedule;
  const int last_rank = schedule.rank_of_stage(schedule.num_stages() - 1);
  comm_.broadcast(pp_, stats, last_rank);
}

PipelineRunner::Slot& PipelineRunner::slot_of(int mb, int chunk) {
  // In a round the slots exist already, and threads may only look them up.
  return in_round_ ? slots_.at({mb, chunk}) : slots_[{mb, chunk}];
}

void PipelineRunner::run_side_by_side(Walk& walk) {
  // The same actions through the same handlers, a round of size() microbatches at a
  // time, each microbatch's actions on its own thread; then its figures and gradients
  // are added in microbatch order, as the sequential walk adds them.  One rank, one
  // chunk (the constructor checks): the microbatches meet only in those sums, and the
  // actions for no microbatch (GRAD_SYNC, OPTIMIZER_STEP) close the walk.
  std::map<int, std::vector<const core::Step*>> by_microbatch;
  std::vector<const core::Step*> closing;
  for (const core::Step& step : walk.steps) {
    if (step.action.mb < 0) closing.push_back(&step);
    else if (!closing.empty()) throw std::logic_error("side by side: a microbatch's action after " + closing.front()->name);
    else by_microbatch[step.action.mb].push_back(&step);
  }
  const ModelChunk& chunk = model_.chunks.front();
  const std::vector<torch::Tensor> params = chunk.model->parameters();
  auto next = by_microbatch.begin();
  while (next != by_microbatch.end()) {
    std::vector<std::pair<int, std::vector<const core::Step*>>> round;
    for (; next != by_microbatch.end() && static_cast<int>(round.size()) < side_by_side_->size(); ++next) {
      round.emplace_back(next->first, next->second);
      slots_[{next->first, 0}];
    }
    in_round_ = true;
    side_by_side_->run(static_cast<int>(round.size()), [&](int i) {
      for (const core::Step* step : round[i].second) core::run_step(*step, *this);
    });
    in_round_ = false;
    torch::NoGradGuard no_grad;
    for (const auto& [mb, steps] : round) {
      Slot& slot = slots_.at({mb, 0});
      add_figures(mb, slot);
      for (size_t j = 0; j < params.size(); ++j)
        if (slot.weight_grads[j].defined()) params[j].grad().add_(slot.weight_grads[j]);
      slots_.erase({mb, 0});
    }
  }
  for (const core::Step* step : closing) core::run_step(*step, *this);
}

torch::Tensor PipelineRunner::run(Walk& walk, const std::vector<torch::Tensor>& inputs,
                                  const std::vector<torch::Tensor>& labels, int64_t figures) {
  walk_ = &walk;
  stats_ = torch::zeros({figures}, torch::TensorOptions().dtype(torch::kFloat64).device(inputs.front().device()));
  inputs_ = &inputs;
  labels_ = &labels;
  if (side_by_side_ && &walk == &training_) {
    run_side_by_side(walk);  // one rank: no messages
  } else {
    for (const core::Step& step : walk.steps) {
      RECORD_USER_SCOPE(step.name);  // the action frames its ops in a profile (--profile, --nvtx)
      core::run_step(step, *this);
      // After the action, not before: by then the transport's thread has surely marked the
      // send done, so the wait does not stall on it.
      walk.messages.release_delivered(step.index);
    }
  }
  walk.messages.finish();
  slots_.clear();
  inputs_ = labels_ = nullptr;
  walk_ = nullptr;
  return std::exchange(stats_, torch::Tensor());
}

StepStats PipelineRunner::train_step(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels) {
  // Loss, correct, samples, then one loss per microbatch (StepStats::Index).
  torch::Tensor stats = run(training_, inputs, labels, StepStats::kFirstMicrobatchLoss + training_.schedule.microbatches);
  tied_.sum_copies(model_);
  share_from_last_stage(stats);
  return {stats};
}

EvalStats PipelineRunner::evaluate(const torch::Tensor& input, const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  torch::Tensor stats = run(evaluation_, {input}, {labels}, EvalStats::kFigures);
  share_from_last_stage(stats);
  const torch::Tensor v = stats.cpu();
  return {v[EvalStats::kLossSum].item<double>(), v[EvalStats::kCorrect].item<double>(),
          v[EvalStats::kSamples].item<double>()};
}

}  // namespace quintnet::exec
