#pragma once
// A cluster described for the simulator: nodes of GPUs (peak FLOP/s, the matrix-product
// efficiency by GEMM size, memory bandwidth and its efficiency by transfer size, memory),
// the links inside a node and the network between nodes, with the bus-bandwidth
// efficiency collectives reach on them.
// Presets: dgx-a100, dgx-h100, h200 (one GPU), cpu-local (this kind of 2-core
// machine, to be calibrated), ideal (infinite bandwidth, no latency: closed forms), and
// networks of switches: dgx-a100-superpod, dgx-h100-superpod (rail-optimized),
// a100x4-fat-tree (nodes of 4 GPUs under 2:1 oversubscribed leaf switches).  The GPU
// presets' figures are published measurements and data sheets, each named in `sources`.
// Or a JSON file with the same fields, or a SimGrid platform XML file (docs/SIMULATOR.md).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace quintnet::sim {

// How the nodes' NICs reach each other (see build_platform in sim/simgrid_compat.h):
//   Switch   every NIC on one switch, the `core` link (bandwidth of all NICs over the
//            oversubscription) shared by every message between nodes;
//   FatTree  leaf switches of nodes_per_leaf nodes (all their NICs), each with uplinks of
//            its NICs' bandwidth over leaf_oversubscription to a spine of all uplinks'
//            bandwidth over oversubscription; messages inside a leaf stay in it;
//   Rail     rail-optimized: NIC i of each of a group's nodes_per_leaf nodes on rail
//            switch i of that group, uplinks and spine as for the fat-tree; a message
//            between NICs of one rail switch stays in it, any other crosses the spine.
enum class Topology { Switch, FatTree, Rail };

// What-if: per-op compute time jitter, each op's time times a factor of mean 1 drawn
// from `kind`'s distribution with coefficient of variation `cv` (normal: truncated at
// 0.01; lognormal), reproducibly from `seed` and the rank.
struct Jitter {
  std::string kind;  // "" (none), "normal", "lognormal"
  double cv = 0;
  uint64_t seed = 1;
  bool active() const { return !kind.empty() && cv > 0; }
};

// An efficiency that depends on a size, as steps (Calculon's convention): the entry
// with the largest threshold not above the size applies; sizes below every threshold
// take the smallest threshold's.  Thresholds in GFLOP (matrix products) or MB (memory).
struct EfficiencyTable {
  std::vector<std::pair<double, double>> steps;  // (threshold, efficiency), thresholds descending
  bool empty() const { return steps.empty(); }
  double at(double size) const;
};

struct Platform {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 8;
  double peak_flops = 312e12;  // per GPU, dense 16-bit
  double efficiency = 0.5;     // fraction of peak every matrix product reaches, when there is no table
  // The fraction of peak one matrix product reaches, by its GFLOP (sim/roofline.h);
  // empty: `efficiency` for every size.
  EfficiencyTable matrix_efficiency;
  double memory_bytes = 80e9;  // per GPU
  // Memory bandwidth (bytes/s per GPU) and the fraction of it one kernel reaches, by the
  // MB it moves (empty: all of it).  0: memory-bound kernels take no time (the flat
  // model, before the roofline: every op's time is its matrix FLOPs at `efficiency`).
  double memory_bandwidth = 0;
  EfficiencyTable memory_efficiency;
  double intra_bandwidth = 300e9;  // bytes/s, per GPU, each direction (NVLink)
  double intra_efficiency = 1;     // of intra_bandwidth that collectives and messages reach (bus bandwidth)
  double intra_latency = 2e-6;     // seconds, GPU to GPU inside a node
  int nics_per_node = 8;
  double nic_bandwidth = 25e9;  // bytes/s per NIC, each direction
  double nic_efficiency = 1;    // of nic_bandwidth that messages reach
  double inter_latency = 5e-6;  // seconds, node to node
  Topology topology = Topology::Switch;
  double oversubscription = 1.0;       // the top tier: its bandwidth = what enters it / this
  int nodes_per_leaf = 32;             // FatTree, Rail: nodes under one leaf / in one rail group
  double leaf_oversubscription = 1.0;  // FatTree, Rail: a leaf switch's NICs over its uplinks
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
  // What-if: NICs at a fraction of their bandwidth (key node x nics_per_node + nic), 0 for
  // a failed one: its GPUs' messages leave through the node's next working NIC.
  std::map<int, double> nic_factor;
  Jitter jitter;
  // Where each figure comes from (field name -> citation), carried into its JSON form.
  std::map<std::string, std::string> sources;

  int gpus() const { return nodes * gpus_per_node; }
  double speed_factor(int rank) const {
    const auto it = rank_speed.find(rank);
    return it == rank_speed.end() ? 1.0 : it->second;
  }
  double nic_speed(int node, int nic) const {
    const auto it = nic_factor.find(node * nics_per_node + nic);
    return it == nic_factor.end() ? 1.0 : it->second;
  }
  double gpu_flops() const { return peak_flops * efficiency; }  // per GPU, or per core when cores_per_node > 0
  // What links carry: the bus bandwidth collectives reach inside a node, and a NIC's.
  double intra_link_bandwidth() const { return intra_bandwidth * intra_efficiency; }
  double nic_link_bandwidth() const { return nic_bandwidth * nic_efficiency; }
  // Whether ops are timed by the roofline (memory-bound kernels cost their bytes).
  bool has_roofline() const { return memory_bandwidth > 0; }
};

std::vector<std::string> platform_presets();

std::string topology_name(Topology t);
// A preset name or a JSON file; `nodes` > 0 overrides the node count.  Throws
// core::UserError naming the preset list or the file, field and problem.
Platform load_platform(const std::string& name_or_file, int nodes = 0);
Platform platform_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json platform_to_json(const Platform& p);

}  // namespace quintnet::sim
