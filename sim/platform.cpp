#include "sim/platform.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "sim/simgrid_compat.h"

namespace quintnet::sim {
namespace {

Platform preset(const std::string& name) {
  Platform p;
  p.name = name;
  if (name == "dgx-a100") {  // 8 x A100 SXM 80 GB, NVLink 600 GB/s total, 8 x 200 Gb/s InfiniBand
    p.peak_flops = 312e12, p.memory_bytes = 80e9, p.intra_bandwidth = 300e9, p.nic_bandwidth = 25e9;
  } else if (name == "dgx-h100") {  // 8 x H100 SXM 80 GB, NVLink 900 GB/s total, 8 x 400 Gb/s InfiniBand
    p.peak_flops = 989e12, p.memory_bytes = 80e9, p.intra_bandwidth = 450e9, p.nic_bandwidth = 50e9;
  } else if (name == "dgx-a100-superpod") {  // DGX SuperPOD (A100): scalable units of 20 DGX A100, rails of HDR InfiniBand, non-blocking
    p = preset("dgx-a100");
    p.name = name, p.topology = Topology::Rail, p.nodes_per_leaf = 20;
  } else if (name == "dgx-h100-superpod") {  // DGX SuperPOD (H100): scalable units of 32 DGX H100, rails of NDR InfiniBand, non-blocking
    p = preset("dgx-h100");
    p.name = name, p.topology = Topology::Rail, p.nodes_per_leaf = 32;
  } else if (name == "a100x4-fat-tree") {  // nodes of 4 x A100 SXM (NVLink: 100 GB/s to each peer), 4 x HDR, 16 nodes per leaf, 2:1
    p.gpus_per_node = 4, p.nics_per_node = 4, p.intra_bandwidth = 100e9;
    p.topology = Topology::FatTree, p.nodes_per_leaf = 16, p.leaf_oversubscription = 2;
  } else if (name == "h200") {  // one H200 141 GB
    p.gpus_per_node = 1, p.nics_per_node = 1;
    p.peak_flops = 989e12, p.memory_bytes = 141e9, p.intra_bandwidth = 450e9, p.nic_bandwidth = 50e9;
  } else if (name == "cpu-local") {  // ranks as processes on 2 cores (~77 GFLOP/s peak each with OpenBLAS)
    p.gpus_per_node = 64, p.nics_per_node = 1, p.cores_per_node = 2;
    p.peak_flops = 77e9, p.efficiency = 0.3, p.memory_bytes = 24e9, p.intra_bandwidth = 2e9,
    p.intra_latency = 50e-6, p.nic_bandwidth = 1e9, p.inter_latency = 100e-6;
  } else if (name == "ideal") {  // for closed forms: ops cost what they are given, messages nothing
    p.gpus_per_node = 1 << 16, p.peak_flops = 1e15, p.efficiency = 1, p.memory_bytes = 1e18,
    p.intra_bandwidth = 1e18, p.intra_latency = 0, p.nic_bandwidth = 1e18, p.inter_latency = 0;
  } else {
    std::string list;
    for (const auto& n : platform_presets()) list += (list.empty() ? "" : ", ") + n;
    throw core::UserError("platform '" + name + "': not a preset (" + list + ") nor a JSON or SimGrid XML file");
  }
  return p;
}

}  // namespace

std::vector<std::string> platform_presets() {
  return {"dgx-a100", "dgx-h100", "dgx-a100-superpod", "dgx-h100-superpod", "a100x4-fat-tree", "h200", "cpu-local", "ideal"};
}

std::string topology_name(Topology t) {
  switch (t) {
    case Topology::FatTree: return "fat-tree";
    case Topology::Rail: return "rail";
    default: return "switch";
  }
}

Platform platform_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object())
    throw core::UserError(origin + ": a platform is a JSON object such as {\"preset\": \"dgx-a100\", \"nodes\": 4}");
  auto text = [&](const char* key, const std::string& fallback) {
    if (!j.contains(key)) return fallback;
    if (!j.at(key).is_string()) throw core::UserError(origin + ": '" + key + "' must be text, got " + j.at(key).dump());
    return j.at(key).get<std::string>();
  };
  Platform p = j.contains("preset") ? preset(text("preset", "")) : Platform{};
  p.name = text("name", origin);
  auto number = [&](const char* key, double& into, double min, double max = 1e300) {
    if (!j.contains(key)) return;
    if (!j.at(key).is_number() || !(j.at(key).get<double>() >= min) || !(j.at(key).get<double>() <= max)) {
      std::ostringstream range;
      if (max < 1e300) range << "from " << min << " to " << max;
      else range << ">= " << min;
      throw core::UserError(origin + ": '" + key + "' must be a number " + range.str() + ", got " + j.at(key).dump());
    }
    into = j.at(key).get<double>();
  };
  // Counts become ints: a billion of anything is past any cluster.
  double nodes = p.nodes, gpus = p.gpus_per_node, nics = p.nics_per_node, cores = p.cores_per_node,
         per_leaf = p.nodes_per_leaf;
  number("nodes", nodes, 1, 1e9);
  number("gpus_per_node", gpus, 1, 1e9);
  number("nics_per_node", nics, 1, 1e9);
  number("cores_per_node", cores, 0, 1e9);
  number("peak_flops", p.peak_flops, 1);
  number("efficiency", p.efficiency, 1e-6);
  number("memory_bytes", p.memory_bytes, 0);  // 0: unknown, no memory check
  number("intra_bandwidth", p.intra_bandwidth, 1);
  number("intra_latency", p.intra_latency, 0);
  number("nic_bandwidth", p.nic_bandwidth, 1);
  number("inter_latency", p.inter_latency, 0);
  number("oversubscription", p.oversubscription, 1);
  number("nodes_per_leaf", per_leaf, 1, 1e9);
  number("leaf_oversubscription", p.leaf_oversubscription, 1);
  if (j.contains("topology")) {
    const auto& t = j.at("topology");
    if (!t.is_string() || (t != "switch" && t != "fat-tree" && t != "rail"))
      throw core::UserError(origin + ": 'topology' must be \"switch\", \"fat-tree\" or \"rail\", got " + t.dump());
    p.topology = t == "fat-tree" ? Topology::FatTree : t == "rail" ? Topology::Rail : Topology::Switch;
  }
  if (p.efficiency > 1) throw core::UserError(origin + ": 'efficiency' is a fraction of peak, at most 1");
  if (j.contains("collective")) {
    const auto& c = j.at("collective");
    if (!c.is_string() || (c != "ring" && c != "hierarchical"))
      throw core::UserError(origin + ": 'collective' must be \"ring\" or \"hierarchical\", got " + c.dump());
    p.hierarchical_collectives = c == "hierarchical";
  }
  if (j.contains("p2p")) {
    const auto& m = j.at("p2p");
    if (!m.is_string() || (m != "eager" && m != "rendezvous"))
      throw core::UserError(origin + ": 'p2p' must be \"eager\" or \"rendezvous\", got " + m.dump());
    p.p2p_rendezvous = m == "rendezvous";
  }
  p.nodes = static_cast<int>(nodes);
  p.gpus_per_node = static_cast<int>(gpus);
  p.nics_per_node = static_cast<int>(nics);
  p.cores_per_node = static_cast<int>(cores);
  p.nodes_per_leaf = static_cast<int>(per_leaf);
  if (p.topology != Topology::Switch && p.cores_per_node > 0)
    throw core::UserError(origin + ": 'topology' " + topology_name(p.topology) +
                          " is a GPU cluster's network; ranks sharing CPU cores ('cores_per_node') talk over loopback");
  static const std::vector<std::string> known = {"preset", "name", "nodes", "gpus_per_node", "nics_per_node",
                                                 "peak_flops", "efficiency", "memory_bytes", "intra_bandwidth",
                                                 "intra_latency", "nic_bandwidth", "inter_latency", "oversubscription", "cores_per_node", "collective", "p2p",
                                                 "topology", "nodes_per_leaf", "leaf_oversubscription"};
  for (const auto& [key, value] : j.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw core::UserError(origin + ": unknown field '" + key + "'");
  return p;
}

nlohmann::json platform_to_json(const Platform& p) {
  nlohmann::json j = {{"name", p.name}, {"nodes", p.nodes}, {"gpus_per_node", p.gpus_per_node}, {"nics_per_node", p.nics_per_node},
          {"peak_flops", p.peak_flops}, {"efficiency", p.efficiency}, {"memory_bytes", p.memory_bytes},
          {"intra_bandwidth", p.intra_bandwidth}, {"intra_latency", p.intra_latency},
          {"nic_bandwidth", p.nic_bandwidth}, {"inter_latency", p.inter_latency},
          {"oversubscription", p.oversubscription}, {"cores_per_node", p.cores_per_node},
          {"topology", topology_name(p.topology)}, {"nodes_per_leaf", p.nodes_per_leaf},
          {"leaf_oversubscription", p.leaf_oversubscription},
          {"collective", p.hierarchical_collectives ? "hierarchical" : "ring"},
          {"p2p", p.p2p_rendezvous ? "rendezvous" : "eager"}};
  for (const auto& [rank, factor] : p.rank_speed) j["rank_speed"][std::to_string(rank)] = factor;
  for (const auto& [key, factor] : p.nic_factor)
    j["nic_factor"][std::to_string(key / p.nics_per_node) + "/" + std::to_string(key % p.nics_per_node)] = factor;
  if (p.jitter.active()) j["jitter"] = {{"kind", p.jitter.kind}, {"cv", p.jitter.cv}, {"seed", p.jitter.seed}};
  return j;
}

Platform load_platform(const std::string& name_or_file, int nodes) {
  Platform p;
  if (!std::filesystem::exists(name_or_file)) {
    p = preset(name_or_file);
  } else if (std::filesystem::path(name_or_file).extension() == ".xml") {
    p = inspect_xml_platform(name_or_file);
  } else {
    std::ifstream in(name_or_file);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw core::UserError(name_or_file + ": not a JSON platform description (" + e.what() + ")");
    }
    if (!j.is_object()) throw core::UserError(name_or_file + ": a platform description is a JSON object");
    p = platform_from_json(j, name_or_file);
  }
  if (nodes > 0 && !p.xml_file.empty())
    throw core::UserError("--nodes: " + name_or_file + " is a SimGrid XML platform, its hosts are fixed by the file");
  if (nodes > 0) p.nodes = nodes;
  return p;
}

}  // namespace quintnet::sim
