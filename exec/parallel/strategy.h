#pragma once
// The strategy API, in the spirit of the original QuintNet:
//
//   auto strategy = make_strategy(comm, layout);  // layout: core::resolve_layout(plan)
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

#include "core/run_layout.h"
#include "exec/comm/communicator.h"
#include "exec/parallel/parallel_model.h"

namespace quintnet::exec {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<ParallelModel> apply(std::shared_ptr<StageModel> serial) = 0;
};

// The layout's strategy (core::RunLayout::strategy, axes and stages).
std::unique_ptr<Strategy> make_strategy(Communicator& comm, const core::RunLayout& layout);

}  // namespace quintnet::exec
