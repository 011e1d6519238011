#pragma once
// What a simulation will take of this machine's memory, checked before it starts: a
// simulation that would not fit is refused with its estimate and the memory there is,
// in one line, instead of being killed by the kernel with no message.
//
// The estimate, from peak RSS measured on this machine (docs/SIMULATOR.md, "Memory"):
// 30 MB for the process, 60 KB per rank (its two actors and their bookkeeping), 8 B per
// pair of hosts (SimGrid's full zone keeps a route slot for each: 2 GB at 16,384 ranks),
// 400 B per recorded op or collective, and 2.8 KB more per op when the trace is written
// (the JSON document).  The op count is the schedule's actions per rank, one TP
// all-reduce record per compute op when tp > 1, and the rank's DP buckets.
#include <string>

#include "sim/step_costs.h"

namespace quintnet::sim {

struct SimulationSize {
  long ranks = 0;
  double events = 0;  // ops, messages and collectives the trace will hold
  double bytes = 0;   // peak memory, estimated
};

// `simulated_replicas`: the dp replicas a reduced step simulates (sim/simulation.h; 0: a
// full simulation) — ranks and ops in proportion; a reduced step's ranks have ring peer
// hosts too.
SimulationSize estimate_simulation(const StepCosts& costs, bool writes_trace, int simulated_replicas = 0);

// Memory this process can still take: $QN_SIM_MEMORY_BYTES when set (tests, or a
// cap you choose), else MemAvailable from /proc/meminfo.
double available_memory_bytes();

// Throws core::UserError ("the simulation needs about 31.2 GiB (131,072 ranks, 17.0
// million ops) and this machine has 22.8 GiB available; ...") when it would not fit.
void check_simulation_fits(const StepCosts& costs, bool writes_trace, int simulated_replicas = 0);

}  // namespace quintnet::sim
