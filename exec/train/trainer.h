#pragma once
// Trainer — the training loop of one rank: microbatches with gradient accumulation,
// data-parallel gradient averaging, global-norm clipping over sharded parameters,
// AdamW with warm-up + cosine learning rate, evaluation each epoch, early stopping,
// the original QuintNet's per-epoch table, a progress line, JSONL metrics.
#include <memory>
#include <optional>
#include <string>

#include "core/plan.h"
#include "exec/comm/communicator.h"
#include "exec/data/training_data.h"
#include "exec/pp/pipeline_runner.h"
#include "exec/train/strategy.h"

namespace quintnet::exec {

class FlatAdamW;
class RunLog;
class RunTrace;
struct Manifest;

struct TrainOptions {
  long max_steps = 0;           // 0 = the plan's epochs
  std::string metrics_path;     // JSONL, one object per optimizer step (rank 0 writes)
  std::string save_params_path;  // the final serial parameters (torch pickle; one file per pp rank: PATH.ppR)
  std::string trace_path;  // merged Chrome trace of the traced steps (rank 0 writes)
  int trace_steps = 3;     // steps traced, from the second step on (the first warms up)
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
};

struct TrainResult {
  long steps = 0;
  double final_train_loss = 0.0;
  std::optional<double> final_val_loss, final_val_accuracy;
  double samples_per_s = 0.0;
  double wall_s = 0.0;
};

class Trainer {
 public:
  Trainer(const core::Plan& plan, Communicator& comm, TrainOptions options);
  TrainResult run();

 private:
  struct Evaluation {
    double loss, accuracy;
  };
  struct StepOutcome {
    StepStats stats;           // this rank's dp shard
    double global_loss = 0.0;  // the mean over dp replicas
    double grad_norm = 0.0;    // before clipping
  };
  // One optimizer step: forward and backward passes (the schedule), clipping, AdamW.
  StepOutcome train_step(PipelineRunner& runner, ParallelModel& pm, std::vector<std::unique_ptr<FlatAdamW>>& optimizers,
                         RunTrace& trace, const std::vector<torch::Tensor>& inputs,
                         const std::vector<torch::Tensor>& labels, double lr);
  Evaluation evaluate(PipelineRunner& runner, ParallelModel& pm, const TrainingData& data);
  // Early stopping: records a validation loss; true once `patience` epochs brought no improvement.
  bool no_longer_improving(double val_loss, Manifest& state, RunLog& log) const;
  double clip_gradients(ParallelModel& pm);
  void save_params(ParallelModel& pm);

  // Statistics (losses, counts) live on the device so NCCL can reduce them.
  torch::TensorOptions stats_options() const { return torch::TensorOptions().dtype(torch::kFloat64).device(device_); }

  const core::Plan& plan_;
  Communicator& comm_;
  TrainOptions options_;
  bool is_logger_;  // global rank 0 prints and writes
  torch::Device device_;
};

}  // namespace quintnet::exec
