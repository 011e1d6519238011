#include "sim/memory_estimate.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "sim/plan_simulation.h"

namespace quintnet::sim {
namespace {

// Fit to the peaks of docs/SIMULATOR.md's curve (GPT-3 175B, a straggler, 1,024 to 16,384
// ranks simulated in full, and the reduced 131,072; jemalloc): 40 MB for the process, 99 kB
// per rank of actors, mailboxes and events.
constexpr double kProcessBytes = 40e6, kPerRankBytes = 40e3, kPerEventBytes = 250, kPerTracedEventBytes = 2800;
// SimGrid's full zone keeps a route slot for every pair of hosts.
constexpr double kPerHostPairBytes = 8;

}  // namespace

SimulationSize estimate_simulation(const StepCosts& costs, bool writes_trace, int simulated_replicas) {
  SimulationSize s;
  const core::Schedule& sched = costs.schedule;
  s.ranks = static_cast<long>(sched.pp) * costs.tp * costs.dp;
  double per_replica_member = 0;  // events of one (tp, dp) member summed over the pipeline ranks
  for (int r = 0; r < sched.pp; ++r) {
    const auto& actions = sched.ranks[static_cast<size_t>(r)];
    double events = 0;
    for (const core::Action& a : actions) {
      if (a.kind == core::ActionKind::GradSync && costs.dp <= 1) continue;  // nothing to sync: not recorded
      const bool ring = costs.cp > 1 && core::is_compute(a.kind) && a.kind != core::ActionKind::BackwardWeight;
      events += 1 + (costs.tp > 1 && core::is_compute(a.kind) ? 1 : 0) + (ring ? 1 : 0) +
                (costs.pp_scatter_gather && costs.tp > 1 && core::is_recv(a.kind) ? 1 : 0);  // its all-gather
    }
    // The DP buckets of each chunk, as sim/rank_actor.cpp cuts them.
    const double chunks = sched.chunks;
    if (costs.dp > 1 && r < static_cast<int>(costs.dp_grad_bytes.size()))
      events += chunks * std::max(1.0, std::ceil(costs.dp_grad_bytes[static_cast<size_t>(r)] / chunks / costs.bucket_bytes));
    per_replica_member += events;
  }
  const bool reduced = simulated_replicas > 0;
  const int replicas = reduced ? simulated_replicas : costs.dp;
  s.ranks = s.ranks / costs.dp * replicas;
  s.events = per_replica_member * costs.tp * replicas;
  // A reduced rank has its ring peer host (and its cp peer host).
  const double hosts = static_cast<double>(s.ranks) * (reduced ? (costs.cp > 1 ? 3 : 2) : 1);
  s.bytes = kProcessBytes + static_cast<double>(s.ranks) * kPerRankBytes + hosts * hosts * kPerHostPairBytes +
            s.events * (kPerEventBytes + (writes_trace ? kPerTracedEventBytes : 0));
  return s;
}

double available_memory_bytes() {
  if (const char* cap = std::getenv("QN_SIM_MEMORY_BYTES")) {
    char* end = nullptr;
    const double v = std::strtod(cap, &end);
    if (end == cap || *end != '\0' || !(v > 0))
      throw core::UserError(std::string("QN_SIM_MEMORY_BYTES='") + cap + "': expected a number of bytes > 0");
    return v;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    std::string key;
    double kb = 0;
    if (in >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return 1e300;  // not Linux: no check
}

void check_simulation_fits(const StepCosts& costs, bool writes_trace, int simulated_replicas) {
  const SimulationSize s = estimate_simulation(costs, writes_trace, simulated_replicas);
  const double available = available_memory_bytes();
  if (s.bytes <= available) return;
  char text[400];
  std::snprintf(text, sizeof(text),
                "the simulation needs about %s (%ld ranks simulated, %.3g million ops%s) and this machine has %s available; "
                "simulate fewer ranks%s",
                gib_text(s.bytes).c_str(), s.ranks, s.events / 1e6, writes_trace ? ", the trace written" : "",
                gib_text(available).c_str(), writes_trace ? " or leave out --trace" : "");
  throw core::UserError(text);
}

}  // namespace quintnet::sim
