#pragma once
// A traced pipeline run's bubble: what the trace measured beside what core's schedule
// statistics predict from the op costs the same trace measured.  The trainer prints it
// after a traced run; `quintnet bubble TRACE` prints it for any executor trace.
#include "core/schedule.h"
#include "core/trace.h"

namespace quintnet::core {

struct BubbleReport {
  double measured = 0;   // measured_bubble_fraction
  double predicted = 0;  // simulate_schedule with median_op_costs
  double replayed = 0;   // replayed_bubble_fraction: each op's own measured time
};

BubbleReport bubble_report(const Trace& trace, const Schedule& schedule);

// The schedule the trace's plan ran (otherData.plan: a training plan, or the schedule
// keys of a `quintnet schedule` or `simulate --uniform` trace); throws UserError naming `source` when
// the trace carries no plan or one that does not fit its ranks.
Schedule trace_schedule(const Trace& trace, const std::string& source);

}  // namespace quintnet::core
