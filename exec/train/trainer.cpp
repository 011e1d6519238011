#include "exec/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/stage_balance.h"
#include "exec/checkpoint/checkpoint.h"
#include "exec/data/batch_sampler.h"
#include "exec/train/op_probe.h"
#include "exec/data/training_data.h"
#include "exec/models/gpt2.h"
#include "exec/models/vit.h"
#include "core/schedule_generators.h"
#include "core/bubble_report.h"
#include "exec/trace/trace_recorder.h"
#include "exec/train/lr_schedule.h"
#include "exec/train/progress.h"

namespace quintnet::exec {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::shared_ptr<StageModel> make_serial_model(const core::Plan& plan) {
  if (!plan.model.is_gpt()) return ViT(plan.model, TpContext{}).ptr();
  Gpt2 gpt(plan.model, TpContext{});
  if (!plan.checkpoint_path.empty()) load_hf_gpt2(gpt, plan.checkpoint_path);  // fine-tuning from released weights
  return gpt.ptr();
}

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
    const StepStats s = runner.evaluate(inputs, labels);
    totals[0] += s.loss;
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

TrainResult Trainer::run() {
  const auto t0 = Clock::now();
  const core::Plan& p = plan_;
  const std::unique_ptr<TrainingData> data = load_training_data(p);

  // The same serial initial weights on every layout: seed, build serial, then shard.
  torch::manual_seed(p.seed);
  std::shared_ptr<StageModel> serial = make_serial_model(p);
  serial->to(device_);
  auto pm = make_strategy(p.strategy(), comm_, p)->apply(serial);
  serial = nullptr;

  std::vector<std::unique_ptr<FlatAdamW>> optimizers;
  for (auto& chunk : pm->chunks) optimizers.push_back(std::make_unique<FlatAdamW>(*chunk.flat, p.weight_decay));
  const int m = p.microbatches();
  // The activations between stages: [micro-batch, tokens, hidden].
  const int64_t tokens = p.model.is_gpt()
                             ? p.max_seq_length
                             : (p.model.img_size / p.model.patch_size) * (p.model.img_size / p.model.patch_size) + 1;
  PipelineRunner runner(core::make_schedule(p.schedule_kind(), comm_.axis("pp").size(), m,
                                            static_cast<int>(pm->chunks.size())),
                        *pm, comm_, tokens, p.model.hidden(), p.precision == "bf16");
  Group& dp = comm_.axis("dp");
  // Tracing: clocks start together after a barrier; steps [first, first + n) are recorded.
  std::unique_ptr<TraceRecorder> tracer;
  long trace_first = 0;
  if (!options_.trace_path.empty()) {
    tracer = std::make_unique<TraceRecorder>(comm_.mesh(), comm_.rank());
    comm_.set_tracer(tracer.get());
    comm_.barrier(comm_.world());
    tracer->set_origin(TraceRecorder::Clock::now());
    tracer->share_origin(comm_, device_);
  }
  BatchSampler sampler(data->train_size(), p.batch_size, p.seed);
  const long per_epoch = sampler.batches_per_epoch();
  if (per_epoch == 0)
    throw core::UserError("batch_size: " + std::to_string(p.batch_size) + " is larger than the " +
                          std::to_string(data->train_size()) + " training samples");
  const long total_steps = options_.max_steps > 0 ? options_.max_steps : per_epoch * p.num_epochs;
  const int epochs = static_cast<int>((total_steps + per_epoch - 1) / per_epoch);
  if (tracer) trace_first = total_steps > 1 ? 1 : 0;

  std::ofstream metrics;
  if (is_logger_ && !options_.metrics_path.empty()) {
    metrics.open(options_.metrics_path, std::ios::trunc);
    if (!metrics) throw core::UserError("--metrics: cannot write " + options_.metrics_path);
  }
  if (is_logger_)
    std::printf("training %s (%s) on %s (%s, %s): %s, %ld steps/epoch, global batch %d = micro %d x %d "
                "microbatches x dp %d\n",
                p.model.kind.c_str(), p.precision.c_str(), p.mesh().shape_string().c_str(), p.strategy().c_str(),
                core::schedule_kind_name(p.schedule_kind()), data->describe().c_str(), per_epoch, p.batch_size,
                p.micro_batch_size(), m, p.dp());
  if (is_logger_ && p.pp() * p.virtual_stages > 1) {
    const core::ModelDims dims = core::model_dims(p.model, p.max_seq_length);
    const std::string note = core::stage_balance_note(dims, core::balanced_stages(dims, p.pp() * p.virtual_stages));
    std::printf("pipeline: %s\n", note.c_str());
  }
  // The original's tables: accuracy for the classifier, perplexity for the language model.
  const bool lm = p.model.is_gpt();
  if (is_logger_ && options_.evaluate)
    std::printf(lm ? "\n| Epoch | Train Loss | Train PPL | Val Loss | Val PPL |\n|-------|------------|-----------|----------|---------|\n"
                   : "\n| Epoch | Train Loss | Train Acc | Val Loss | Val Acc |\n|-------|------------|-----------|----------|---------|\n");
  std::fflush(stdout);

  // Where the run stands: a fresh start, or what a checkpoint recorded.
  Manifest state;
  state.total_steps = total_steps;
  if (!options_.resume_path.empty()) {
    state = load_checkpoint(options_.resume_path, comm_, p, *pm, optimizers);
    if (is_logger_) {
      std::printf("resumed from %s at step %ld\n", resolve_checkpoint(options_.resume_path).c_str(), state.step);
      if (state.total_steps != total_steps)
        std::printf("note: the checkpoint's run planned %ld steps, this one %ld: the learning-rate schedule differs\n",
                    state.total_steps, total_steps);
    }
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
      if (tracer) tracer->set_step(static_cast<int>(step), step >= trace_first && step < trace_first + options_.trace_steps);
      for (auto& chunk : pm->chunks) chunk.flat->zero_grad();
      std::vector<torch::Tensor> inputs, labels;
      for (int j = 0; j < m; ++j) {
        auto [x, y] = data->train_batch(sampler.microbatch(epoch, k, dp.rank, dp.size(), j, m), device_);
        inputs.push_back(x);
        labels.push_back(y);
      }
      const StepStats s = runner.train_step(inputs, labels);
      const auto optimizer_start = TraceRecorder::Clock::now();
      const double grad_norm = clip_gradients(*pm);
      for (auto& opt : optimizers) opt->step(lr);
      if (tracer)
        tracer->event(core::Lane::Compute, "optimizer", "OPTIMIZER_STEP", optimizer_start, TraceRecorder::Clock::now());

      // The loss of the global batch: the mean over dp replicas.
      torch::Tensor step_loss = torch::full({1}, s.loss, stats_options());
      comm_.all_reduce_sum(dp, step_loss);
      const double global_loss = step_loss.item<double>() / dp.size();
      epoch_stats[0] += s.loss * s.samples;
      epoch_stats[1] += s.correct;
      epoch_stats[2] += s.samples;
      samples_done += p.batch_size;
      const double rate = samples_done / std::max(1e-9, seconds_since(train_start));
      result.final_train_loss = global_loss;
      if (metrics.is_open()) {
        char line[256];
        std::snprintf(line, sizeof(line),
                      "{\"step\": %ld, \"epoch\": %d, \"loss\": %.17g, \"lr\": %.9g, \"grad_norm\": %.9g, "
                      "\"samples_per_s\": %.6g, \"mb_losses\": [",
                      step + 1, epoch + 1, global_loss, lr, grad_norm, rate);
        metrics << line;
        for (size_t j = 0; j < s.mb_losses.size(); ++j) {
          std::snprintf(line, sizeof(line), "%s%.17g", j ? ", " : "", s.mb_losses[j]);
          metrics << line;
        }
        metrics << "]}\n" << std::flush;
      }
      char note[64];
      std::snprintf(note, sizeof(note), "loss %.4f", global_loss);
      progress.update(k + 1 - first_k, static_cast<long>((k + 1 - first_k) * p.batch_size), note);
      ++step;
      if (k + 1 < per_epoch && step < total_steps && checkpoint_due()) save_checkpoint(true);
    }
    if (k < per_epoch && step < total_steps) {  // stopped inside the epoch (--stop-at-step): no epoch row
      if (is_logger_)
        std::printf("stopped after step %ld of %ld (--stop-at-step)%s\n", step, total_steps,
                    saved_step == step ? "; continue with --resume" : "");
      break;
    }
    comm_.all_reduce_sum(dp, epoch_stats);
    const double train_loss = epoch_stats[0].item<double>() / epoch_stats[2].item<double>();
    const double train_acc = epoch_stats[1].item<double>() / epoch_stats[2].item<double>();
    if (options_.evaluate) {
      const Evaluation ev = evaluate(runner, *pm, *data);
      result.final_val_loss = ev.loss;
      if (!lm) result.final_val_accuracy = ev.accuracy;
      if (is_logger_) {
        if (lm)
          std::printf("| %5d | %10.4f | %9.2f | %8.4f | %7.2f |\n", epoch + 1, train_loss, std::exp(train_loss), ev.loss,
                      std::exp(ev.loss));
        else
          std::printf("| %5d | %10.4f | %8.2f%% | %8.4f | %6.2f%% |\n", epoch + 1, train_loss, 100 * train_acc, ev.loss,
                      100 * ev.accuracy);
        std::fflush(stdout);
      }
      if (ev.loss < state.best_val_loss - 1e-6) {
        state.best_val_loss = ev.loss;
        state.epochs_without_improvement = 0;
      } else if (p.patience > 0 && ++state.epochs_without_improvement >= p.patience) {
        if (is_logger_) std::printf("early stopping: no validation improvement for %d epochs\n", p.patience);
        stop_early = true;
      }
    }
    if (checkpoint_due() || (checkpoints && stop_early)) save_checkpoint(false);
    if (stop_early) break;
  }
  result.steps = step;
  result.wall_s = seconds_since(t0);
  result.samples_per_s = samples_done / std::max(1e-9, seconds_since(train_start));

  if (!options_.save_params_path.empty()) save_params(*pm);
  if (tracer) {
    tracer->set_step(0, false);
    // The op-shape probe for the simulator's calibration; after training, so it
    // cannot change it (no optimizer step, gradients discarded).
    nlohmann::json op_probe = nullptr;
    if (p.micro_batch_size() >= 2) {
      auto [x, y] = data->train_batch(sampler.microbatch(0, 0, dp.rank, dp.size(), 0, m), device_);
      op_probe = probe_op_shapes(*pm, comm_, x, y, {tokens, p.model.hidden(), p.precision == "bf16"});
    }
    comm_.set_tracer(nullptr);
    nlohmann::json platform = {{"host", "cpu"}, {"world_size", comm_.world_size()},
                               {"threads_per_rank", torch::get_num_threads()}, {"device", p.device_type},
                               {"cores", static_cast<int>(std::thread::hardware_concurrency())}};
    if (!op_probe.is_null()) platform["op_probe"] = op_probe;
    const core::Trace t = tracer->merge_and_write(comm_, options_.trace_path, p.to_json(), platform);
    if (is_logger_) {
      // What core's schedule statistics predict from the op costs this run measured.
      const core::Schedule s = core::make_schedule(p.schedule_kind(), comm_.axis("pp").size(), m,
                                                   static_cast<int>(pm->chunks.size()));
      const core::BubbleReport bubble = core::bubble_report(t, s);
      std::printf("trace: %s (%zu events, steps %ld-%ld); bubble fraction measured %.4f, predicted from median op "
                  "costs %.4f, replayed with each op's measured time %.4f\n",
                  options_.trace_path.c_str(), t.events.size(), trace_first + 1,
                  std::min(total_steps, trace_first + options_.trace_steps), bubble.measured, bubble.predicted,
                  bubble.replayed);
    }
  }
  if (is_logger_)
    std::printf("done: %ld steps in %.1f s, %.1f samples/s, final train loss %.4f\n", result.steps, result.wall_s,
                result.samples_per_s, result.final_train_loss);
  return result;
}

}  // namespace quintnet::exec
