#pragma once
// PipelineRunner — executes this rank's list of a core::Schedule, action by action.
// Nothing else decides the order: F, B, BI/BW, SEND_*/RECV_* (the stages' messages,
// exec/pp/stage_messages.h), GRAD_SYNC (the chunk's DP buckets) and OPTIMIZER_STEP
// (returns to the trainer).  Evaluation walks core's forward-only schedule the same way.
// With pp = 1 the same code runs the plain gradient-accumulation loop; on a one-rank run
// given microbatch threads, the same actions of several microbatches run side by side
// (exec/pp/microbatch_threads.h), their gradients added in microbatch order: the same sums.
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/schedule.h"
#include "core/schedule_interpreter.h"
#include "exec/comm/communicator.h"
#include "exec/models/recompute.h"
#include "exec/pp/microbatch_threads.h"
#include "exec/pp/one_pool_threads.h"
#include "exec/pp/stage_messages.h"
#include "exec/pp/tied_gradients.h"
#include "exec/parallel/parallel_model.h"

namespace quintnet::exec {

// Per-step figures shared by every pp rank (the last stage computes them).  They stay
// on the device: reading them waits for the step, so the trainer reads them a step late
// (exec/train/pending_figures.h); read() is for callers that may wait.
struct StepStats {
  // float64 [3 + microbatches]: at these indices, then one loss per microbatch.
  enum Index { kLoss = 0, kCorrect = 1, kSamples = 2, kFirstMicrobatchLoss = 3 };
  torch::Tensor figures;

  struct Read {
    double loss = 0.0;     // mean over the microbatches of this rank's dp shard
    double correct = 0.0;  // samples classified right
    double samples = 0.0;
    std::vector<double> mb_losses;  // per microbatch, in microbatch order
  };
  static Read read(const std::vector<double>& figures);
  Read read() const;
};

// One evaluation batch's figures, summed: the caller divides once, over all batches.
struct EvalStats {
  // The float64 figures the last stage adds up, at these indices.
  enum Index { kLossSum = 0, kCorrect = 1, kSamples = 2, kFigures = 3 };
  double loss_sum = 0.0;  // the samples' losses added up
  double correct = 0.0;
  double samples = 0.0;
};

class PipelineRunner : private core::ScheduleHandler {
 public:
  // tokens, hidden: the activation shape between stages is [micro-batch, tokens, hidden].
  // precision bf16: forward passes under autocast (exec/precision/autocast.h);
  // bf16_weights: each stage's input cast to bf16, the weights' dtype.  Either way what
  // crosses a stage boundary stays fp32.
  // microbatch_threads > 1 (one rank, one chunk, no dropout: the trainer decides):
  // that many microbatches at once, the rank's intra-op threads shared among them.
  // recompute (plan key `recompute`): each stage forward runs under a RecomputeScope,
  // so the models keep less and their backward computes it again (exec/models/recompute.h).
  PipelineRunner(core::Schedule schedule, ParallelModel& model, Communicator& comm, int64_t tokens, int64_t hidden,
                 core::Precision precision = core::Precision::Fp32, int microbatch_threads = 1,
                 Recompute recompute = Recompute::None);

  // One optimizer step's forward and backward passes (everything up to OPTIMIZER_STEP).
  // inputs/labels: one tensor per microbatch (the first stage reads the inputs, the
  // last the labels).
  StepStats train_step(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels);

  // Forward only through all stages (core::make_forward_only, one microbatch); the
  // figures on every pp rank.
  EvalStats evaluate(const torch::Tensor& input, const torch::Tensor& labels);

 private:
  struct Slot {  // one (microbatch, chunk) in flight
    torch::Tensor input, output, grad_output, input_grad;
    StageLoss loss;                          // the last stage's, until added to the figures
    std::vector<torch::Tensor> weight_grads;  // side by side: this microbatch's own
  };
  using Key = std::pair<int, int>;  // (mb, chunk)
  // A schedule as this rank runs it: its actions, read, and its messages.
  struct Walk {
    Walk(core::Schedule s, Communicator& comm, Group& pp, int rank, int64_t tokens, int64_t hidden);
    core::Schedule schedule;
    std::vector<core::Step> steps;  // this rank's actions (core/schedule_interpreter.h)
    StageMessages messages;
  };

  // The schedule's actions (core::run_schedule calls them in this rank's order).
  void forward(const core::Step& step) override;
  void backward(const core::Step& step) override;
  void send(const core::Step& step) override;
  void recv(const core::Step& step) override;
  void grad_sync(const core::Step& step) override;
  void optimizer_step(const core::Step&) override {}  // the trainer's, after train_step returns
  // The action's event in the trace (when tracing a training step), from `start` to now,
  // and a message's endpoint for the trace's arrows.
  void trace(const core::Step& step, std::chrono::steady_clock::time_point start, std::int64_t bytes = 0);

  // Runs one walk over the given microbatches; the figures the last stage added up.
  torch::Tensor run(Walk& walk, const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels,
                    int64_t figures);
  torch::Tensor stage_forward(int c, const torch::Tensor& input);  // chunk c's model, under autocast with bf16
  // The last stage's loss of microbatch `mb`, added to the figures (training's or evaluation's).
  void add_loss(int mb, const StageLoss& loss, Slot& slot);
  // The last stage's figures of microbatch `mb` (in its slot), added to the step's.
  void add_figures(int mb, Slot& slot);
  Slot& slot_of(int mb, int chunk);
  // The training walk with microbatches side by side (exec/pp/microbatch_threads.h).
  void run_side_by_side(Walk& walk);
  // The last stage's figures (a float64 tensor), broadcast to every pp rank, in place.
  void share_from_last_stage(torch::Tensor& stats);

  ParallelModel& model_;
  Communicator& comm_;
  Group& pp_;
  int pp_rank_;
  int64_t tokens_, hidden_;
  core::Precision precision_;
  Recompute recompute_;
  Walk training_, evaluation_;
  Walk* walk_ = nullptr;  // the one running
  // The walk in progress: its microbatches and the figures the last stage adds up.
  const std::vector<torch::Tensor>* inputs_ = nullptr;
  const std::vector<torch::Tensor>* labels_ = nullptr;
  torch::Tensor stats_;
  std::map<Key, Slot> slots_;
  TiedGradients tied_;
  std::unique_ptr<MicrobatchThreads> side_by_side_;  // null: one microbatch after another
  std::unique_ptr<OnePoolThreads> one_pool_;         // one microbatch after another
  bool in_round_ = false;  // microbatches are running side by side (run_side_by_side)
};

}  // namespace quintnet::exec
