#pragma once
// The SimGrid model of a training step: one S4U actor per rank interprets its
// pipeline rank's core::Schedule action list — the lists the executor runs.
//   F / B / BI / BW   an execution of the op's time on the rank's GPU (under context
//                     parallelism F, B and BI first run their ring attention: hops to
//                     the next cp rank beside the attention, sim/cp_ring.h), then
//                     (tp > 1) its tensor-parallel all-reduces as ring all-reduces over
//                     the tp group's routes
//   SEND_*            an asynchronous message to the peer stage's rank (eager: the
//                     transfer starts when posted), completed before the step ends
//   RECV_*            waits for that message
//   GRAD_SYNC         ring all-reduce of the chunk's gradients over the dp group
//   OPTIMIZER_STEP    the step end's collectives (a tied head's gradient over the
//                     pipeline among them), then an execution of the optimizer's time
// Ring all-reduce of S bytes over n ranks: 2(n-1) steps, each sending S/n bytes to
// the next rank while receiving from the previous; with link bandwidth B and route
// latency a it takes 2(n-1)(a + S/(n B)).
#include <string>
#include <vector>

#include "core/trace.h"
#include "sim/platform.h"
#include "sim/replica_classes.h"
#include "sim/step_costs.h"

namespace quintnet::sim {

struct SimResult {
  // The data-parallel replicas simulated and what each stands for: every replica as
  // itself in a full simulation; in a reduced one the what-ifs' replicas and stand-ins
  // for the others (busy_s and exposed_comm_s are then copied to every replica's ranks;
  // the trace holds the simulated replicas').
  ReplicaClasses classes;
  bool reduced = false;  // sim/simulation.h's reduced model (DP rings as transfers to ring peers)
  long long events = 0;  // of the whole step: each simulated replica's times what it stands for
  double step_time_s = 0;
  double bubble_fraction = 0;           // core::measured_bubble_fraction of the trace
  std::vector<double> busy_s;           // compute time per rank
  std::vector<double> exposed_comm_s;   // time per rank blocked in receives and collectives
  std::vector<double> cp_ring_exposed_s;  // per simulated rank: of that, waiting for ring attention's hops
  core::Trace trace;                    // source "sim"
};

// The reduced model.  The dp replicas of a plan run identical ops at identical times
// when nothing but the what-ifs tells them apart: no drawn latencies, no shared CPU
// cores, no SimGrid XML platform, one switch (no leaf or rail tiers, whose uplinks the
// replicas share unevenly), ring DP all-reduces, and a layout where every replica's ring
// hops look alike — all ranks on one node, or each replica on whole nodes (tp × pp a
// multiple of the GPUs per node).  Then one replica is simulated for all, or (what-ifs)
// the replicas sim/replica_classes.h picks; each DP ring step of a member becomes one
// transfer to itself over its own links — out through its GPU link and NIC, through
// the core, back in through its NIC and GPU link — which loads each of those links
// exactly as the member's outgoing and incoming hops do in the full step, and the core
// (shared by all nodes) is built for the full step's nodes and divided by the replicas
// per simulated one, so each flow gets the share it gets among all replicas' flows.
// Context parallelism (the dp axis then holds dp × cp replicas, cp innermost): a cp ring
// hop becomes a transfer to the rank's cp peer host in the same way, so the cp ranks of
// a replica need not be simulated — when their hops all stay inside nodes or all cross
// them, and no what-if touches a rank (a slowed cp rank holds up its ring partners).
// Returns "" when the plan reduces, else why not.
std::string why_not_reducible(const StepCosts& costs, const Platform& platform);

// The replicas a step simulates: all when `exact` or the plan does not reduce.
ReplicaClasses simulated_replicas(const StepCosts& costs, const Platform& platform, bool exact);

// Simulates one training step — reduced when it can be (see above) unless `exact`.
// Only once per process: SimGrid has one engine.  Throws core::UserError before
// starting when it would not fit in memory (sim/memory_estimate.h).
SimResult simulate_step(const StepCosts& costs, const Platform& platform, bool exact = false);

// One ring all-reduce (or, with `reduce_scatter`, one reduce-scatter: an all-gather
// takes the same) of `bytes` over `ranks` consecutive GPUs of the platform (the
// collective alone, for checking the formula).  Also once per process.
double simulate_ring_allreduce(double bytes, int ranks, const Platform& platform, bool reduce_scatter = false);

}  // namespace quintnet::sim
