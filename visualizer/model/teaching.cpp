#include "visualizer/model/teaching.h"

#include "core/schedule_generators.h"
#include "core/schedule_trace.h"
#include "core/schedule_validator.h"

namespace quintnet::viz {

core::Trace teaching_trace(const TeachingSchedule& t) {
  const core::Schedule s = core::make_schedule(core::parse_schedule_kind(t.schedule), t.pp, t.microbatches, t.chunks);
  core::OpCosts costs;
  costs.forward = t.forward;
  costs.backward_input = t.backward_input;
  costs.backward_weight = t.backward_weight;
  return core::schedule_to_trace(s, core::simulate_schedule(s, costs), costs);
}

std::vector<std::string> phase_legend(const std::string& name) {
  const std::string schedule = core::schedule_kind_name(core::parse_schedule_kind(name));
  if (schedule == "afab")
    return {"all forwards, then all backwards: every rank holds all m microbatches' activations",
            "bubbles: p-1 slots at the start (waiting for activations) and at the end (for gradients)"};
  std::vector<std::string> out = {
      "warm-up: rank r runs p-1-r forwards before its first backward (stage p-1 starts backwards at once)",
      "steady 1F1B: one forward, one backward - at most p-r microbatches in flight on rank r",
      "cool-down: the remaining backwards drain; the bubble is the idle time before warm-up ends and after"};
  if (schedule == "interleaved")
    out.push_back("interleaved: v chunks per rank shrink each bubble slot v times, for v times more messages");
  if (schedule == "zb-h1")
    out.push_back("zero-bubble H1: backward split into input-grad (BI, on the critical path) and weight-grad (BW), "
                  "BWs fill the cool-down bubbles");
  return out;
}

}  // namespace quintnet::viz
