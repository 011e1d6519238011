#pragma once
// Trainer — the training loop of one rank: microbatches with gradient accumulation,
// data-parallel gradient averaging, global-norm clipping over sharded parameters,
// AdamW with warm-up + cosine learning rate, evaluation each epoch, early stopping,
// the original QuintNet's per-epoch table, a progress line, JSONL metrics.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "core/run_layout.h"
#include "exec/comm/communicator.h"
#include "exec/data/training_data.h"
#include "exec/pp/pipeline_runner.h"
#include "exec/parallel/strategy.h"

namespace quintnet::exec {

class FlatAdamW;
class PendingFigures;
class RunLog;
class RunTrace;
struct Manifest;

struct TrainOptions {
  long max_steps = 0;           // 0 = the plan's epochs
  std::string metrics_path;     // JSONL, one object per optimizer step (rank 0 writes)
  std::string save_params_path;  // the final serial parameters (torch pickle; one file per pp rank: PATH.ppR)
  std::string trace_path;  // merged Chrome trace of the traced steps (rank 0 writes)
  int trace_steps = 3;     // steps traced, from the second step on (the first warms up)
  std::string profile_dir;  // LibTorch's profiler over a few steps (exec/train/step_profiler.h)
  int profile_steps = 3;    // from the second step on
  bool evaluate = true;
  bool progress = true;
  // Checkpoints (see exec/checkpoint/checkpoint.h): written to checkpoint_dir every
  // checkpoint_every steps (0: only at the end), keeping the newest checkpoint_keep.
  std::string checkpoint_dir;
  long checkpoint_every = 0;
  int checkpoint_keep = 3;
  std::string resume_path;  // continue from this checkpoint (a step or run directory)
  long stop_at_step = 0;    // end the run after this step as if interrupted (0: run to the end)
  // One-rank runs: microbatches computed at once (exec/pp/microbatch_threads.h);
  // 0 = automatic (one per intra-op thread where exact), 1 = one after another.
  int microbatch_threads = 0;
  // A step whose loss or gradient norm is NaN or infinite: false stops the run there
  // (before the optimizer step, so the last checkpoint is the last good state); true
  // skips its optimizer step and goes on, as AMP's loss scaler does.
  bool skip_nonfinite = false;
};

struct TrainResult {
  long steps = 0;
  double final_train_loss = 0.0;
  std::optional<double> final_val_loss, final_val_accuracy;
  double samples_per_s = 0.0;
  double wall_s = 0.0;
  long skipped_steps = 0;  // non-finite steps skipped (TrainOptions::skip_nonfinite)
};

class Trainer {
 public:
  Trainer(const core::RunLayout& layout, Communicator& comm, TrainOptions options);
  TrainResult run();

 private:
  struct Evaluation {
    double loss, accuracy;
  };
  // One optimizer step, queued on the device.  Nothing in it waits for a GPU: what the
  // host learns of the step (loss, norm, whether it was finite) it reads a step later.
  struct QueuedStep {
    long step = 0;            // 0-based, over the run
    int epoch = 0;
    long done_in_epoch = 0;   // steps of this epoch done with it (the progress line's count)
    double lr = 0.0;
    std::size_t activation_bytes = 0;  // the peak of the forward and backward passes
    std::unique_ptr<PendingFigures> figures;  // in Figure order
  };
  // What a step's figures hold: then StepStats::figures of this rank's dp shard.
  enum Figure { kLossSum, kNonfiniteReplicas, kGradNorm, kThisRankNonfinite, kStepStats };
  struct Run;  // the parts of one run (trainer.cpp)
  using Clock = std::chrono::steady_clock;
  // The run's parts: data, the sharded model and its optimizers, the schedule and its
  // runner, the log, the trace, the checkpointer, and where the run stands.
  std::unique_ptr<Run> start();
  // One epoch's optimizer steps; false when the run stopped inside it (--stop-at-step).
  bool run_epoch(Run& r, int epoch);
  // After an epoch: evaluation, its table row, early stopping (true: stop), its checkpoint.
  bool end_epoch(Run& r, int epoch);
  void save_checkpoint(Run& r, bool mid_epoch);
  // Reads a queued step's figures (waiting for them alone): its log line, its progress,
  // the epoch's statistics; a step whose loss or gradient norm was not finite (its
  // optimizer step was skipped on the device) is an error, or counted as skipped.
  void settle(Run& r, const QueuedStep& q);
  void skip_or_stop(Run& r, const std::string& nonfinite);
  // The final parameters (--save-params), the trace, the closing line.
  TrainResult finish(Run& r, Clock::time_point t0);

  // One optimizer step: forward and backward passes (the schedule), the gradient norm,
  // clipping and AdamW, all queued; a step whose loss or norm is not finite on any
  // replica leaves the parameters as they were (decided on the device).
  QueuedStep train_step(Run& r, const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels,
                        long step, double lr);
  // Collective, on a non-finite step: the loss, the norm and the ranks whose gradients are not finite.
  std::string describe_nonfinite(long step, double loss, double norm, bool this_rank);
  Evaluation evaluate(PipelineRunner& runner, ParallelModel& pm, const TrainingData& data);
  // Early stopping: records a validation loss; true once `patience` epochs brought no improvement.
  bool no_longer_improving(double val_loss, Manifest& state, RunLog& log) const;
  // The global gradient norm (over tp shards and pipeline stages), a 0-dim float64 on the
  // device; `this_rank_nonfinite`: whether this rank's own gradients hold a NaN or infinity.
  torch::Tensor gradient_norm(ParallelModel& pm, torch::Tensor& this_rank_nonfinite);
  void clip_gradients(ParallelModel& pm, const torch::Tensor& norm);
  // Sums the tp ranks' partial gradients (StageModel::partial_gradient_parameters: under
  // sequence parallelism, and Llama's replicated key/value weights).
  void sum_partial_gradients(ParallelModel& pm);
  // One optimizer per chunk: they hold the fp32 masters under ZeRO-1 with bf16 weights.
  void save_params(ParallelModel& pm, const std::vector<std::unique_ptr<FlatAdamW>>& optimizers);

  // Statistics (losses, counts) live on the device so NCCL can reduce them.
  torch::TensorOptions stats_options() const { return torch::TensorOptions().dtype(torch::kFloat64).device(device_); }

  const core::RunLayout& layout_;
  const core::Plan& plan_;  // layout_.plan
  Communicator& comm_;
  TrainOptions options_;
  bool is_logger_;  // global rank 0 prints and writes
  torch::Device device_;
};

}  // namespace quintnet::exec
