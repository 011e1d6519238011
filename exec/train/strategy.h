#pragma once
// The strategy API, in the spirit of the original QuintNet:
//
//   auto strategy = make_strategy("3d", comm, plan);
//   std::unique_ptr<ParallelModel> model = strategy->apply(serial_model);  // a ViT or a GPT-2
//
// apply() turns a serial model into this rank's part of the parallel one, in the
// original's wrapping order: tensor parallelism slices the serial weights (so one
// serial checkpoint loads into any layout), pipeline parallelism keeps this rank's
// stages (v chunks with the interleaved schedule), data parallelism broadcasts the
// parameters from dp rank 0 and attaches gradient buckets.  Each chunk's parameters
// and gradients live in flat buffers.  Strategies: dp, tp, pp, dp_tp, dp_pp, tp_pp, 3d.
#include <memory>
#include <string>
#include <vector>

#include "core/plan.h"
#include "exec/comm/communicator.h"
#include "exec/dp/grad_buckets.h"
#include "exec/models/stage_model.h"
#include "exec/train/flat_parameters.h"

namespace quintnet::exec {

// One virtual pipeline stage held by this rank.
struct ModelChunk {
  int stage = 0;  // virtual stage index: chunk c of pp rank r is stage c·pp + r
  StageRange range;  // its blocks
  std::shared_ptr<StageModel> model;
  std::unique_ptr<FlatParameters> flat;  // parameters and gradients in two buffers
  std::unique_ptr<GradBuckets> dp;       // gradient averaging over the dp group (null if dp = 1)
};

struct ParallelModel {
  TpContext tp;
  int num_stages = 1;  // pp · chunks
  std::vector<ModelChunk> chunks;

  bool is_first(int chunk) const { return chunks[chunk].stage == 0; }
  bool is_last(int chunk) const { return chunks[chunk].stage == num_stages - 1; }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<ParallelModel> apply(std::shared_ptr<StageModel> serial) = 0;
};

// Throws core::UserError for an unknown strategy.
std::unique_ptr<Strategy> make_strategy(const std::string& name, Communicator& comm, const core::Plan& plan);

}  // namespace quintnet::exec
