#pragma once
// Checkpointer — the training loop's checkpoint policy over the format in
// exec/checkpoint: where a run starts (fresh, or from --resume), which steps are
// saved (every --checkpoint-every steps, the run's last step, an early stop), and
// that each save is reported.  Without --checkpoint-dir it saves nothing.
#include <optional>
#include <string>

#include "core/plan.h"
#include "exec/checkpoint/checkpoint.h"
#include "exec/comm/communicator.h"
#include "exec/train/trainer.h"

namespace quintnet::exec {

class RunLog;

class Checkpointer {
 public:
  Checkpointer(const core::Plan& plan, Communicator& comm, const TrainOptions& options);

  // Collective.  Where the run stands: a fresh start, or what the --resume checkpoint
  // recorded (its parameters, optimizer state and RNG are loaded into pm and optimizers).
  Manifest start(ParallelModel& pm, const Optimizers& optimizers, long total_steps, RunLog& log) const;

  bool enabled() const { return writer_.has_value(); }
  // Whether `step` (steps completed) is one to save: every checkpoint_every, and last_step.
  bool due(long step, long last_step) const;
  // Collective: saves `state` (state.step is the step); returns where it was written.
  std::string save(ParallelModel& pm, const Optimizers& optimizers, const Manifest& state);
  long last_saved_step() const { return last_saved_; }

 private:
  const core::Plan& plan_;
  Communicator& comm_;
  const TrainOptions& options_;
  std::optional<CheckpointWriter> writer_;
  long last_saved_ = -1;
};

}  // namespace quintnet::exec
