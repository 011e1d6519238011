#pragma once
// The collectives of the simulated step, as SimGrid messages between rank actors:
// ring all-reduces (one transfer per member and phase: see ring_phase), NCCL's
// two-level all-reduce across nodes, and the latency draws of a calibrated CPU machine.
#include <map>
#include <random>
#include <set>
#include <simgrid/s4u.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/platform.h"

namespace quintnet::sim {

// The ranks of a group and this rank's index in it.  Its collectives pass through one
// mailbox per member (named by the group and the member, made on first use), in order:
// every member runs the group's collectives in the same order and receives only from its
// ring predecessor, so its n-th receive is its predecessor's n-th send.  `calls` counts
// them for the latency draws a collective's members share.
struct RingGroup {
  std::string name;
  std::vector<int> ranks;
  int index = 0;
  int calls = 0;
  simgrid::s4u::Mailbox* inbox = nullptr;   // this member's, once its receiver is known
  simgrid::s4u::Mailbox* outbox = nullptr;  // its ring successor's
};

// A mailbox whose messages start moving as soon as they are posted: `receiver` (an
// actor of `actors`) is its permanent receiver.
simgrid::s4u::Mailbox* eager_mailbox(const std::string& name, int receiver,
                                     const std::vector<simgrid::s4u::ActorPtr>& actors);

// Message latencies drawn from a calibration's measured ones (equally likely), with a
// fixed seed: on a real machine the hops' latencies spread (0.1 to 30 ms on 2 busy
// cores), which keeps ranks from running in lockstep, so how their ops overlap on
// shared cores — and the step — depends on the spread, not only on the mean.
// A collective's members share its draw (it ends for all of them together once the
// last one arrived, as the measured ones do).
class LatencyDraws {
 public:
  explicit LatencyDraws(const std::vector<double>& measured) : measured_(measured), rng_(20261203) {}
  double sum(int hops);
  // The draw of collective `tag` (`members` ranks ask for it, the first one draws).
  double shared(const std::string& tag, int members, int hops);

 private:
  std::vector<double> measured_;
  std::mt19937_64 rng_;
  std::map<std::string, std::pair<double, int>> shared_;  // tag -> (draw, members yet to ask)
};

// A ring all-reduce of `bytes` over g (2(n-1) steps of bytes/n to the ring successor),
// `count` of them back to back; `latency`: one ring hop's (ignored with `draws`).
void ring_allreduce(RingGroup& g, double bytes, const std::vector<simgrid::s4u::ActorPtr>& actors, double latency,
                    int count = 1, LatencyDraws* draws = nullptr);

// A ring reduce-scatter (or all-gather) of `bytes` over g: n-1 steps of bytes/n to the
// ring successor, (n-1)(a + S/(nB)) — half an all-reduce.
void ring_reduce_scatter(RingGroup& g, double bytes, const std::vector<simgrid::s4u::ActorPtr>& actors, double latency);
inline void ring_all_gather(RingGroup& g, double bytes, const std::vector<simgrid::s4u::ActorPtr>& actors,
                            double latency) {
  ring_reduce_scatter(g, bytes, actors, latency);  // the same steps, the other way round in the data
}

// The reduced model's ring collective over `members` identical members (sim/simulation.h):
// `steps` ring steps' bytes (2(n-1) for an all-reduce, n-1 for a reduce-scatter or an
// all-gather, each bytes/n) sent from the member's host to its ring peer host — the same
// links and bytes as its outgoing and incoming hops — plus the further hop latencies.
void mirrored_ring(double bytes, int members, int steps, simgrid::s4u::Host* member, simgrid::s4u::Host* ring_peer,
                   double latency);

// Latency of a ring hop: inside a node, or (when the group spans nodes) the slowest hop.
double hop_latency(const RingGroup& g, const Platform& p);

// A DP all-reduce the way the platform does them: one ring or two levels.
void dp_allreduce(RingGroup& g, double bytes, const std::vector<simgrid::s4u::ActorPtr>& actors, const Platform& p,
                  LatencyDraws* draws = nullptr);

// The routes a DP group's member needs: to its ring successor, and for the two-level
// all-reduce to its successors inside the node and across nodes.
void add_dp_routes(const RingGroup& g, const Platform& p, std::set<std::pair<int, int>>& pairs);

}  // namespace quintnet::sim
