#pragma once
// Turns the symbolic timeline of a schedule (core::simulate_schedule) into a
// core::Trace, so a schedule can be opened in Perfetto or the QuintNet viewer
// before anything runs.  One cost unit becomes `us_per_unit` microseconds.
#include "core/schedule.h"
#include "core/schedule_validator.h"
#include "core/trace.h"

namespace quintnet::core {

Trace schedule_to_trace(const Schedule& schedule, const ScheduleStats& stats, const OpCosts& costs,
                        double us_per_unit = 1000.0);

}  // namespace quintnet::core
