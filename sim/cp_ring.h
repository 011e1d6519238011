#pragma once
// Ring attention in the simulated step: one op's context-parallel ring on one cp rank.
//
// The forward passes each key/value block around the cp group: cp steps, each computing
// the attention of this rank's queries against the block it holds (1/cp of the layer's
// attention: causal load balancing gives every step the same work) while the block
// moves on to the next rank — cp − 1 hops.  The backward is pipelined as in the published
// implementations (ring-flash-attention, Transformer Engine): in each of its cp steps the
// key/value block moves on (not in the last) and the previous step's key/value gradients
// follow it (not in the first); after the last step the gradients take one more hop home,
// with nothing left to hide it behind.  Recomputation runs the forward ring again inside
// the backward.
//
// An op runs the ring of all its layers at once: step k of every layer is one step
// carrying all their blocks beside all their step-k attention (SimGrid sees one message
// per ring step and op instead of one per layer), which arrives the other layers' hop
// latencies after its transfer ends: L layers' hops of latency a and b bytes each, beside
// attention t each, take L max(0, a + b/B − t) beyond it either way.  The closed form
// below keeps the layers apart; it is what the planner estimates with and what the
// summary compares with.
#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "core/mesh.h"
#include "sim/step_costs.h"

namespace quintnet::sim {

// One ring step: the attention it computes and the bytes it passes on meanwhile.
struct RingStep {
  double attention_s = 0;
  double bytes = 0;
  double extra_latency = 0;  // the merged layers' further hop latencies
};

// The steps of one ring (its attention in all, the key/value block's bytes, the further
// latency of each hop).
std::vector<RingStep> forward_ring(int cp, double attention_s, double block_bytes, double extra_latency = 0);
std::vector<RingStep> backward_ring(int cp, double attention_s, double block_bytes, double extra_latency = 0);

// A cp ring hop's route: inside a node while tp × cp fits in one, else between nodes
// (the ring is as slow as its slowest hop).
struct CpHop {
  double latency = 0, bandwidth = 0;
};
CpHop cp_hop(int cp, int tp, const Platform& p);

// The next rank of `rank`'s cp ring in a simulated mesh whose dp axis holds the dp × cp
// replicas, cp innermost (the executor's tp-cp-dp-pp order).
int cp_next_rank(const core::Mesh& mesh, int rank, int cp);

// The seconds a ring's hops take beyond the attention they overlap, each hop on a route
// of `latency` and `bandwidth` with nothing else on it.
double ring_exposed_seconds(const std::vector<RingStep>& steps, double latency, double bandwidth);

// The closed form of one pipeline rank's rings per microbatch (CpRingCosts' estimates),
// each of its layers a ring of its own: hops inside a node while tp × cp fits in one,
// else between nodes.
void estimate_cp_ring(CpRingCosts& c, int cp, int tp, const Platform& p);

// Where a simulated rank's ring hops go: to the next cp rank's actor through its mailbox
// (a full simulation), or, in the reduced model (sim/simulation.h), to the rank's cp
// peer host, a transfer that loads the rank's links as its outgoing and incoming hops do.
struct CpRingRoute {
  simgrid::s4u::Mailbox* inbox = nullptr;   // full: what the previous cp rank sends
  simgrid::s4u::Mailbox* outbox = nullptr;  // full: the next cp rank's inbox
  simgrid::s4u::Host* host = nullptr;       // reduced: the rank's host ...
  simgrid::s4u::Host* peer = nullptr;       // ... and its cp peer host
};

// What one ring took: its first post to its last arrival, of which `exposed` waiting
// for hops after the step's attention was done, and the bytes sent.
struct RingRun {
  double start = 0, end = 0, exposed = 0, bytes = 0;
  int hops = 0;
};

// Runs the steps: each posts its hop, computes its attention on `compute` (at
// `flops_per_s` × seconds), then waits for its hop to arrive (and its extra latency to
// pass) and its own to leave.
RingRun run_ring(const std::vector<RingStep>& steps, const CpRingRoute& route, simgrid::s4u::Host* compute,
                 double flops_per_s);

}  // namespace quintnet::sim
