#pragma once
// The actors of one simulated training step (sim/simulation.cpp starts them):
//   rank_actor  one per rank: walks its pipeline rank's schedule with
//               core::run_schedule, as the executor does, and turns each action into
//               SimGrid activities (see sim/simulation.h for what each becomes);
//   dp_stream   one per rank when dp > 1: all-reduces the gradient buckets the rank's
//               backward passes release, in order, while the rank computes on.
#include <deque>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "core/mesh.h"
#include "core/trace.h"
#include "sim/collectives.h"
#include "sim/platform.h"
#include "sim/replica_classes.h"
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

// A rank's gradient buckets on their way to its DP stream and back: their sizes queued
// by the rank, counted by semaphores.  No SimGrid activity per bucket: SimGrid 3.32 scans
// an actor's pending activities linearly, and with a message per bucket (200 a stage for
// GPT-3 175B) those scans were 40% of the full simulation's time.
struct BucketQueue {
  std::deque<double> sizes;  // bytes of each bucket released; < 0: the step is over
  simgrid::s4u::SemaphorePtr released = simgrid::s4u::Semaphore::create(0);
  simgrid::s4u::SemaphorePtr done = simgrid::s4u::Semaphore::create(0);  // one per bucket all-reduced
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
  std::vector<BucketQueue> buckets{};           // per rank
  // The reduced model (sim/simulation.h): some replicas simulated, a DP ring hop as a
  // transfer to itself taking this latency; each simulated rank's rank in the full step
  // (its what-ifs: speed, jitter streams).
  bool reduced = false;
  double dp_ring_latency = 0;
  std::vector<int> full_rank{};
  // Where a DP group's simulated members meet for each bucket and each parameter
  // all-gather (sim/replica_classes.h; index pp x tp + tp); none on calibrated CPU
  // machines, whose collectives keep their measured latencies.
  std::vector<std::unique_ptr<ReplicaMeeting>> bucket_meetings{}, gather_meetings{};
  int full_rank_of(int r) const { return reduced ? full_rank[static_cast<size_t>(r)] : r; }
  ReplicaMeeting* meeting(std::vector<std::unique_ptr<ReplicaMeeting>>& where, int r) const {
    if (where.empty()) return nullptr;
    return where[static_cast<size_t>(mesh.coord(r, core::Axis::Pp) * costs.tp + mesh.coord(r, core::Axis::Tp))].get();
  }
};

void rank_actor(SimStep& step, int rank);
void dp_stream(SimStep& step, int rank);

}  // namespace quintnet::sim
