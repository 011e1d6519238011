#pragma once
// Figures read back from a trace (measured or simulated): the bubble, and the mean
// op costs that core::simulate_schedule needs to predict it.
#include "core/schedule_validator.h"
#include "core/trace.h"

namespace quintnet::core {

// Per step: 1 - compute time / (ranks × span), the span running from the step's
// first compute start to its last compute end over all ranks (optimizer excluded) —
// ScheduleStats::bubble_fraction's definition, so the two compare directly —
// averaged over the steps in the trace.
double measured_bubble_fraction(const Trace& trace);

// Median durations (µs) of the compute kinds, scaled to one rank's whole share of the
// model (× chunks per rank), and the median p2p transfer time (receive end − matching
// send start over the flows, never below 0).  Medians, not means: on an oversubscribed
// CPU a few ops are stretched by time-slicing.  Kinds absent from the trace cost 0.
OpCosts median_op_costs(const Trace& trace, int chunks_per_rank = 1);

}  // namespace quintnet::core
