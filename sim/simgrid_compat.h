#pragma once
// Every SimGrid call whose name or signature changes between 3.32 and 4.x (zone and
// host creation, routes, actor creation), in one place.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/platform.h"

namespace simgrid::s4u {
class Host;
}

namespace quintnet::sim {

// Creates the engine's platform: one host per rank (GPU) at the platform's achievable
// speed, each with a split-duplex link into its node (bandwidth intra_bandwidth,
// latency intra_latency / 2 so a GPU-to-GPU route has intra_latency), one per NIC
// for leaving the node (at its what-if bandwidth; a failed NIC's GPUs use the node's
// next working one), and the switches of the platform's topology: one shared core link
// (bisection / oversubscription), or leaf / rail switches whose split-duplex uplinks
// meet in a shared spine link.  The topology is built as links of one SimGrid zone with
// explicit routes rather than SimGrid's FatTreeZone: the reduced model places ranks
// where they sit in a bigger step and adds ring peer hosts, and only the pairs a plan
// uses get routes, which keeps 131,072 ranks in memory.  Routes are added for `pairs` (src rank, dst rank) only: the messages a plan sends.
// With cores_per_node > 0 the ranks of a node are processes sharing that many cores:
// their ops run on one host per node with that many cores (an op uses at most one;
// more ops than cores share them equally), and they talk over one loopback link
// (intra bandwidth and latency, not shared).
// With an xml_file the engine loads that file instead; every pair must have a route.
struct PlatformHosts {
  std::vector<simgrid::s4u::Host*> ranks;    // where each rank's actors live and its messages start
  std::vector<simgrid::s4u::Host*> compute;  // where each rank's ops execute
  // Reduced model: each rank's stand-in for its DP ring neighbours (see ReducedLayout).
  std::vector<simgrid::s4u::Host*> ring_peers;
  std::vector<simgrid::s4u::Host*> cp_peers;  // ... and for its cp ring neighbours (cp > 1)
};
// The reduced model's layout (sim/simulation.h): where each simulated rank sits in the
// full step, and how the full step's shared core is divided.
struct ReducedLayout {
  std::vector<int> placement;  // full-step rank of each simulated rank: its node and NIC
  int full_ranks = 0;          // the core is built for the full step's nodes ...
  double replicas = 1;         // ... divided by the full step's replicas per simulated one
  // Each rank gets a ring peer host standing for its DP ring neighbours: a transfer to it
  // leaves through the rank's GPU link (and, across nodes, its NIC and the core) and
  // comes back in through the same, loading the rank's links as its outgoing and
  // incoming ring hops do in the full step.
  bool ring_across_nodes = false;
  // Under context parallelism each rank has a cp peer host too, for its cp ring's hops.
  bool cp_ring = false, cp_ring_across_nodes = false;
};

PlatformHosts build_platform(const Platform& p, int ranks, const std::vector<std::pair<int, int>>& pairs,
                             const ReducedLayout* reduced = nullptr);

// Executes `flops` on `host` (the calling actor's own or its node's shared CPU) and waits.
void execute_on(simgrid::s4u::Host* host, double flops);

// Reads a SimGrid platform XML file (in an engine of its own, which ends on return)
// into a Platform that points at it and summarizes it: one GPU per host, rank r on the
// r-th host in natural name order (gpu2 before gpu10); gpus_per_node, peak_flops and
// memory_bytes from the root zone's <prop>s (defaults: all hosts in one node, the
// fastest host's speed — host speeds are what ops achieve —, no memory check); the
// intra-/inter-node latency and bandwidth from the routes rank 0 -> 1 and rank 0 -> the
// first rank of node 1.  Throws core::UserError for a file SimGrid cannot parse.
Platform inspect_xml_platform(const std::string& file);

// Starts an actor named `name` on `host` running `body`.
void start_actor(const std::string& name, simgrid::s4u::Host* host, std::function<void()> body);

}  // namespace quintnet::sim
