#pragma once
// Activation recomputation inside the models (plan key `recompute`; Korthikanti et al.
// 2022), switched on per thread by the pipeline runner around each stage forward:
//
// - full: each transformer block keeps only its input; its backward runs the block's
//   forward again — drawing the dropout masks it drew the first time (the generator's
//   state is kept) under the autocast it ran under — and differentiates that.  As
//   Megatron-LM's full recomputation: per layer, so a stage holds one layer's
//   activations at a time during its backward.
// - selective: each attention core keeps q, k and v, not its softmax and dropout mask
//   (exec/models/attention.h).
//
// Only while a graph is recorded: evaluation under NoGradGuard runs the blocks plainly.
#include <torch/torch.h>

#include <functional>

#include "core/run_options.h"

namespace quintnet::exec {

using core::Recompute;

class RecomputeScope {
 public:
  explicit RecomputeScope(Recompute mode);
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  Recompute before_;
};

// What this thread's scope asks for, and whether a graph is being recorded.
bool recomputing(Recompute mode);

// One block's forward: with full recomputation on, through a node that keeps only the
// input (and the block's parameters, to hand them their gradients).
using BlockForward = std::function<torch::Tensor(const torch::Tensor&)>;
torch::Tensor run_block(torch::nn::Module& block, BlockForward forward, const torch::Tensor& input);

// Block forwards this process ran again in a backward so far.
long blocks_recomputed();

}  // namespace quintnet::exec
