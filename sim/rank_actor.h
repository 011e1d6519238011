#pragma once
// The actors of one simulated training step (sim/simulation.cpp starts them):
//   rank_actor  one per rank: walks its pipeline rank's schedule with
//               core::run_schedule, as the executor does, and turns each action into
//               SimGrid activities (see sim/simulation.h for what each becomes);
//   dp_stream   one per rank when dp > 1: all-reduces the gradient buckets the rank's
//               backward passes release, in order, while the rank computes on.
#include <map>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "core/mesh.h"
#include "core/trace.h"
#include "sim/collectives.h"
#include "sim/platform.h"
#include "sim/step_costs.h"
#include "sim/simgrid_compat.h"
#include "sim/simulation.h"

namespace quintnet::sim {

// The simulated step's trace, as the actors record it (seconds in, microseconds out).
struct Recorder {
  core::Trace trace;
  // An arrow from a message's send to the end of its receive, as executor traces have.
  void flow(int from_rank, double sent, int to_rank, double received);
  void add(int rank, core::Lane lane, const std::string& kind, const std::string& name, double t0, double t1,
           int mb = -1, int chunk = -1, double bytes = 0, int peer = -1);
};

// What the actors of one step share.
struct SimStep {
  const StepCosts& costs;
  const Platform& platform;
  const core::Mesh& mesh;
  const PlatformHosts& hosts;
  LatencyDraws* draws;  // null: every hop takes its route's latency
  SimResult& result;
  Recorder recorder;
  std::vector<simgrid::s4u::ActorPtr> ranks;    // the rank actors (receivers of eager mailboxes)
  std::vector<simgrid::s4u::ActorPtr> streams;  // the DP streams
  std::map<std::string, double> posted;         // message mailbox -> when its send was posted
  // The reduced model (sim/simulation.h): one replica simulated, a DP ring hop as a
  // transfer to itself taking this latency.
  bool reduced = false;
  double dp_ring_latency = 0;
};

void rank_actor(SimStep& step, int rank);
void dp_stream(SimStep& step, int rank);

}  // namespace quintnet::sim
