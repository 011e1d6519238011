#pragma once
// Figures read back from a trace (measured or simulated): the bubble, and the mean
// op costs that core::simulate_schedule needs to predict it.
#include <map>
#include <vector>

#include "core/schedule_validator.h"
#include "core/trace.h"

namespace quintnet::core {

// Per step: 1 - compute time / (ranks × span), the span running from the step's
// first compute start to its last compute end over all ranks (optimizer excluded) —
// ScheduleStats::bubble_fraction's definition, so the two compare directly —
// averaged over the steps in the trace.
// `rank_weights` (by rank; empty: 1 each): how many ranks each traced rank stands for —
// a reduced simulation's replicas (sim/replica_classes.h).
double measured_bubble_fraction(const Trace& trace, const std::vector<double>& rank_weights = {});

// Median durations (µs) of the compute kinds, scaled to one rank's whole share of the
// model (× chunks per rank); medians, not means: on an oversubscribed CPU a few ops are
// stretched by time-slicing.  Kinds absent from the trace cost 0.  The message latency:
// for an executor trace (source "exec": Gloo and NCCL move a message once both sides
// posted it) or a simulated one of a rendezvous platform (otherData.platform.p2p) the
// mean over all messages of receive end − the later of send and receive, with
// p2p_rendezvous set; for a simulated trace of eager messages the median
// of receive end − send over the messages whose receiver was already waiting (over all
// when none was).
OpCosts median_op_costs(const Trace& trace, int chunks_per_rank = 1);

// The median (upper middle for an even count) of measured durations; 0 for none.
// Medians, not means: on an oversubscribed CPU a few ops are stretched by time-slicing.
double median(std::vector<double> values);

// Each step's span, by step number: first event start to last event end over all ranks
// and lanes (the optimizer step included).
std::map<int, double> step_spans_us(const Trace& trace);

// Mean over the trace's steps of their spans.
double mean_step_time_us(const Trace& trace);

// The step of median span (the upper middle for an even count; the lower step number
// among equal spans): a typical step, neither a warm-up nor a stalled one, for
// comparing one step of a trace with one of another.  Throws TraceError for no events.
int median_step(const Trace& trace);

// The span of median_step: the measured step time `quintnet simulate --measured` and the
// viewer's compare set against a simulation.  Throws TraceError for no events.
double median_step_time_us(const Trace& trace);

// The bubble fraction core's schedule simulation predicts when every compute action
// costs exactly what it measured in the trace (per step, from the dp 0 / tp 0 member
// of each stage) and messages the median latency above; averaged over the steps.
// Compared with measured_bubble_fraction it isolates what the schedule model misses
// (message latencies, the receiver's reaction time) from op-time variation, which on
// an oversubscribed CPU is large: ranks that compute together slow each other down.
double replayed_bubble_fraction(const Trace& trace, const Schedule& schedule);

}  // namespace quintnet::core
