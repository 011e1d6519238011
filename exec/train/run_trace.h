#pragma once
// RunTrace — the traced steps of a run (--trace FILE): every rank's clock starts after
// one barrier, steps [first, first + n) are recorded (the first step warms up and is
// left out), and at the end the op-shape probe for the simulator's calibration runs,
// rank 0 writes the merged trace and prints the measured bubble beside the schedule
// model's prediction.  Between traced steps the trace so far is written too, so a viewer
// following the file (quintnet view, File > Follow) shows the steps as they arrive.
// Without --trace every call does nothing.
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <utility>

#include "core/plan.h"
#include "exec/comm/communicator.h"
#include "exec/pp/pipeline_runner.h"
#include "exec/trace/trace_recorder.h"
#include "exec/train/op_probe.h"
#include "exec/train/trainer.h"

namespace quintnet::exec {

class RunTrace {
 public:
  // Collective when tracing (a barrier): every rank constructs it at the same point.
  RunTrace(const TrainOptions& options, Communicator& comm, const torch::Device& device, long total_steps,
           nlohmann::json plan);
  ~RunTrace();

  // Collective when tracing: records the step when it is one of the traced ones, and
  // writes the steps traced so far first.
  void begin_step(long step);
  void optimizer(TraceRecorder::Clock::time_point start);  // the optimizer step, from start to now

  // Collective: probes op shapes on a training microbatch, merges and writes the trace.
  void finish(const core::Plan& plan, ParallelModel& model, const core::Schedule& schedule,
              const std::function<std::pair<torch::Tensor, torch::Tensor>()>& probe_batch, const ProbeShape& shape,
              bool is_logger);
  bool on() const { return tracer_ != nullptr; }

 private:
  const TrainOptions& options_;
  Communicator& comm_;
  std::unique_ptr<TraceRecorder> tracer_;
  long first_ = 0, total_steps_ = 0;
  nlohmann::json plan_;
};

}  // namespace quintnet::exec
