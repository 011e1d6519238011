#pragma once
// PipelineRunner — executes this rank's list of a core::Schedule, action by action.
// Nothing else decides the order: F, B, BI/BW, SEND_*/RECV_* (c10d isend / recv on the
// pp group), GRAD_SYNC (the chunk's DP buckets) and OPTIMIZER_STEP (returns to the
// trainer).  With pp = 1 the same code runs the plain gradient-accumulation loop.
#include <torch/torch.h>

#include <map>
#include <utility>
#include <vector>

#include "core/schedule.h"
#include "exec/comm/communicator.h"
#include "exec/train/strategy.h"

namespace quintnet::exec {

// Per-step figures shared by every pp rank (the last stage computes them).
struct StepStats {
  double loss = 0.0;     // mean over the microbatches of this rank's dp shard
  double correct = 0.0;  // samples classified right
  double samples = 0.0;
  std::vector<double> mb_losses;  // per microbatch, in microbatch order (training steps)
};

class PipelineRunner {
 public:
  // tokens, hidden: the activation shape between stages is [micro-batch, tokens, hidden].
  // bf16: forward passes under autocast (exec/train/autocast.h); what crosses a stage
  // boundary and what the loss reads stay fp32.
  PipelineRunner(core::Schedule schedule, ParallelModel& model, Communicator& comm, int64_t tokens, int64_t hidden,
                 bool bf16 = false);

  // One optimizer step's forward and backward passes (everything up to OPTIMIZER_STEP).
  // inputs/labels: one tensor per microbatch (the first stage reads the inputs, the
  // last the labels).
  StepStats train_step(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels);

  // Forward only through all stages; returns {loss sum, correct, samples} on every pp rank.
  StepStats evaluate(const torch::Tensor& input, const torch::Tensor& labels);

 private:
  struct Slot {  // one (microbatch, chunk) in flight
    torch::Tensor input, output, grad_output, input_grad;
  };
  using Key = std::pair<int, int>;  // (mb, chunk)

  torch::Tensor stage_forward(int c, const torch::Tensor& input);  // chunk c's model, under autocast with bf16
  void forward(int mb, int c, const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& labels,
               torch::Tensor& stats);
  void backward(const core::Action& a, size_t index);
  int tag(bool grad, int mb, int to_stage) const;
  StepStats share_from_last_stage(torch::Tensor stats);
  void sync_tied_gradients();

  core::Schedule schedule_;
  ParallelModel& model_;
  Communicator& comm_;
  Group& pp_;
  int pp_rank_;
  int64_t tokens_, hidden_;
  bool bf16_;
  std::vector<size_t> last_grad_action_;  // per chunk: index of the action that completes its gradients
  std::map<Key, Slot> slots_;
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, torch::Tensor>> pending_sends_;
  bool tied_checked_ = false;  // tied parameters: looked up once, on the first step
  int64_t tied_numel_ = 0;
};

}  // namespace quintnet::exec
