#include "exec/train/trainer.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "exec/checkpoint/checkpoint.h"
#include "exec/cp/context_parallel.h"
#include "exec/data/batch_sampler.h"
#include "exec/data/training_data.h"
#include "exec/dp/zero_shards.h"
#include "exec/models/attention.h"
#include "exec/models/recompute.h"
#include "exec/models/registry.h"
#include "exec/models/serial_state.h"
#include "exec/trace/trace_recorder.h"
#include "exec/train/checkpointer.h"
#include "exec/train/lr_schedule.h"
#include "exec/parallel/grad_norm.h"
#include "exec/precision/autocast.h"
#include "exec/train/memory_report.h"
#include "exec/train/pending_figures.h"
#include "exec/train/progress.h"
#include "exec/train/run_log.h"
#include "exec/train/run_trace.h"
#include "exec/train/step_profiler.h"

namespace quintnet::exec {
namespace {

// A microbatch as this rank computes it: under context parallelism its cp rank's two
// chunks of every sequence, inputs and targets alike (exec/cp/context_parallel.h).
std::pair<torch::Tensor, torch::Tensor> context_part(Communicator& comm, std::pair<torch::Tensor, torch::Tensor> batch) {
  if (comm.mesh().size(core::Axis::Cp) == 1) return batch;
  const CpContext cp{&comm, &comm.axis(core::Axis::Cp)};
  return {local_sequence(batch.first, cp), local_sequence(batch.second, cp)};
}

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
                        : p.device_type != core::Device::Cpu   ? "it is for the CPU"
                        : dropout                              ? "the plan has dropout"
                        : p.recompute != Recompute::None       ? "the plan recomputes activations"
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

// Fault injection for the non-finite test: QN_FAULT_NAN_GRADS=RANK:STEP makes that
// rank's gradients NaN at that step (0-based), as an overflow in its backward would.
void maybe_poison_gradients(int rank, long step, ParallelModel& pm) {
  const char* spec = std::getenv("QN_FAULT_NAN_GRADS");
  if (!spec || std::to_string(rank) + ":" + std::to_string(step) != spec) return;
  for (auto& chunk : pm.chunks) chunk.flat->grads().fill_(std::numeric_limits<float>::quiet_NaN());
}

}  // namespace

// The parts of one run, built once by start(); the loop in run() goes through them.
struct Trainer::Run {
  Run(const ModelEntry& entry, std::unique_ptr<TrainingData> training_data, const core::Plan& p)
      : model(entry), data(std::move(training_data)), sampler(data->train_size(), p.batch_size, p.seed) {}

  const ModelEntry& model;
  std::unique_ptr<TrainingData> data;
  std::unique_ptr<ParallelModel> pm;  // this rank's part of the model
  Optimizers optimizers;              // one per chunk
  core::Schedule schedule;
  int64_t tokens = 0;  // the activations between stages: [micro-batch, tokens, hidden]
  std::unique_ptr<PipelineRunner> runner;
  BatchSampler sampler;
  long per_epoch = 0, total_steps = 0;
  long last_step = 0;  // total_steps, or --stop-at-step
  int epochs = 0;
  std::unique_ptr<RunLog> log;
  std::unique_ptr<RunTrace> trace;
  std::unique_ptr<StepProfiler> profiler;
  std::unique_ptr<Checkpointer> checkpoints;
  Manifest state;  // steps done, early-stopping state, the epoch so far: what a checkpoint records
  std::optional<Progress> progress;  // the current epoch's progress line
  torch::Tensor epoch_stats;  // the current epoch on this dp shard: loss x samples, correct, samples
  double samples_done = 0;
  // Activation memory: the first step's (it may allocate what later steps reuse) and the
  // most of any later one.
  long steps_run = 0;
  std::size_t first_step_activations = 0, activation_peak = 0;
  Clock::time_point train_start;
  TrainResult result;
};

Trainer::Trainer(const core::RunLayout& layout, Communicator& comm, TrainOptions options)
    : layout_(layout), plan_(layout.plan), comm_(comm), options_(std::move(options)), is_logger_(comm.rank() == 0),
      device_(torch::kCPU) {
  if (plan_.device_type != core::Device::Cuda) return;
  if (!torch::cuda::is_available())
    throw core::UserError("device_type: cuda, but no CUDA device is available to this process; set device_type: cpu");
  // One GPU per local rank; where there are fewer GPUs than ranks they share them (the
  // communicator then goes through host memory: NCCL refuses two ranks on one GPU).
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(comm.env().local_rank % gpus));
}

torch::Tensor Trainer::gradient_norm(ParallelModel& pm, torch::Tensor& this_rank_nonfinite) {
  // ‖g‖² = Σ over pipeline stages of [Σ over tp-sharded parameters (summed over the
  // tp group) + Σ over replicated ones (identical on every tp rank, counted once)].
  // Under ZeRO-1's reduce-scatter each dp rank holds only its pieces' averaged gradients:
  // it counts those, and the dp ranks' sums add up to the whole.
  torch::NoGradGuard no_grad;
  const bool tp_sharded = comm_.axis(core::Axis::Tp).size() > 1;  // else the split does not matter
  torch::Tensor sharded = torch::zeros({}, stats_options()), replicated = torch::zeros({}, stats_options());
  bool pieces = false;
  for (size_t c = 0; c < pm.chunks.size(); ++c) {
    auto& chunk = pm.chunks[c];
    const torch::Tensor& grads = chunk.flat->grads();
    const ZeroShards* scattered = chunk.dp ? chunk.dp->scattered_to() : nullptr;
    pieces = pieces || scattered;
    const std::vector<FlatRange> counted = scattered ? scattered->pieces() : std::vector<FlatRange>{{0, grads.numel()}};
    // Each part summed over its own ranges, never as a difference: the replicated part
    // must come out bitwise the same on every tp rank (their clip factors, hence their
    // copies of the replicated parameters, would drift apart otherwise).
    if (tp_sharded) {
      sharded += sum_of_squares(grads, intersect(chunk.flat->sharded_ranges(), counted));
      replicated += sum_of_squares(grads, intersect(chunk.flat->replicated_ranges(), counted));
    } else {
      replicated += sum_of_squares(grads, counted);
    }
    // A tied parameter (GPT-2's vocabulary-parallel embedding) is one parameter held by
    // the first and the last stage: count it once, on the first.
    if (pm.is_last(static_cast<int>(c)) && !pm.is_first(static_cast<int>(c)))
      for (const torch::Tensor& p : chunk.model->tied_parameters())
        for (const auto& slot : chunk.flat->slots())
          if (slot.param.is_same(p)) sharded -= sum_of_squares(grads, intersect({{slot.offset, slot.numel}}, counted));
  }
  this_rank_nonfinite = (sharded + replicated).isfinite().logical_not();
  comm_.all_reduce_sum(comm_.axis(core::Axis::Tp), sharded);
  torch::Tensor total = sharded + replicated;
  comm_.all_reduce_sum(comm_.axis(core::Axis::Pp), total);
  if (pieces) comm_.all_reduce_sum(comm_.replicas(), total);
  // Rounding can leave the tied correction a hair below zero; a NaN stays NaN.
  return total.clamp_min(0.0).sqrt();
}

void Trainer::sum_partial_gradients(ParallelModel& pm) {
  // One all-reduce for all of them: their gradients packed into one tensor and back.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& chunk : pm.chunks)
    for (const torch::Tensor& p : chunk.model->partial_gradient_parameters()) grads.push_back(p.grad());
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& g : grads) flat.push_back(g.reshape({-1}));
  torch::Tensor packed = torch::cat(flat);
  comm_.all_reduce_sum(comm_.axis(core::Axis::Tp), packed);
  int64_t at = 0;
  for (torch::Tensor& g : grads) {
    g.copy_(packed.narrow(0, at, g.numel()).view_as(g));
    at += g.numel();
  }
}

void Trainer::clip_gradients(ParallelModel& pm, const torch::Tensor& norm) {
  torch::NoGradGuard no_grad;
  if (plan_.max_grad_norm <= 0) return;
  // On the device: a factor of 1 leaves the gradients as they are, bit for bit.
  const double max = plan_.max_grad_norm;
  const torch::Tensor factor = torch::where(norm > max, max / (norm + 1e-6), torch::ones_like(norm));
  for (auto& chunk : pm.chunks) chunk.flat->grads().mul_(factor.to(torch::kFloat32));
}

Trainer::Evaluation Trainer::evaluate(PipelineRunner& runner, ParallelModel& pm, const TrainingData& data) {
  for (auto& chunk : pm.chunks) chunk.model->eval();
  Group& dp = comm_.axis(core::Axis::Dp);
  // Contiguous shards of the validation set per dp rank; tp ranks compute the same, cp
  // ranks each their part of the sequences (summed over the replicas, the ratios hold).
  const std::int64_t count = data.val_size(), chunk = data.eval_batch_size();
  const std::int64_t per_rank = (count + dp.size() - 1) / dp.size();
  const std::int64_t begin = std::min(count, dp.rank * per_rank), end = std::min(count, begin + per_rank);
  torch::Tensor totals = torch::zeros({3}, stats_options());  // loss sum, correct, count
  for (std::int64_t start = begin; start < end; start += chunk) {
    std::vector<int64_t> idx;
    for (std::int64_t i = start; i < std::min(end, start + chunk); ++i) idx.push_back(i);
    auto [inputs, labels] = context_part(comm_, data.val_batch(idx, device_));
    const EvalStats s = runner.evaluate(inputs, labels);
    totals[0] += s.loss_sum;
    totals[1] += s.correct;
    totals[2] += s.samples;
  }
  comm_.all_reduce_sum(comm_.replicas(), totals);
  for (auto& chunk : pm.chunks) chunk.model->train();
  return {totals[0].item<double>() / totals[2].item<double>(), totals[1].item<double>() / totals[2].item<double>()};
}

void Trainer::save_params(ParallelModel& pm, const Optimizers& optimizers) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (size_t c = 0; c < pm.chunks.size(); ++c) {
    ModelChunk& chunk = pm.chunks[c];
    // fp32 under bf16 weights too (under ZeRO-1 gathered from the dp ranks).
    const SerialState masters = chunk.flat->slot_views(optimizers[c]->whole_masters());
    for (auto& [name, t] : gather_serial_state(*chunk.model, pm.tp, false, &masters)) dict.insert(name, t.cpu());
  }
  const core::Mesh& mesh = comm_.mesh();
  if (comm_.replicas().rank != 0 || mesh.coord(comm_.rank(), core::Axis::Tp) != 0) return;
  // One file per pipeline rank (its stages' parameters) when pp > 1.
  const std::string path = options_.save_params_path +
                           (mesh.size(core::Axis::Pp) > 1 ? ".pp" + std::to_string(mesh.coord(comm_.rank(), core::Axis::Pp)) : "");
  const std::vector<char> bytes = torch::pickle_save(dict);
  core::write_file_atomically(path, std::string(bytes.begin(), bytes.end()));
}

Trainer::QueuedStep Trainer::train_step(Run& r, const std::vector<torch::Tensor>& inputs,
                                        const std::vector<torch::Tensor>& labels, long step, double lr) {
  ParallelModel& pm = *r.pm;
  for (auto& chunk : pm.chunks) chunk.flat->zero_grad();
  QueuedStep q;
  q.step = step;
  q.lr = lr;
  const ActivationPeak activations(device_);
  const StepStats stats = r.runner->train_step(inputs, labels);
  q.activation_bytes = activations.bytes();
  if (pm.tp.size() > 1) sum_partial_gradients(pm);
  maybe_poison_gradients(comm_.rank(), step, pm);
  const auto optimizer_start = TraceRecorder::Clock::now();
  RECORD_USER_SCOPE("OPTIMIZER_STEP");  // clipping and AdamW, in a profile
  torch::Tensor this_rank_nonfinite;
  const torch::Tensor norm = gradient_norm(pm, this_rank_nonfinite);  // over tp and pp
  // The loss of the global batch (summed over the dp × cp replicas) and how many replicas'
  // gradient norms are not finite, in one all-reduce: every rank then decides alike, even
  // when replicas disagree (they hold equal gradients unless something broke).
  torch::Tensor reduced = torch::stack({stats.figures[StepStats::kLoss], norm.isfinite().logical_not().to(torch::kFloat64)});
  comm_.all_reduce_sum(comm_.replicas(), reduced);
  const torch::Tensor skip = reduced[1].gt(0).logical_or(reduced[0].isfinite().logical_not());
  clip_gradients(pm, norm);
  for (auto& opt : r.optimizers) opt->step(lr, skip);
  r.trace->optimizer(optimizer_start);
  q.figures = std::make_unique<PendingFigures>(
      torch::cat({reduced, norm.reshape({1}), this_rank_nonfinite.to(torch::kFloat64).reshape({1}), stats.figures}));
  return q;
}

std::string Trainer::describe_nonfinite(long step, double loss, double norm, bool this_rank) {
  torch::Tensor bad = torch::zeros({comm_.world_size()}, stats_options());
  if (this_rank) bad[comm_.rank()] = 1.0;
  comm_.all_reduce_sum(comm_.world(), bad);
  const torch::Tensor on_host = bad.cpu();
  std::string ranks;
  for (int r = 0; r < comm_.world_size(); ++r)
    if (on_host[r].item<double>() > 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  std::ostringstream msg;
  msg << "step " << step + 1 << ": the loss is " << loss << " and the gradient norm " << norm;
  if (!ranks.empty()) msg << " (gradients not finite on rank" << (ranks.find(',') != std::string::npos ? "s " : " ") << ranks << ")";
  return msg.str();
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

std::unique_ptr<Trainer::Run> Trainer::start() {
  const core::Plan& p = plan_;
  const ModelEntry& model = model_entry(p.model);
  auto r = std::make_unique<Run>(model, model.load_data(p), p);

  // The same serial initial weights on every layout: seed, build serial, then shard.
  torch::manual_seed(p.seed);
  std::shared_ptr<StageModel> serial = model.make_serial(p);
  serial->to(device_);
  r->pm = make_strategy(comm_, layout_)->apply(serial);
  serial = nullptr;
  // zero_stage 1: each replica (dp × cp rank) keeps and updates its pieces of every DP
  // bucket, and where the backend can, receives only those pieces' averaged gradients
  // (a reduce-scatter).
  Group& dp = comm_.replicas();
  for (int c = 0; c < static_cast<int>(r->pm->chunks.size()); ++c) {
    ModelChunk& chunk = r->pm->chunks[c];
    std::shared_ptr<ZeroShards> shards;
    if (p.zero_stage == 1 && dp.size() > 1) {
      shards = std::make_shared<ZeroShards>(chunk.dp->ranges(), comm_, dp);
      // The tied embedding's two copies are summed over the pipeline after the backward:
      // each needs its whole averaged gradient.
      std::vector<torch::Tensor> whole;
      if (r->pm->num_stages > 1 && (r->pm->is_first(c) || r->pm->is_last(c))) whole = chunk.model->tied_parameters();
      if (comm_.can_reduce_scatter(dp, chunk.flat->grads())) chunk.dp->reduce_scatter_to(shards, whole);
    }
    r->optimizers.push_back(std::make_unique<FlatAdamW>(*chunk.flat, p.weight_decay, std::move(shards)));
  }

  const int chunks = static_cast<int>(r->pm->chunks.size());
  r->schedule = layout_.schedule;
  r->tokens = model.tokens(p);
  // What crosses a stage boundary under sequence parallelism: this rank's part of the
  // sequence (the plan's validation checked that the parts are equal).
  r->tokens /= layout_.cp;  // under context parallelism: this rank's two chunks
  if (r->pm->tp.sequence_parallel) r->tokens /= r->pm->tp.size();
  const int side_by_side = microbatches_side_by_side(p, comm_, options_, chunks);
  r->runner = std::make_unique<PipelineRunner>(r->schedule, *r->pm, comm_, r->tokens, p.model.hidden(),
                                               p.precision, side_by_side, p.recompute);

  r->per_epoch = r->sampler.batches_per_epoch();
  if (r->per_epoch == 0)
    throw core::UserError("batch_size: " + std::to_string(p.batch_size) + " is larger than the " +
                          std::to_string(r->data->train_size()) + " training samples");
  r->total_steps = options_.max_steps > 0 ? options_.max_steps : r->per_epoch * p.num_epochs;
  r->last_step = options_.stop_at_step > 0 ? std::min(r->total_steps, options_.stop_at_step) : r->total_steps;
  r->epochs = static_cast<int>((r->total_steps + r->per_epoch - 1) / r->per_epoch);

  r->trace = std::make_unique<RunTrace>(options_, comm_, device_, r->total_steps, p.to_json());
  r->profiler = std::make_unique<StepProfiler>(options_.profile_dir, options_.profile_steps, r->total_steps, comm_.rank(),
                                               device_.is_cuda());
  r->log = std::make_unique<RunLog>(p, options_, is_logger_);
  r->log->start(*r->data, r->per_epoch, side_by_side, comm_.describe(), layout_);
  if (p.precision != core::Precision::Fp32 && !device_.is_cuda() && cpu_bf16_matmul_accumulates_in_bf16())
    r->log->message("note: LibTorch's bf16 matrix products on this CPU accumulate in bf16 (" +
                    std::to_string(cpu_bf16_matmul_error() * 100).substr(0, 4) +
                    "% off fp32 on a sum of 1024; no AVX-512): this run follows fp32 less closely than bf16 usually does");
  if (p.zero_stage == 1) {
    std::int64_t bytes = 0;
    for (const auto& opt : r->optimizers) bytes += opt->state_bytes();
    r->log->message("optimizer state: " + std::to_string(bytes) + " bytes on this rank (zero_stage 1 over " + dp.name + " " +
                    std::to_string(dp.size()) + "; gradients " +
                    (dp.size() == 1             ? std::string("not averaged")
                     : comm_.can_reduce_scatter(dp, r->pm->chunks.front().flat->grads()) ? std::string("reduce-scattered")
                                                  : std::string("all-reduced: this backend has no reduce-scatter")) +
                    (dp.size() > 1 && p.precision == core::Precision::Bf16Weights
                         ? "; fp32 masters sharded too, updated parameters gathered as bf16 weights"
                         : "") +
                    ")");
  }
  r->checkpoints = std::make_unique<Checkpointer>(p, comm_, options_);
  r->state = r->checkpoints->start(*r->pm, r->optimizers, r->total_steps, *r->log);
  r->train_start = Clock::now();
  return r;
}

bool Trainer::run_epoch(Run& r, int epoch) {
  const core::Plan& p = plan_;
  Group& dp = comm_.axis(core::Axis::Dp);  // which samples; the replicas (dp × cp) sum the statistics
  const int m = p.microbatches();
  const long first_k = r.state.step - epoch * r.per_epoch;  // > 0 when resuming mid-epoch
  r.progress.emplace("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(r.epochs),
                     std::min(r.per_epoch - first_k, r.last_step - r.state.step), is_logger_ && options_.progress);
  // A resumed epoch's earlier part, summed over the replicas, is carried by the first.
  r.epoch_stats = torch::zeros({3}, stats_options());
  if (first_k > 0 && comm_.replicas().rank == 0)
    for (int i = 0; i < 3; ++i) r.epoch_stats[i] = r.state.epoch_stats[i];

  std::optional<QueuedStep> queued;  // the step whose figures the host has not read yet
  long k = first_k;
  for (; k < r.per_epoch && r.state.step < r.last_step; ++k) {
    const long step = r.state.step;
    const double lr = learning_rate_at(step, r.total_steps, p.warmup_steps, p.learning_rate);
    r.trace->begin_step(step);
    r.profiler->begin_step(step);
    comm_.set_step(step + 1);
    std::vector<torch::Tensor> inputs, labels;
    for (int j = 0; j < m; ++j) {
      auto [x, y] = context_part(comm_, r.data->train_batch(r.sampler.microbatch(epoch, k, dp.rank, dp.size(), j, m), device_));
      inputs.push_back(x);
      labels.push_back(y);
    }
    QueuedStep q = train_step(r, inputs, labels, step, lr);
    const std::string profile = r.profiler->end_step(step, step + 1 == r.last_step);
    if (!profile.empty() && is_logger_) r.log->message(profile);
    q.epoch = epoch;
    q.done_in_epoch = k + 1 - first_k;
    // The previous step's figures are ready by now (the host waits for nothing queued since).
    if (queued) settle(r, *queued);
    queued = std::move(q);
    r.state.step = step + 1;
    // The step that ends the epoch (or the run) is saved by end_epoch, after the evaluation;
    // a checkpoint, an epoch's end and the run's end read their step's figures first.
    const bool epoch_ends = k + 1 == r.per_epoch || r.state.step == r.total_steps;
    const bool save = !epoch_ends && r.checkpoints->due(r.state.step, r.last_step);
    if (epoch_ends || save || r.state.step == r.last_step) {
      settle(r, *queued);
      queued.reset();
    }
    if (save) save_checkpoint(r, true);
  }
  // Stopped inside the epoch (--stop-at-step): no evaluation, no epoch row.
  return k == r.per_epoch || r.state.step == r.total_steps;
}

void Trainer::settle(Run& r, const QueuedStep& q) {
  const std::vector<double> f = q.figures->read();
  const StepStats::Read stats = StepStats::read(std::vector<double>(f.begin() + kStepStats, f.end()));
  const double loss = f[kLossSum] / comm_.replicas().size(), norm = f[kGradNorm];
  const bool nonfinite = !std::isfinite(loss) || f[kNonfiniteReplicas] > 0;
  if (r.steps_run++ == 0)
    r.first_step_activations = q.activation_bytes;
  else
    r.activation_peak = std::max(r.activation_peak, q.activation_bytes);
  if (nonfinite) {
    skip_or_stop(r, describe_nonfinite(q.step, loss, norm, f[kThisRankNonfinite] > 0));
  } else {
    r.epoch_stats[0] += stats.loss * stats.samples;
    r.epoch_stats[1] += stats.correct;
    r.epoch_stats[2] += stats.samples;
    r.result.final_train_loss = loss;
  }
  r.samples_done += plan_.batch_size;
  r.log->step(q.step + 1, q.epoch + 1, loss, q.lr, norm, r.samples_done / std::max(1e-9, seconds_since(r.train_start)),
              stats.mb_losses, nonfinite);
  char note[64];
  std::snprintf(note, sizeof(note), "loss %.4f", loss);
  r.progress->update(q.done_in_epoch, static_cast<long>(q.done_in_epoch * plan_.batch_size), note);
}

void Trainer::skip_or_stop(Run& r, const std::string& nonfinite) {
  if (options_.skip_nonfinite) {
    r.log->message(nonfinite + "; step skipped (--on-nonfinite skip)");
    ++r.result.skipped_steps;
    return;
  }
  // Every rank stops here: the step's optimizer step did not happen (skipped on the
  // device), and no checkpoint was written after it (a checkpoint reads its step first).
  const long saved = r.checkpoints->last_saved_step();
  const std::string last_good = saved >= 0 ? "; the last good checkpoint is step " + std::to_string(saved)
                                : !options_.resume_path.empty() ? "; the last good checkpoint is " + options_.resume_path
                                                                : "";
  throw core::UserError(nonfinite + "; the run stops before its optimizer step" + last_good +
                        " (lower learning_rate, or --on-nonfinite skip to skip such steps)");
}

bool Trainer::end_epoch(Run& r, int epoch) {
  comm_.all_reduce_sum(comm_.replicas(), r.epoch_stats);
  const double train_loss = r.epoch_stats[0].item<double>() / r.epoch_stats[2].item<double>();
  const double train_acc = r.epoch_stats[1].item<double>() / r.epoch_stats[2].item<double>();
  bool stop_early = false;
  if (options_.evaluate) {
    const Evaluation ev = evaluate(*r.runner, *r.pm, *r.data);
    r.result.final_val_loss = ev.loss;
    if (!r.model.language_model) r.result.final_val_accuracy = ev.accuracy;
    r.log->epoch(epoch + 1, train_loss, train_acc, ev.loss, ev.accuracy);
    stop_early = no_longer_improving(ev.loss, r.state, *r.log);
  }
  if (r.checkpoints->due(r.state.step, r.last_step) || (r.checkpoints->enabled() && stop_early))
    save_checkpoint(r, false);
  return stop_early;
}

void Trainer::save_checkpoint(Run& r, bool mid_epoch) {
  // Inside an epoch the checkpoint carries the epoch's statistics so far, summed over
  // dp; at its end (after the evaluation, whose outcome early stopping keeps) the next
  // epoch starts from zero.
  torch::Tensor summed = r.epoch_stats.clone();
  if (mid_epoch) comm_.all_reduce_sum(comm_.replicas(), summed);
  for (int i = 0; i < 3; ++i) r.state.epoch_stats[i] = mid_epoch ? summed[i].item<double>() : 0.0;
  const std::string where = r.checkpoints->save(*r.pm, r.optimizers, r.state);
  if (is_logger_ && options_.progress) r.progress->message("checkpoint: " + where);
}

TrainResult Trainer::finish(Run& r, Clock::time_point t0) {
  const core::Plan& p = plan_;
  Group& dp = comm_.axis(core::Axis::Dp);
  r.result.steps = r.state.step;
  r.result.wall_s = seconds_since(t0);
  r.result.samples_per_s = r.samples_done / std::max(1e-9, seconds_since(r.train_start));

  if (!options_.save_params_path.empty()) save_params(*r.pm, r.optimizers);
  auto probe_batch = [&] {
    return context_part(comm_, r.data->train_batch(r.sampler.microbatch(0, 0, dp.rank, dp.size(), 0, p.microbatches()), device_));
  };
  r.trace->finish(p, *r.pm, r.schedule, probe_batch, {r.tokens, p.model.hidden(), p.precision != core::Precision::Fp32}, is_logger_);
  if (blocks_recomputed() > 0)
    r.log->message("activations: " + std::to_string(blocks_recomputed()) +
                   " blocks recomputed in the backward on this rank (recompute: full)");
  const std::string memory = memory_report(comm_, *r.pm, r.optimizers,
                                           r.steps_run > 1 ? r.activation_peak : r.first_step_activations, device_);
  if (!memory.empty()) r.log->message(memory);
  if (attention_cores_recomputed() > 0)
    r.log->message("activations: " + std::to_string(attention_cores_recomputed()) +
                   " attention cores recomputed in the backward on this rank (recompute: selective)");
  r.log->done(r.result);
  return r.result;
}

TrainResult Trainer::run() {
  const auto t0 = Clock::now();
  const std::unique_ptr<Run> r = start();
  for (int epoch = static_cast<int>(r->state.step / r->per_epoch); epoch < r->epochs && r->state.step < r->last_step;
       ++epoch) {
    if (!run_epoch(*r, epoch)) {
      r->log->message("stopped after step " + std::to_string(r->state.step) + " of " +
                      std::to_string(r->total_steps) + " (--stop-at-step)" +
                      (r->checkpoints->last_saved_step() == r->state.step ? "; continue with --resume" : ""));
      break;
    }
    if (end_epoch(*r, epoch)) break;  // early stopping
  }
  return finish(*r, t0);
}

}  // namespace quintnet::exec
