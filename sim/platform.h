#pragma once
// A cluster described for the simulator: nodes of GPUs (peak FLOP/s, achievable
// efficiency, memory), the links inside a node and the network between nodes.
// Presets: dgx-a100, dgx-h100, h200 (one GPU), cpu-local (this kind of 2-core
// machine, to be calibrated), ideal (infinite bandwidth, no latency: closed forms).
// Or a JSON file with the same fields, or a SimGrid platform XML file (docs/SIMULATOR.md).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace quintnet::sim {

struct Platform {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 8;
  double peak_flops = 312e12;  // per GPU, dense 16-bit
  double efficiency = 0.5;     // achievable fraction of peak for the model's matmuls
  double memory_bytes = 80e9;  // per GPU
  double intra_bandwidth = 300e9;  // bytes/s, per GPU, each direction (NVLink)
  double intra_latency = 2e-6;     // seconds, GPU to GPU inside a node
  int nics_per_node = 8;
  double nic_bandwidth = 25e9;  // bytes/s per NIC, each direction
  double inter_latency = 5e-6;  // seconds, node to node
  double oversubscription = 1.0;  // fat-tree: bisection = nodes x NICs x bandwidth / this
  // > 0: the node's ranks are processes sharing this many CPU cores, e.g. 8 ranks on
  // a 2-core machine: n ops running at once each get min(1, cores / n) of a core
  // (see simgrid_compat.h).
  int cores_per_node = 0;
  // DP all-reduces over groups spanning nodes: one ring, or NCCL-style two levels
  // (reduce-scatter in the node, all-reduce across nodes, all-gather in the node).
  bool hierarchical_collectives = false;
  // Pipeline messages move once both sides have posted them (Gloo over TCP: the
  // receiver's request reaches the sender first), not as soon as they are sent.
  bool p2p_rendezvous = false;
  // Calibrated machines: each message hop's latency is drawn from these measured ones
  // (equally likely) instead of intra_latency, and the routes have none (see
  // sim/calibration.h).  Empty: every hop takes intra_latency.
  std::vector<double> measured_latencies;
  // A SimGrid platform XML file: its hosts (rank r on the r-th host in natural name
  // order), links and routes replace the ones built from the fields above, which then
  // only summarize it (see simgrid_compat.h) for the planner's analytic pre-filter.
  std::string xml_file;
  // What-if: ranks computing at a fraction of the others' speed (0.8: each op takes
  // 1/0.8 as long), e.g. a throttled GPU; ranks not listed run at 1.
  std::map<int, double> rank_speed;

  int gpus() const { return nodes * gpus_per_node; }
  double speed_factor(int rank) const {
    const auto it = rank_speed.find(rank);
    return it == rank_speed.end() ? 1.0 : it->second;
  }
  double gpu_flops() const { return peak_flops * efficiency; }  // per GPU, or per core when cores_per_node > 0
};

std::vector<std::string> platform_presets();

// What-if stragglers from the command line: `ranks` "5:0.8,17:0.9" (rank:speed factor)
// and `nodes` "3:0.5" (every rank of node 3), for a step of `world` ranks.  Throws
// core::UserError naming the option and the bad part (a rank past the world, a factor
// outside (0, 100]).
void add_stragglers(Platform& p, const std::string& ranks, const std::string& nodes, int world);
// A preset name or a JSON file; `nodes` > 0 overrides the node count.  Throws
// core::UserError naming the preset list or the file, field and problem.
Platform load_platform(const std::string& name_or_file, int nodes = 0);
Platform platform_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json platform_to_json(const Platform& p);

}  // namespace quintnet::sim
