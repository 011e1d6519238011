#include "exec/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "core/schedule_generators.h"
#include "exec/checkpoint/checkpoint.h"
#include "exec/data/batch_sampler.h"
#include "exec/data/training_data.h"
#include "exec/models/registry.h"
#include "exec/models/serial_state.h"
#include "exec/trace/trace_recorder.h"
#include "exec/train/lr_schedule.h"
#include "exec/train/progress.h"
#include "exec/train/run_log.h"
#include "exec/train/run_trace.h"

namespace quintnet::exec {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// How many microbatches a step computes at once (exec/pp/microbatch_threads.h): by
// default one per intra-op thread, where that is exact and deterministic — one rank
// with one chunk (collectives are issued from one thread), the CPU, no dropout (two
// threads drawing masks from one generator draw them in no fixed order), no trace (a
// rank's lane shows one op at a time).  Asked for explicitly where it cannot be: an error.
int microbatches_side_by_side(const core::Plan& p, const Communicator& comm, const TrainOptions& o, size_t chunks) {
  const bool dropout = model_entry(p.model).has_dropout(p.model);
  const char* why_not = comm.world_size() != 1 || chunks != 1 ? "it needs a one-rank run"
                        : p.device_type != "cpu"               ? "it is for the CPU"
                        : dropout                              ? "the plan has dropout"
                        : !o.trace_path.empty()                ? "a traced run computes one microbatch at a time"
                        : p.microbatches() < 2                 ? "the plan has one microbatch per step"
                                                               : nullptr;
  if (why_not) {
    if (o.microbatch_threads > 1)
      throw core::UserError("--microbatch-threads " + std::to_string(o.microbatch_threads) + ": " + why_not);
    return 1;
  }
  return std::min(o.microbatch_threads > 0 ? o.microbatch_threads : torch::get_num_threads(), p.microbatches());
}

}  // namespace

Trainer::Trainer(const core::Plan& plan, Communicator& comm, TrainOptions options)
    : plan_(plan), comm_(comm), options_(std::move(options)), is_logger_(comm.rank() == 0),
      device_(plan.device_type == "cuda" ? torch::Device(torch::kCUDA, comm.env().local_rank) : torch::Device(torch::kCPU)) {
  if (device_.is_cuda() && !torch::cuda::is_available())
    throw core::UserError("device_type: cuda, but no CUDA device is available to this process; set device_type: cpu");
}

double Trainer::clip_gradients(ParallelModel& pm) {
  // ‖g‖² = Σ over pipeline stages of [Σ over tp-sharded parameters (summed over the
  // tp group) + Σ over replicated ones (identical on every tp rank, counted once)].
  torch::NoGradGuard no_grad;
  torch::Tensor sharded = torch::zeros({1}, stats_options()), replicated = torch::zeros({1}, stats_options());
  for (size_t c = 0; c < pm.chunks.size(); ++c) {
    auto& chunk = pm.chunks[c];
    const torch::Tensor sq = chunk.flat->grads().to(torch::kFloat64).square();
    const torch::Tensor s = (sq * chunk.flat->sharded_mask()).sum();
    sharded += s;
    replicated += sq.sum() - s;
    // A tied parameter (GPT-2's vocabulary-parallel embedding) is one parameter held by
    // the first and the last stage: count it once, on the first.
    if (pm.is_last(static_cast<int>(c)) && !pm.is_first(static_cast<int>(c)))
      for (const torch::Tensor& p : chunk.model->tied_parameters())
        sharded -= p.grad().to(torch::kFloat64).square().sum();
  }
  comm_.all_reduce_sum(comm_.axis("tp"), sharded);
  torch::Tensor total = sharded + replicated;
  comm_.all_reduce_sum(comm_.axis("pp"), total);
  const double norm = std::sqrt(std::max(0.0, total.item<double>()));
  if (plan_.max_grad_norm > 0 && norm > plan_.max_grad_norm)
    for (auto& chunk : pm.chunks) chunk.flat->grads().mul_(plan_.max_grad_norm / (norm + 1e-6));
  return norm;
}

Trainer::Evaluation Trainer::evaluate(PipelineRunner& runner, ParallelModel& pm, const TrainingData& data) {
  for (auto& chunk : pm.chunks) chunk.model->eval();
  Group& dp = comm_.axis("dp");
  // Contiguous shards of the validation set per dp rank; tp ranks compute the same.
  const std::int64_t count = data.val_size(), chunk = data.eval_batch_size();
  const std::int64_t per_rank = (count + dp.size() - 1) / dp.size();
  const std::int64_t begin = std::min(count, dp.rank * per_rank), end = std::min(count, begin + per_rank);
  torch::Tensor totals = torch::zeros({3}, stats_options());  // loss sum, correct, count
  for (std::int64_t start = begin; start < end; start += chunk) {
    std::vector<int64_t> idx;
    for (std::int64_t i = start; i < std::min(end, start + chunk); ++i) idx.push_back(i);
    auto [inputs, labels] = data.val_batch(idx, device_);
    const EvalStats s = runner.evaluate(inputs, labels);
    totals[0] += s.loss_sum;
    totals[1] += s.correct;
    totals[2] += s.samples;
  }
  comm_.all_reduce_sum(dp, totals);
  for (auto& chunk : pm.chunks) chunk.model->train();
  return {totals[0].item<double>() / totals[2].item<double>(), totals[1].item<double>() / totals[2].item<double>()};
}

void Trainer::save_params(ParallelModel& pm) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (auto& chunk : pm.chunks)
    for (auto& [name, t] : gather_serial_state(*chunk.model, pm.tp)) dict.insert(name, t.cpu());
  const core::Mesh& mesh = comm_.mesh();
  if (mesh.coord(comm_.rank(), "dp") != 0 || mesh.coord(comm_.rank(), "tp") != 0) return;
  // One file per pipeline rank (its stages' parameters) when pp > 1.
  const std::string path = options_.save_params_path +
                           (mesh.size("pp") > 1 ? ".pp" + std::to_string(mesh.coord(comm_.rank(), "pp")) : "");
  const std::vector<char> bytes = torch::pickle_save(dict);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw core::UserError("--save-params: cannot write " + path);
}

Trainer::StepOutcome Trainer::train_step(PipelineRunner& runner, ParallelModel& pm,
                                         std::vector<std::unique_ptr<FlatAdamW>>& optimizers, RunTrace& trace,
                                         const std::vector<torch::Tensor>& inputs,
                                         const std::vector<torch::Tensor>& labels, double lr) {
  for (auto& chunk : pm.chunks) chunk.flat->zero_grad();
  StepOutcome out;
  out.stats = runner.train_step(inputs, labels);
  const auto optimizer_start = TraceRecorder::Clock::now();
  out.grad_norm = clip_gradients(pm);
  for (auto& opt : optimizers) opt->step(lr);
  trace.optimizer(optimizer_start);
  // The loss of the global batch: the mean over dp replicas.
  Group& dp = comm_.axis("dp");
  torch::Tensor step_loss = torch::full({1}, out.stats.loss, stats_options());
  comm_.all_reduce_sum(dp, step_loss);
  out.global_loss = step_loss.item<double>() / dp.size();
  return out;
}

bool Trainer::no_longer_improving(double val_loss, Manifest& state, RunLog& log) const {
  if (val_loss < state.best_val_loss - 1e-6) {
    state.best_val_loss = val_loss;
    state.epochs_without_improvement = 0;
    return false;
  }
  if (plan_.patience > 0 && ++state.epochs_without_improvement >= plan_.patience) {
    log.message("early stopping: no validation improvement for " + std::to_string(plan_.patience) + " epochs");
    return true;
  }
  return false;
}

TrainResult Trainer::run() {
  const auto t0 = Clock::now();
  const core::Plan& p = plan_;
  const ModelEntry& model = model_entry(p.model);
  const std::unique_ptr<TrainingData> data = model.load_data(p);

  // The same serial initial weights on every layout: seed, build serial, then shard.
  torch::manual_seed(p.seed);
  std::shared_ptr<StageModel> serial = model.make_serial(p);
  serial->to(device_);
  auto pm = make_strategy(p.strategy(), comm_, p)->apply(serial);
  serial = nullptr;
  std::vector<std::unique_ptr<FlatAdamW>> optimizers;
  for (auto& chunk : pm->chunks) optimizers.push_back(std::make_unique<FlatAdamW>(*chunk.flat, p.weight_decay));

  const int m = p.microbatches();
  const core::Schedule schedule =
      core::make_schedule(p.schedule_kind(), comm_.axis("pp").size(), m, static_cast<int>(pm->chunks.size()));
  const int64_t tokens = model.tokens(p);  // the activations between stages: [micro-batch, tokens, hidden]
  const int side_by_side = microbatches_side_by_side(p, comm_, options_, pm->chunks.size());
  PipelineRunner runner(schedule, *pm, comm_, tokens, p.model.hidden(), p.precision == "bf16", side_by_side);
  Group& dp = comm_.axis("dp");

  BatchSampler sampler(data->train_size(), p.batch_size, p.seed);
  const long per_epoch = sampler.batches_per_epoch();
  if (per_epoch == 0)
    throw core::UserError("batch_size: " + std::to_string(p.batch_size) + " is larger than the " +
                          std::to_string(data->train_size()) + " training samples");
  const long total_steps = options_.max_steps > 0 ? options_.max_steps : per_epoch * p.num_epochs;
  const int epochs = static_cast<int>((total_steps + per_epoch - 1) / per_epoch);
  RunTrace trace(options_, comm_, device_, total_steps);
  RunLog log(p, options_, is_logger_);
  log.start(*data, per_epoch, side_by_side);

  // Where the run stands: a fresh start, or what a checkpoint recorded.
  Manifest state;
  state.total_steps = total_steps;
  if (!options_.resume_path.empty()) {
    state = load_checkpoint(options_.resume_path, comm_, p, *pm, optimizers);
    log.resumed(resolve_checkpoint(options_.resume_path), state.step, state.total_steps, total_steps);
    state.total_steps = total_steps;
  }
  const std::optional<CheckpointWriter> checkpoints =
      options_.checkpoint_dir.empty() ? std::nullopt
                                      : std::optional(CheckpointWriter(options_.checkpoint_dir, options_.checkpoint_keep));
  const long last_step = options_.stop_at_step > 0 ? std::min(total_steps, options_.stop_at_step) : total_steps;

  TrainResult result;
  long step = state.step;
  long saved_step = -1;
  bool stop_early = false;
  double samples_done = 0;
  const auto train_start = Clock::now();
  for (int epoch = static_cast<int>(step / per_epoch); epoch < epochs && step < last_step; ++epoch) {
    const long first_k = step - epoch * per_epoch;  // > 0 when resuming mid-epoch
    Progress progress("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs),
                      std::min(per_epoch - first_k, last_step - step), is_logger_ && options_.progress);
    // This epoch's loss x samples, correct, samples (this dp shard; a resumed epoch's
    // earlier part, summed over dp, is carried by dp rank 0).
    torch::Tensor epoch_stats = torch::zeros({3}, stats_options());
    if (first_k > 0 && dp.rank == 0)
      for (int i = 0; i < 3; ++i) epoch_stats[i] = state.epoch_stats[i];
    // Inside an epoch the checkpoint carries the epoch's statistics so far; at its end
    // (after the evaluation, whose outcome early stopping keeps) the next one starts at zero.
    auto checkpoint_due = [&] {
      return checkpoints && (step == last_step || (options_.checkpoint_every > 0 && step % options_.checkpoint_every == 0));
    };
    auto save_checkpoint = [&](bool mid_epoch) {
      torch::Tensor summed = epoch_stats.clone();
      if (mid_epoch) comm_.all_reduce_sum(dp, summed);
      for (int i = 0; i < 3; ++i) state.epoch_stats[i] = mid_epoch ? summed[i].item<double>() : 0.0;
      state.step = step;
      const std::string where = checkpoints->save(comm_, p, *pm, optimizers, state);
      saved_step = step;
      if (is_logger_ && options_.progress) progress.message("checkpoint: " + where);
    };
    long k = first_k;
    for (; k < per_epoch && step < last_step; ++k) {
      const double lr = learning_rate_at(step, total_steps, p.warmup_steps, p.learning_rate);
      trace.begin_step(step);
      std::vector<torch::Tensor> inputs, labels;
      for (int j = 0; j < m; ++j) {
        auto [x, y] = data->train_batch(sampler.microbatch(epoch, k, dp.rank, dp.size(), j, m), device_);
        inputs.push_back(x);
        labels.push_back(y);
      }
      const StepOutcome s = train_step(runner, *pm, optimizers, trace, inputs, labels, lr);
      epoch_stats[0] += s.stats.loss * s.stats.samples;
      epoch_stats[1] += s.stats.correct;
      epoch_stats[2] += s.stats.samples;
      samples_done += p.batch_size;
      result.final_train_loss = s.global_loss;
      log.step(step + 1, epoch + 1, s.global_loss, lr, s.grad_norm,
               samples_done / std::max(1e-9, seconds_since(train_start)), s.stats.mb_losses);
      char note[64];
      std::snprintf(note, sizeof(note), "loss %.4f", s.global_loss);
      progress.update(k + 1 - first_k, static_cast<long>((k + 1 - first_k) * p.batch_size), note);
      ++step;
      if (k + 1 < per_epoch && step < total_steps && checkpoint_due()) save_checkpoint(true);
    }
    if (k < per_epoch && step < total_steps) {  // stopped inside the epoch (--stop-at-step): no epoch row
      log.message("stopped after step " + std::to_string(step) + " of " + std::to_string(total_steps) +
                  " (--stop-at-step)" + (saved_step == step ? "; continue with --resume" : ""));
      break;
    }
    comm_.all_reduce_sum(dp, epoch_stats);
    const double train_loss = epoch_stats[0].item<double>() / epoch_stats[2].item<double>();
    const double train_acc = epoch_stats[1].item<double>() / epoch_stats[2].item<double>();
    if (options_.evaluate) {
      const Evaluation ev = evaluate(runner, *pm, *data);
      result.final_val_loss = ev.loss;
      if (!model.language_model) result.final_val_accuracy = ev.accuracy;
      log.epoch(epoch + 1, train_loss, train_acc, ev.loss, ev.accuracy);
      stop_early = no_longer_improving(ev.loss, state, log);
    }
    if (checkpoint_due() || (checkpoints && stop_early)) save_checkpoint(false);
    if (stop_early) break;
  }
  result.steps = step;
  result.wall_s = seconds_since(t0);
  result.samples_per_s = samples_done / std::max(1e-9, seconds_since(train_start));

  if (!options_.save_params_path.empty()) save_params(*pm);
  trace.finish(
      p, *pm, schedule, [&] { return data->train_batch(sampler.microbatch(0, 0, dp.rank, dp.size(), 0, m), device_); },
      {tokens, p.model.hidden(), p.precision == "bf16"}, is_logger_);
  log.done(result);
  return result;
}

}  // namespace quintnet::exec
