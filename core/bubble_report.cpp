#include "core/bubble_report.h"

#include "core/error.h"
#include "core/plan.h"
#include "core/schedule_generators.h"
#include "core/trace_analysis.h"

namespace quintnet::core {

BubbleReport bubble_report(const Trace& trace, const Schedule& schedule) {
  BubbleReport r;
  r.measured = measured_bubble_fraction(trace);
  r.predicted = simulate_schedule(schedule, median_op_costs(trace, schedule.chunks)).bubble_fraction;
  r.replayed = replayed_bubble_fraction(trace, schedule);
  return r;
}

Schedule trace_schedule(const Trace& trace, const std::string& source) {
  if (!trace.plan.is_object() || trace.plan.empty())
    throw UserError(source + ": the trace carries no plan (otherData.plan)");
  Schedule schedule;
  if (trace.plan.contains("microbatches")) {  // quintnet schedule / simulate --uniform: the schedule's keys
    const auto& j = trace.plan;
    schedule = make_schedule(parse_schedule_kind(j.value("schedule", "")), j.value("pp", 0), j.value("microbatches", 0),
                             j.value("chunks", 1));
  } else {
    const Plan plan = parse_plan_json(trace.plan, source).plan;
    schedule = make_schedule(plan.schedule_kind(), plan.pp(), plan.microbatches(), plan.virtual_stages);
  }
  if (trace.num_ranks() % schedule.pp != 0)
    throw UserError(source + ": the plan's " + std::to_string(schedule.pp) + " pipeline ranks do not divide the " +
                    std::to_string(trace.num_ranks()) + " ranks of the trace");
  return schedule;
}

}  // namespace quintnet::core
