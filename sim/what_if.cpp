#include "sim/what_if.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace quintnet::sim {
namespace {

std::vector<std::string> parts_of(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream in(spec);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

// A whole non-negative number in text[begin, end), else -1.
long index_in(const std::string& text, size_t begin, size_t end) {
  if (begin >= end) return -1;
  char* stop = nullptr;
  const long value = std::strtol(text.c_str() + begin, &stop, 10);
  return stop == text.c_str() + end && value >= 0 && text[begin] != '-' && text[begin] != '+' ? value : -1;
}

// The factor after the colon at `colon`, else 0.
double factor_after(const std::string& part, size_t colon) {
  if (colon == std::string::npos || colon + 1 >= part.size()) return 0;
  char* stop = nullptr;
  const double value = std::strtod(part.c_str() + colon + 1, &stop);
  return *stop == '\0' ? value : 0;
}

// "5:0.8,17:0.9" -> {5: 0.8, 17: 0.9}; `limit`: indices must be below it.
std::map<int, double> speed_factors(const std::string& spec, const std::string& option, int limit, const char* what) {
  std::map<int, double> out;
  for (const auto& part : parts_of(spec)) {
    const auto colon = part.find(':');
    const long index = index_in(part, 0, colon == std::string::npos ? part.size() : colon);
    const double factor = factor_after(part, colon);
    if (index < 0 || !(factor > 0 && factor <= 100))
      throw core::UserError("--" + option + " '" + part + "': expected " + what + ":FACTOR with FACTOR in (0, 100], e.g. 5:0.8");
    if (index >= limit)
      throw core::UserError("--" + option + " '" + part + "': " + what + " " + std::to_string(index) + " is not in this step (" +
                            std::to_string(limit) + " " + what + "s)");
    out[static_cast<int>(index)] = factor;
  }
  return out;
}

int nodes_of_step(const Platform& p, int world) { return (world + p.gpus_per_node - 1) / p.gpus_per_node; }

// "3/2:0.5" or "3/*" (with_factor false) into p.nic_factor.
void apply_nic_part(Platform& p, const std::string& part, const std::string& option, bool with_factor, int nodes) {
  const auto slash = part.find('/'), colon = part.find(':');
  const std::string form = with_factor ? "NODE/NIC:FACTOR with FACTOR in (0, 1], e.g. 3/2:0.5 (NIC * for all)"
                                       : "NODE/NIC, e.g. 3/2 (NIC * for all)";
  const size_t nic_end = with_factor ? colon : part.size();
  const bool shaped = slash != std::string::npos && nic_end != std::string::npos && nic_end > slash &&
                      (with_factor || colon == std::string::npos);
  const long node = shaped ? index_in(part, 0, slash) : -1;
  const bool every = shaped && part.substr(slash + 1, nic_end - slash - 1) == "*";
  const long nic = !shaped ? -1 : every ? 0 : index_in(part, slash + 1, nic_end);
  const double factor = with_factor ? factor_after(part, colon) : 0;
  if (node < 0 || nic < 0 || (with_factor && !(factor > 0 && factor <= 1)))
    throw core::UserError("--" + option + " '" + part + "': expected " + form);
  if (node >= nodes)
    throw core::UserError("--" + option + " '" + part + "': node " + std::to_string(node) + " is not in this step (" +
                          std::to_string(nodes) + " nodes)");
  if (nic >= p.nics_per_node)
    throw core::UserError("--" + option + " '" + part + "': NIC " + std::to_string(nic) + " is not on the node (" +
                          std::to_string(p.nics_per_node) + " NICs per node)");
  for (int k = every ? 0 : static_cast<int>(nic); k < (every ? p.nics_per_node : nic + 1); ++k)
    p.nic_factor[static_cast<int>(node) * p.nics_per_node + k] = factor;
}

}  // namespace

void add_stragglers(Platform& p, const std::string& ranks, const std::string& nodes, int world) {
  if (!nodes.empty())
    for (const auto& [node, factor] : speed_factors(nodes, "slow-node", nodes_of_step(p, world), "node"))
      for (int r = node * p.gpus_per_node; r < std::min(world, (node + 1) * p.gpus_per_node); ++r) p.rank_speed[r] = factor;
  if (!ranks.empty())
    for (const auto& [rank, factor] : speed_factors(ranks, "straggler", world, "rank")) p.rank_speed[rank] = factor;
}

void add_nic_faults(Platform& p, const std::string& slow, const std::string& failed, int world) {
  if (slow.empty() && failed.empty()) return;
  const std::string option = slow.empty() ? "failed-nic" : "slow-nic";
  if (!p.xml_file.empty())
    throw core::UserError("--" + option + ": " + p.xml_file + " is a SimGrid XML platform; change its links in the file");
  if (p.cores_per_node > 0)
    throw core::UserError("--" + option + ": ranks sharing CPU cores (" + p.name + ") have no NICs to degrade");
  const int nodes = nodes_of_step(p, world);
  for (const auto& part : parts_of(slow)) apply_nic_part(p, part, "slow-nic", true, nodes);
  for (const auto& part : parts_of(failed)) apply_nic_part(p, part, "failed-nic", false, nodes);
  if (nodes < 2) return;  // one node: no message leaves it
  for (int node = 0; node < nodes; ++node) {
    bool any = false;
    for (int k = 0; k < p.nics_per_node; ++k) any = any || p.nic_speed(node, k) > 0;
    if (!any)
      throw core::UserError("--failed-nic: node " + std::to_string(node) +
                            " has no working NIC left, so its ranks cannot reach the other nodes");
  }
}

Jitter parse_jitter(const std::string& spec, uint64_t seed) {
  Jitter j;
  j.seed = seed;
  if (spec.empty()) return j;
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const double cv = factor_after(spec, colon);
  const bool zero = colon != std::string::npos && spec.substr(colon + 1) == "0";
  if ((kind != "normal" && kind != "lognormal") || !((cv > 0 && cv <= 1) || zero))
    throw core::UserError("--jitter '" + spec + "': expected normal:CV or lognormal:CV with CV in [0, 1], e.g. lognormal:0.05");
  j.kind = kind;
  j.cv = cv;
  return j;
}

OpJitter::OpJitter(const Jitter& jitter, int rank)
    : jitter_(jitter), rng_(jitter.seed * 1000003ULL + static_cast<uint64_t>(rank)) {
  if (jitter_.kind == "lognormal") {  // mean exp(mu + s^2/2) = 1, variance (e^{s^2} - 1) = cv^2
    const double s2 = std::log1p(jitter_.cv * jitter_.cv);
    normal_ = std::normal_distribution<double>(-s2 / 2, std::sqrt(s2));
  } else {
    normal_ = std::normal_distribution<double>(1.0, jitter_.cv);
  }
}

double OpJitter::factor() {
  if (!jitter_.active()) return 1.0;
  const double x = normal_(rng_);
  return jitter_.kind == "lognormal" ? std::exp(x) : std::max(0.01, x);
}

}  // namespace quintnet::sim
