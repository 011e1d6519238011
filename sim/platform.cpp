#include "sim/platform.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "sim/simgrid_compat.h"

namespace quintnet::sim {
namespace {

// The GPUs' figures, each with where it comes from (docs/SIMULATOR.md, "Platforms").
// Efficiency tables: Calculon's (calculon-ai/calculon, systems/*.json) size steps; a
// matrix efficiency above the best matrix product measured on that GPU (S. Bekman,
// ml-engineering, "Maximum Achievable Matmul FLOPS comparison table") is capped at it.
const char* const kCalculonA100 = "Calculon, systems/a100_80g.json";
const char* const kCalculonH100 = "Calculon, systems/h100_80g_nvl8.json";
const char* const kGuess = "the preset's first figure (session 2), not a measurement: it matters for messages under ~1 MB only";

// One GPU's figures and where each comes from.
struct GpuFigures {
  double peak_flops;
  const char* peak_source;
  double best_matmul;  // the best matrix product measured on it, a fraction of peak
  const char* best_matmul_source;
  const char* calculon_file;
  double memory_bytes, memory_bandwidth;
  const char* memory_source;
};

const GpuFigures kA100 = {312e12, "NVIDIA A100 data sheet: 312 TFLOP/s dense FP16/BF16 tensor", 0.859,
                          "an A100 SXM, 267.9 of 312 TFLOP/s (Bekman, MAMF table, CUDA 12.1)", kCalculonA100, 80e9,
                          2039e9, "A100 80GB SXM data sheet: 80 GB HBM2e at 2,039 GB/s"};
constexpr const char* kH100Peak = "NVIDIA H100 SXM data sheet: 989 TFLOP/s dense FP16/BF16 tensor (1,979 with sparsity)";
constexpr const char* kH100Matmul =
    "an H100 SXM, 794.5 of 989 TFLOP/s (Bekman, MAMF table, torch 2.7.0+cu126; the H200 is the same GH100 chip)";
const GpuFigures kH100 = {989e12, kH100Peak, 0.803, kH100Matmul, kCalculonH100, 80e9, 3.35e12,
                          "H100 SXM data sheet: 80 GB HBM3 at 3.35 TB/s"};
const GpuFigures kH200 = {989e12, kH100Peak, 0.803, kH100Matmul, kCalculonH100, 141e9, 4.8e12,
                          "H200 SXM data sheet: 141 GB HBM3e at 4.8 TB/s"};

void gpu(Platform& p, const GpuFigures& g) {
  p.peak_flops = g.peak_flops, p.memory_bytes = g.memory_bytes, p.memory_bandwidth = g.memory_bandwidth;
  p.matrix_efficiency = {{{16, g.best_matmul}, {1, 0.6}, {0, 0.1}}};
  p.efficiency = g.best_matmul;
  p.memory_efficiency = {{{100, 0.90}, {10, 0.75}, {1, 0.6}, {0, 0.3}}};
  p.sources["peak_flops"] = g.peak_source;
  p.sources["matrix_efficiency"] = std::string("GEMM size steps and the efficiencies below 16 GFLOP (0.6, 0.1): ") +
                                   g.calculon_file + "; its 0.90-0.95 above capped at the best matrix product "
                                   "measured on " + g.best_matmul_source;
  p.sources["efficiency"] = "the matrix table's top step";
  p.sources["memory_bytes"] = g.memory_source;
  p.sources["memory_bandwidth"] = g.memory_source;
  p.sources["memory_efficiency"] = std::string(g.calculon_file) + " (mem1 MB_efficiency)";
}

void a100_network(Platform& p, double intra_bandwidth, const std::string& intra_source) {
  p.intra_bandwidth = intra_bandwidth, p.nic_bandwidth = 25e9;
  p.intra_efficiency = 0.667, p.nic_efficiency = 0.9;
  p.sources["intra_bandwidth"] = intra_source;
  p.sources["intra_efficiency"] = "nccl-tests all_reduce_perf on 8 x A100-SXM4-80GB over NVLink: bus bandwidth "
                                  "~200 GB/s of 300 (NVIDIA/nccl-tests issue #149; 208 GB/s in #178)";
  p.sources["nic_bandwidth"] = "HDR InfiniBand, 200 Gb/s per NIC (DGX A100 data sheet: 8 per node)";
  p.sources["nic_efficiency"] = std::string(kCalculonA100) + " (InfiniBand network efficiency); nccl-tests across "
                                "three nodes of 4 HDR NICs peaked at 96 of 100 GB/s (NVIDIA/nccl-tests issue #119)";
  p.sources["intra_latency"] = kGuess;
  p.sources["inter_latency"] = kGuess;
}

void h100_network(Platform& p) {
  p.intra_bandwidth = 450e9, p.nic_bandwidth = 50e9;
  p.intra_efficiency = 0.8, p.nic_efficiency = 0.9;
  p.sources["intra_bandwidth"] = "NVLink 4: 900 GB/s per GPU, both directions (H100 SXM data sheet)";
  p.sources["intra_efficiency"] = "all-reduce bus bandwidth measured on 8 x H100/H200 without NVLink SHARP: ~360 GB/s "
                                  "of 450 (NVIDIA/nccl-tests issue #312)";
  p.sources["nic_bandwidth"] = "NDR InfiniBand, 400 Gb/s per NIC (DGX H100 data sheet: 8 per node)";
  p.sources["nic_efficiency"] = std::string(kCalculonH100) + " (InfiniBand network efficiency)";
  p.sources["intra_latency"] = kGuess;
  p.sources["inter_latency"] = kGuess;
}

Platform preset(const std::string& name) {
  Platform p;
  p.name = name;
  if (name == "dgx-a100") {  // 8 x A100 SXM 80 GB, NVLink 600 GB/s total, 8 x 200 Gb/s InfiniBand
    gpu(p, kA100);
    a100_network(p, 300e9, "NVLink 3 through NVSwitch: 600 GB/s per GPU, both directions (DGX A100 data sheet)");
  } else if (name == "dgx-h100") {  // 8 x H100 SXM 80 GB, NVLink 900 GB/s total, 8 x 400 Gb/s InfiniBand
    gpu(p, kH100);
    h100_network(p);
  } else if (name == "dgx-a100-superpod") {  // DGX SuperPOD (A100): scalable units of 20 DGX A100, rails of HDR InfiniBand, non-blocking
    p = preset("dgx-a100");
    p.name = name, p.topology = Topology::Rail, p.nodes_per_leaf = 20;
  } else if (name == "dgx-h100-superpod") {  // DGX SuperPOD (H100): scalable units of 32 DGX H100, rails of NDR InfiniBand, non-blocking
    p = preset("dgx-h100");
    p.name = name, p.topology = Topology::Rail, p.nodes_per_leaf = 32;
  } else if (name == "a100x4-fat-tree") {  // nodes of 4 x A100 SXM (NVLink: 100 GB/s to each peer), 4 x HDR, 16 nodes per leaf, 2:1
    gpu(p, kA100);
    a100_network(p, 100e9, "4 x A100 SXM joined directly: 4 NVLink 3 links (100 GB/s per direction) to each peer "
                           "(HGX A100 4-GPU); not a particular machine, and its bus-bandwidth efficiency is the "
                           "NVSwitch one measured on 8 GPUs");
    p.gpus_per_node = 4, p.nics_per_node = 4;
    p.topology = Topology::FatTree, p.nodes_per_leaf = 16, p.leaf_oversubscription = 2;
  } else if (name == "h200") {  // one H200 141 GB
    gpu(p, kH200);
    h100_network(p);
    p.gpus_per_node = 1, p.nics_per_node = 1;
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

// [[threshold, efficiency], ...] with thresholds descending and efficiencies in (0, 1];
// [] for none.
EfficiencyTable table_from_json(const nlohmann::json& j, const std::string& origin, const char* key, const char* unit) {
  const std::string form = std::string("'") + key + "' must be a list of [" + unit + ", efficiency] pairs, " + unit +
                           " descending, efficiency in (0, 1], e.g. [[16, 0.86], [1, 0.6], [0, 0.1]], or []";
  if (!j.is_array()) throw core::UserError(origin + ": " + form + "; got " + j.dump());
  EfficiencyTable t;
  for (const auto& step : j) {
    if (!step.is_array() || step.size() != 2 || !step[0].is_number() || !step[1].is_number())
      throw core::UserError(origin + ": " + form + "; got " + step.dump());
    const double size = step[0].get<double>(), eff = step[1].get<double>();
    if (!(size >= 0) || !(eff > 0 && eff <= 1) || (!t.steps.empty() && !(size < t.steps.back().first)))
      throw core::UserError(origin + ": " + form + "; got " + step.dump());
    t.steps.emplace_back(size, eff);
  }
  return t;
}

// The efficiency tables a JSON file gives; a table it changes loses the preset's citation.
void read_roofline_tables(const nlohmann::json& j, const std::string& origin, Platform& p) {
  for (auto [key, into, unit] : {std::tuple{"matrix_efficiency", &p.matrix_efficiency, "GFLOP"},
                                 std::tuple{"memory_efficiency", &p.memory_efficiency, "MB"}}) {
    if (!j.contains(key)) continue;
    *into = table_from_json(j.at(key), origin, key, unit);
    if (p.sources.count(key)) p.sources[key] = "set in " + origin;
  }
}

// "sources": {field: citation}, over what the preset or the fields above said.
void read_sources(const nlohmann::json& j, const std::string& origin, Platform& p) {
  if (!j.contains("sources")) return;
  const auto& sources = j.at("sources");
  if (!sources.is_object()) throw core::UserError(origin + ": 'sources' must be an object of field: citation text");
  for (const auto& [field, text] : sources.items()) {
    if (!text.is_string()) throw core::UserError(origin + ": sources." + field + " must be text, got " + text.dump());
    p.sources[field] = text.get<std::string>();
  }
}

nlohmann::json table_to_json(const EfficiencyTable& t) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [size, eff] : t.steps) j.push_back({size, eff});
  return j;
}

}  // namespace

double EfficiencyTable::at(double size) const {
  for (const auto& [threshold, eff] : steps)
    if (size >= threshold) return eff;
  return steps.empty() ? 1.0 : steps.back().second;
}

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

namespace {

// The fields that name one of a few choices: topology, collective, p2p.
void read_named_choices(const nlohmann::json& j, const std::string& origin, Platform& p) {
  if (j.contains("topology")) {
    const auto& t = j.at("topology");
    if (!t.is_string() || (t != "switch" && t != "fat-tree" && t != "rail"))
      throw core::UserError(origin + ": 'topology' must be \"switch\", \"fat-tree\" or \"rail\", got " + t.dump());
    p.topology = t == "fat-tree" ? Topology::FatTree : t == "rail" ? Topology::Rail : Topology::Switch;
  }
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
}

void refuse_unknown_fields(const nlohmann::json& j, const std::string& origin) {
  static const std::vector<std::string> known = {"preset", "name", "nodes", "gpus_per_node", "nics_per_node",
                                                 "peak_flops", "efficiency", "matrix_efficiency", "memory_bytes",
                                                 "memory_bandwidth", "memory_efficiency", "intra_bandwidth",
                                                 "intra_efficiency", "intra_latency", "nic_bandwidth", "nic_efficiency",
                                                 "inter_latency", "sources", "oversubscription", "cores_per_node", "collective", "p2p",
                                                 "topology", "nodes_per_leaf", "leaf_oversubscription"};
  for (const auto& [key, value] : j.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw core::UserError(origin + ": unknown field '" + key + "'");
}

}  // namespace

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
    if (p.sources.count(key)) p.sources[key] = "set in " + origin;  // no longer the preset's figure
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
  number("memory_bandwidth", p.memory_bandwidth, 0);  // 0: memory-bound kernels not timed
  number("intra_efficiency", p.intra_efficiency, 1e-6, 1);
  number("nic_efficiency", p.nic_efficiency, 1e-6, 1);
  read_roofline_tables(j, origin, p);
  number("intra_bandwidth", p.intra_bandwidth, 1);
  number("intra_latency", p.intra_latency, 0);
  number("nic_bandwidth", p.nic_bandwidth, 1);
  number("inter_latency", p.inter_latency, 0);
  number("oversubscription", p.oversubscription, 1);
  number("nodes_per_leaf", per_leaf, 1, 1e9);
  number("leaf_oversubscription", p.leaf_oversubscription, 1);
  if (p.efficiency > 1) throw core::UserError(origin + ": 'efficiency' is a fraction of peak, at most 1");
  read_named_choices(j, origin, p);
  p.nodes = static_cast<int>(nodes);
  p.gpus_per_node = static_cast<int>(gpus);
  p.nics_per_node = static_cast<int>(nics);
  p.cores_per_node = static_cast<int>(cores);
  p.nodes_per_leaf = static_cast<int>(per_leaf);
  if (p.topology != Topology::Switch && p.cores_per_node > 0)
    throw core::UserError(origin + ": 'topology' " + topology_name(p.topology) +
                          " is a GPU cluster's network; ranks sharing CPU cores ('cores_per_node') talk over loopback");
  read_sources(j, origin, p);
  refuse_unknown_fields(j, origin);
  return p;
}

nlohmann::json platform_to_json(const Platform& p) {
  nlohmann::json j = {{"name", p.name}, {"nodes", p.nodes}, {"gpus_per_node", p.gpus_per_node}, {"nics_per_node", p.nics_per_node},
          {"peak_flops", p.peak_flops}, {"efficiency", p.efficiency}, {"memory_bytes", p.memory_bytes},
          {"memory_bandwidth", p.memory_bandwidth},
          {"intra_bandwidth", p.intra_bandwidth}, {"intra_efficiency", p.intra_efficiency},
          {"intra_latency", p.intra_latency}, {"nic_bandwidth", p.nic_bandwidth},
          {"nic_efficiency", p.nic_efficiency}, {"inter_latency", p.inter_latency},
          {"oversubscription", p.oversubscription}, {"cores_per_node", p.cores_per_node},
          {"topology", topology_name(p.topology)}, {"nodes_per_leaf", p.nodes_per_leaf},
          {"leaf_oversubscription", p.leaf_oversubscription},
          {"collective", p.hierarchical_collectives ? "hierarchical" : "ring"},
          {"p2p", p.p2p_rendezvous ? "rendezvous" : "eager"}};
  for (const auto& [rank, factor] : p.rank_speed) j["rank_speed"][std::to_string(rank)] = factor;
  for (const auto& [key, factor] : p.nic_factor)
    j["nic_factor"][std::to_string(key / p.nics_per_node) + "/" + std::to_string(key % p.nics_per_node)] = factor;
  if (!p.matrix_efficiency.empty()) j["matrix_efficiency"] = table_to_json(p.matrix_efficiency);
  if (!p.memory_efficiency.empty()) j["memory_efficiency"] = table_to_json(p.memory_efficiency);
  if (!p.sources.empty()) j["sources"] = p.sources;
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
