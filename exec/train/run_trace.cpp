#include "exec/train/run_trace.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/bubble_report.h"

namespace quintnet::exec {

RunTrace::RunTrace(const TrainOptions& options, Communicator& comm, const torch::Device& device, long total_steps,
                   nlohmann::json plan)
    : options_(options), comm_(comm), total_steps_(total_steps), plan_(std::move(plan)) {
  if (options.trace_path.empty()) return;
  tracer_ = std::make_unique<TraceRecorder>(comm.mesh(), comm.rank());
  comm.set_tracer(tracer_.get());
  comm.barrier(comm.world());
  tracer_->set_origin(TraceRecorder::Clock::now());
  tracer_->share_origin(comm, device);
  first_ = total_steps > 1 ? 1 : 0;
}

RunTrace::~RunTrace() {
  if (tracer_ && comm_.tracer() == tracer_.get()) comm_.set_tracer(nullptr);
}

void RunTrace::begin_step(long step) {
  if (!tracer_) return;
  // Nothing of the write itself is recorded, and it happens before the step's first op,
  // so it is outside every traced step's span.
  tracer_->set_step(static_cast<int>(step), false);
  if (step > first_ && step < first_ + options_.trace_steps)
    tracer_->merge_and_write(comm_, options_.trace_path, plan_, {{"host", "cpu"}, {"partial", true}});
  tracer_->set_step(static_cast<int>(step), step >= first_ && step < first_ + options_.trace_steps);
}

void RunTrace::optimizer(TraceRecorder::Clock::time_point start) {
  if (tracer_) tracer_->event(core::Lane::Compute, "optimizer", "OPTIMIZER_STEP", start, TraceRecorder::Clock::now());
}

void RunTrace::finish(const core::Plan& p, ParallelModel& model, const core::Schedule& schedule,
                      const std::function<std::pair<torch::Tensor, torch::Tensor>()>& probe_batch, const ProbeShape& shape,
              bool is_logger) {
  if (!tracer_) return;
  tracer_->set_step(0, false);
  // The op-shape probe for the simulator's calibration; after training, so it cannot
  // change it (no optimizer step, gradients discarded).
  nlohmann::json op_probe = nullptr;
  if (p.micro_batch_size() >= 2) {
    const auto [inputs, labels] = probe_batch();
    op_probe = probe_op_shapes(model, comm_, inputs, labels, shape);
  }
  comm_.set_tracer(nullptr);
  nlohmann::json platform = {{"host", "cpu"},
                             {"world_size", comm_.world_size()},
                             {"threads_per_rank", torch::get_num_threads()},
                             {"device", core::name_of(p.device_type)},
                             {"cores", static_cast<int>(std::thread::hardware_concurrency())}};
  if (!op_probe.is_null()) platform["op_probe"] = op_probe;
  const core::Trace t = tracer_->merge_and_write(comm_, options_.trace_path, p.to_json(), platform);
  if (!is_logger) return;
  // What core's schedule statistics predict from the op costs this run measured.
  const core::BubbleReport bubble = core::bubble_report(t, schedule);
  std::printf("trace: %s (%zu events, steps %ld-%ld); bubble fraction measured %.4f, predicted from median op "
              "costs %.4f, replayed with each op's measured time %.4f\n",
              options_.trace_path.c_str(), t.events.size(), first_ + 1,
              std::min(total_steps_, first_ + options_.trace_steps), bubble.measured, bubble.predicted,
              bubble.replayed);
}

}  // namespace quintnet::exec
