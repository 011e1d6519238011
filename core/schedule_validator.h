#pragma once
// Symbolic execution of a core::Schedule: proves it correct and times it.
//
// Every rank runs its list in order with its own clock.  Compute actions take their
// cost; a SEND is posted at the sender's clock (asynchronous, free for the sender);
// a RECV blocks until the matching SEND was posted and `p2p` time has passed since.
// The validator rejects, with a message naming rank, action and microbatch:
//   - a deadlock (every unfinished rank blocked in a RECV);
//   - a RECV whose SEND does not exist, a SEND never received, a wrong peer;
//   - a forward without its input activation, a backward before its forward or
//     without its output gradient, a weight-gradient before its input-gradient;
//   - a microbatch that misses a stage, runs one twice, or a GRAD_SYNC /
//     OPTIMIZER_STEP before all gradients of its chunk(s) exist.
#include <functional>
#include <vector>

#include "core/schedule.h"

namespace quintnet::core {

// Costs of one rank's whole share of the model; with v chunks each chunk's op costs
// cost / v.  B (unsplit) costs backward_input + backward_weight.
struct OpCosts {
  double forward = 1.0;          // tf
  double backward_input = 1.0;   // tb: input-gradient part of the backward
  double backward_weight = 1.0;  // tw: weight-gradient part of the backward
  double p2p = 0.0;              // latency of one activation / gradient message
  // When a message's latency starts: false (eager) from the send; true (rendezvous)
  // from the later of send and receive — Gloo over TCP moves the data only after the
  // receiver's request reached the sender, so a late receiver still waits p2p.
  bool p2p_rendezvous = false;
  double grad_sync = 0.0;        // exposed DP all-reduce time per chunk
  double optimizer = 0.0;
  // Optional: the cost of one particular action of one rank (e.g. its measured time in
  // a trace); a negative result falls back to the kind's cost above.
  std::function<double(int rank, const Action& action)> per_action;

  double cost(ActionKind kind, int chunks) const;
};

struct TimedAction {
  Action action;
  double start = 0.0;
  double end = 0.0;
};

struct ScheduleStats {
  double step_time = 0.0;        // last action end over all ranks
  double bubble_fraction = 0.0;  // 1 - compute time / (pp * step_time)
  std::vector<double> bubble_per_rank;  // 1 - compute time of the rank / step_time
  std::vector<double> busy_per_rank;    // compute time of the rank
  // Microbatch-chunks whose forward ran and whose backward (B, or BI when split)
  // has not: each holds a full set of stage activations.
  std::vector<int> peak_activations;
  // Microbatch-chunks between BI and BW: hold only what the weight gradient needs.
  std::vector<int> peak_pending_wgrad;
  std::vector<std::vector<TimedAction>> timeline;  // per rank, in list order
};

// Throws ScheduleError when the schedule is not correct (see above).
ScheduleStats simulate_schedule(const Schedule& schedule, const OpCosts& costs = {});
inline void validate_schedule(const Schedule& schedule) { simulate_schedule(schedule); }

}  // namespace quintnet::core
