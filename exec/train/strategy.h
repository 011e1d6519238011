#pragma once
// The strategy API, in the spirit of the original QuintNet:
//
//   auto strategy = make_strategy("dp_tp", comm, plan);
//   std::unique_ptr<ParallelModel> model = strategy->apply(serial_vit);
//
// apply() turns a serial model into this rank's part of the parallel one: tensor
// parallelism slices the serial weights (so one serial checkpoint loads into any tp
// degree), data parallelism broadcasts the parameters from dp rank 0 and attaches
// the gradient buckets; parameters and gradients move into flat buffers.  Strategies: dp, tp, dp_tp (pp, dp_pp, tp_pp, 3d need the
// pipeline executor).
#include <memory>
#include <string>

#include "core/plan.h"
#include "exec/comm/communicator.h"
#include "exec/dp/grad_buckets.h"
#include "exec/models/vit.h"
#include "exec/train/flat_parameters.h"

namespace quintnet::exec {

struct ParallelModel {
  TpContext tp;
  ViT model{nullptr};
  std::unique_ptr<FlatParameters> flat;  // parameters and gradients in two buffers
  std::unique_ptr<GradBuckets> dp;       // gradient averaging over the dp group
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<ParallelModel> apply(ViT serial) = 0;
};

// Throws core::UserError for an unknown strategy or one this build cannot run.
std::unique_ptr<Strategy> make_strategy(const std::string& name, Communicator& comm, const core::Plan& plan);

}  // namespace quintnet::exec
