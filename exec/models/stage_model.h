#pragma once
// StageModel — what the strategy, the pipeline runner and the trainer need from a
// model, whatever it is (ViT, GPT-2): a forward pass from one stage's input to its
// output, the last stage's loss, and a way to build any range of its blocks with any
// tensor-parallel group.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "exec/cp/context_parallel.h"
#include "exec/models/stage_range.h"
#include "exec/tp/tp_ops.h"

namespace quintnet::exec {

// The last stage's loss on one microbatch, and what the epoch table counts.
struct StageLoss {
  torch::Tensor loss;     // mean over the microbatch (differentiable)
  torch::Tensor correct;  // samples classified right (ViT); 0 for language models
  double count = 0;       // samples in the microbatch
};

class StageModel : public torch::nn::Module {
 public:
  // First stage: the model's input (images, token ids); others: the hidden states
  // [micro-batch, tokens, hidden]; the last stage returns what loss() takes.
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  virtual StageLoss loss(const torch::Tensor& output, const torch::Tensor& labels) = 0;
  // Blocks `range` of the same architecture, sharded over `tp` (freshly initialised:
  // load a serial state into it).
  virtual std::shared_ptr<StageModel> make_stage(const TpContext& tp, StageRange range) const = 0;
  // Parameters the first and the last stage both hold and must keep equal (GPT-2's
  // tied token embedding): their gradients are summed over the pipeline.
  virtual std::vector<torch::Tensor> tied_parameters() { return {}; }
  // Parameters whose gradient on each tp rank is only that rank's share, which the
  // trainer sums over the tp group: under sequence parallelism the replicated ones used
  // on a rank's part of the sequence (the blocks' norms, row-parallel biases); Llama's
  // key/value weights where tp exceeds its key/value heads (KeyValueParallelLinear).
  virtual std::vector<torch::Tensor> partial_gradient_parameters() { return {}; }
  // Context parallelism: from now on this stage sees its cp rank's two chunks of every
  // sequence (exec/cp/context_parallel.h).  Only models whose description allows a cp
  // axis (core::ModelKind::context_parallel) override it; the plan's validation keeps
  // the others from being asked.
  virtual void use_context_parallel(const CpContext&) {
    throw std::logic_error("use_context_parallel: this model has no context parallelism");
  }
};

}  // namespace quintnet::exec
