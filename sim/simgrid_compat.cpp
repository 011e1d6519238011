#include "sim/simgrid_compat.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <simgrid/s4u.hpp>

#include "core/error.h"
#include "sim/child_process.h"

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {

namespace {

PlatformHosts build_shared_cores(const Platform& p, int ranks, const std::vector<std::pair<int, int>>& pairs) {
  auto* zone = sg4::create_full_zone("cpus");
  const int nodes = (ranks + p.gpus_per_node - 1) / p.gpus_per_node;
  std::vector<sg4::Link*> loopbacks;
  std::vector<sg4::Host*> cpus;
  for (int n = 0; n < nodes; ++n) {
    // With measured latencies the simulation draws each hop's latency itself.
    loopbacks.push_back(zone->create_link("node" + std::to_string(n) + "-loopback", p.intra_link_bandwidth())
                            ->set_latency(p.measured_latencies.empty() ? p.intra_latency : 0.0)
                            ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                            ->seal());
    cpus.push_back(zone->create_host("node" + std::to_string(n) + "-cpu", p.gpu_flops())
                       ->set_core_count(p.cores_per_node)
                       ->seal());
  }
  PlatformHosts hosts;
  for (int r = 0; r < ranks; ++r) {
    hosts.ranks.push_back(zone->create_host("rank" + std::to_string(r), p.gpu_flops()));
    hosts.compute.push_back(cpus[r / p.gpus_per_node]);
  }
  for (const auto& [a, b] : pairs) {
    const int na = a / p.gpus_per_node, nb = b / p.gpus_per_node;
    std::vector<sg4::LinkInRoute> route;
    if (na == nb) {
      route.emplace_back(loopbacks[na]);
    } else {
      route.emplace_back(zone->create_link("net" + std::to_string(a) + "-" + std::to_string(b), p.nic_link_bandwidth())
                             ->set_latency(p.inter_latency)
                             ->seal());
    }
    zone->add_route(hosts.ranks[a]->get_netpoint(), hosts.ranks[b]->get_netpoint(), nullptr, nullptr, route, false);
  }
  zone->seal();
  return hosts;
}

// "gpu2" before "gpu10": runs of digits compare as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      const std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
      const std::string xs = x.substr(std::min(x.find_first_not_of('0'), x.size())),
                        ys = y.substr(std::min(y.find_first_not_of('0'), y.size()));
      if (xs.size() != ys.size()) return xs.size() < ys.size();
      if (xs != ys) return xs < ys;
      i = i2, j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

std::vector<sg4::Host*> hosts_in_rank_order(const sg4::Engine& engine) {
  auto hosts = engine.get_all_hosts();
  std::sort(hosts.begin(), hosts.end(),
            [](const sg4::Host* a, const sg4::Host* b) { return natural_less(a->get_name(), b->get_name()); });
  return hosts;
}

void load_xml(const sg4::Engine& engine, const std::string& file) {
  try {
    engine.load_platform(file);
  } catch (const std::exception& e) {  // simgrid::ParseError names the file and line
    throw core::UserError(file + ": not a valid SimGrid platform (" + e.what() + ")");
  }
}

// The route's latency and its narrowest link's bandwidth; false when there is none.
bool route_summary(const sg4::Host* a, const sg4::Host* b, double& latency, double& bandwidth) {
  std::vector<sg4::Link*> links;
  latency = 0;
  a->route_to(b, links, &latency);
  if (links.empty()) return false;
  bandwidth = links.front()->get_bandwidth();
  for (const auto* l : links) bandwidth = std::min(bandwidth, l->get_bandwidth());
  return true;
}

double zone_number(const sg4::NetZone* zone, const char* key, double fallback, const std::string& file) {
  const char* value = zone->get_property(key);
  if (value == nullptr) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    if (used == std::string(value).size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw core::UserError(file + ": <prop id=\"" + key + "\"> must be a positive number, got '" + value + "'");
}

PlatformHosts build_from_xml(const Platform& p, int ranks, const std::vector<std::pair<int, int>>& pairs) {
  const auto& engine = *sg4::Engine::get_instance();
  load_xml(engine, p.xml_file);
  auto hosts = hosts_in_rank_order(engine);
  if (static_cast<int>(hosts.size()) < ranks)
    throw core::UserError(p.xml_file + ": " + std::to_string(ranks) + " ranks, the platform has " +
                          std::to_string(hosts.size()) + " hosts");
  hosts.resize(ranks);
  for (const auto& [a, b] : pairs) {
    double latency = 0, bandwidth = 0;
    if (!route_summary(hosts[a], hosts[b], latency, bandwidth))
      throw core::UserError(p.xml_file + ": no route from " + hosts[a]->get_name() + " (rank " + std::to_string(a) +
                            ") to " + hosts[b]->get_name() + " (rank " + std::to_string(b) + "), which exchange messages");
  }
  return {hosts, hosts, {}, {}};
}

}  // namespace

Platform inspect_xml_platform(const std::string& file) {
  const std::string summary = run_in_child("reading " + file, [&] {
    int argc = 2;
    char name[] = "quintnet", log[] = "--log=root.thres:critical";
    char* argv[] = {name, log, nullptr};
    sg4::Engine engine(&argc, argv);
    load_xml(engine, file);
    const auto hosts = hosts_in_rank_order(engine);
    if (hosts.empty()) throw core::UserError(file + ": the platform has no hosts");
    Platform p;
    const auto* root = engine.get_netzone_root();
    double fastest = 0;
    for (const auto* h : hosts) fastest = std::max(fastest, h->get_speed());
    const int count = static_cast<int>(hosts.size());
    const int per_node = static_cast<int>(zone_number(root, "gpus_per_node", count, file));
    if (count % per_node != 0)
      throw core::UserError(file + ": " + std::to_string(count) + " hosts are not whole nodes of gpus_per_node = " +
                            std::to_string(per_node));
    p.gpus_per_node = per_node;
    p.nodes = count / per_node;
    p.nics_per_node = 1;
    p.peak_flops = zone_number(root, "peak_flops", fastest, file);
    p.efficiency = std::min(1.0, fastest / p.peak_flops);
    p.memory_bytes = zone_number(root, "memory_bytes", 0, file);
    if (count > 1) route_summary(hosts[0], hosts[1], p.intra_latency, p.intra_bandwidth);
    if (p.nodes > 1) route_summary(hosts[0], hosts[per_node], p.inter_latency, p.nic_bandwidth);
    return platform_to_json(p).dump();
  });
  Platform p = platform_from_json(nlohmann::json::parse(summary), file);
  p.name = file;
  p.xml_file = file;
  return p;
}

namespace {

// A GPU cluster's hosts and links (sim/platform.h says what each link stands for):
// one host and one GPU link per rank, made first; the core (or spine), NICs and switch
// uplinks made as routes need them.
class ClusterLinks {
 public:
  ClusterLinks(const Platform& p, sg4::NetZone* zone, int ranks, const ReducedLayout* reduced)
      : p_(p), zone_(zone), reduced_(reduced), tiers_(p.topology != Topology::Switch) {
    for (int r = 0; r < ranks; ++r) {
      hosts.push_back(zone->create_host("gpu" + std::to_string(r), p.gpu_flops()));
      gpu_links_.push_back(zone->create_split_duplex_link("gpu" + std::to_string(r) + "-link", p.intra_link_bandwidth())
                               ->set_latency(p.intra_latency / 2)
                               ->seal());
    }
    const int full_ranks = reduced ? reduced->full_ranks : ranks;
    nodes_ = (full_ranks + p.gpus_per_node - 1) / p.gpus_per_node;
    // One switch: the core carries every node's NICs (over the oversubscription); a
    // reduced model's flows are one replica's share of it.  Leaf or rail switches: the
    // spine carries their uplinks (over the oversubscription).  Not oversubscribed, it
    // can never limit a flow — what enters it left a NIC (or uplink) whose bandwidth it
    // carries — so it is left out: as one link on every route between nodes it made all
    // those flows one system for SimGrid's max-min solver, re-solved whole at each event
    // (the full simulation's main cost after the bucket queues).
    const double nic_total = static_cast<double>(nodes_) * p.nics_per_node * p.nic_link_bandwidth();
    if (nodes_ > 1 && p.oversubscription > 1)
      core_ = zone->create_link(tiers_ ? "spine" : "core",
                                tiers_ ? nic_total / p.leaf_oversubscription / p.oversubscription
                                       : nic_total / p.oversubscription / (reduced ? reduced->replicas : 1))
                  ->set_latency(0)
                  ->seal();
  }

  // Where rank r sits: itself, or its place in the full step (reduced model).
  int place(int r) const { return reduced_ ? reduced_->placement[static_cast<size_t>(r)] : r; }
  bool across_nodes(int a, int b) const { return place(a) / p_.gpus_per_node != place(b) / p_.gpus_per_node; }

  std::vector<sg4::LinkInRoute> route(int a, int b, bool across) {
    using D = sg4::LinkInRoute::Direction;
    std::vector<sg4::LinkInRoute> route = {sg4::LinkInRoute(gpu_links_[a], D::UP)};
    if (across) {
      route.emplace_back(nic_of(a), D::UP);
      if (!tiers_) {
        if (core_) route.emplace_back(core_);
      } else if (switch_of(a) != switch_of(b)) {
        route.emplace_back(uplink_of(a), D::UP);
        if (core_) route.emplace_back(core_);
        route.emplace_back(uplink_of(b), D::DOWN);
      }
      route.emplace_back(nic_of(b), D::DOWN);
    }
    route.emplace_back(gpu_links_[b], D::DOWN);
    return route;
  }

  std::vector<sg4::Host*> hosts;

 private:
  // GPU i of a node leaves through NIC i mod nics (DGX: one NIC per GPU) or, when that
  // one failed, the node's next working NIC.
  int nic_index(int r) const {
    const int nics = p_.nics_per_node, node = place(r) / p_.gpus_per_node, first = (place(r) % p_.gpus_per_node) % nics;
    for (int k = 0; k < nics; ++k)
      if (p_.nic_speed(node, (first + k) % nics) > 0) return (first + k) % nics;
    throw core::UserError("node " + std::to_string(node) + " has no working NIC left, so its ranks cannot reach the other nodes");
  }
  sg4::Link* nic_of(int r) {
    const int node = place(r) / p_.gpus_per_node, nic = nic_index(r);
    sg4::Link*& link = nic_links_[node * p_.nics_per_node + nic];
    if (!link)
      link = zone_->create_split_duplex_link("node" + std::to_string(node) + "-nic" + std::to_string(nic),
                                             p_.nic_link_bandwidth() * p_.nic_speed(node, nic))
                 ->set_latency(p_.inter_latency / 2)
                 ->seal();
    return link;
  }
  // The leaf (fat-tree) or rail switch a rank's NIC hangs from.
  int switch_of(int r) const {
    const int node = place(r) / p_.gpus_per_node, group = node / p_.nodes_per_leaf;
    return p_.topology == Topology::Rail ? group * p_.nics_per_node + nic_index(r) : group;
  }
  // A switch's uplinks: its NICs' bandwidth over the leaf oversubscription.
  sg4::Link* uplink_of(int r) {
    const int sw = switch_of(r), group = p_.topology == Topology::Rail ? sw / p_.nics_per_node : sw;
    sg4::Link*& link = uplinks_[sw];
    if (!link) {
      const int member_nodes = std::min(p_.nodes_per_leaf, nodes_ - group * p_.nodes_per_leaf);
      const double down = member_nodes * (p_.topology == Topology::Rail ? 1 : p_.nics_per_node) * p_.nic_link_bandwidth();
      link = zone_->create_split_duplex_link("switch" + std::to_string(sw) + "-uplink", down / p_.leaf_oversubscription)
                 ->set_latency(0)
                 ->seal();
    }
    return link;
  }

  const Platform& p_;
  sg4::NetZone* zone_;
  const ReducedLayout* reduced_;
  bool tiers_;
  int nodes_ = 1;
  std::vector<sg4::Link*> gpu_links_;
  sg4::Link* core_ = nullptr;
  std::map<int, sg4::Link*> nic_links_, uplinks_;
};

}  // namespace

PlatformHosts build_platform(const Platform& p, int ranks, const std::vector<std::pair<int, int>>& pairs,
                             const ReducedLayout* reduced) {
  if (!p.xml_file.empty()) return build_from_xml(p, ranks, pairs);
  if (p.cores_per_node > 0) return build_shared_cores(p, ranks, pairs);
  auto* zone = sg4::create_full_zone("cluster");
  ClusterLinks links(p, zone, ranks, reduced);
  const std::vector<sg4::Host*>& hosts = links.hosts;
  for (const auto& [a, b] : pairs)
    zone->add_route(hosts[a]->get_netpoint(), hosts[b]->get_netpoint(), nullptr, nullptr,
                    links.route(a, b, links.across_nodes(a, b)), false);
  PlatformHosts out{hosts, hosts, {}, {}};
  if (reduced)
    for (int r = 0; r < ranks; ++r) {
      out.ring_peers.push_back(zone->create_host("gpu" + std::to_string(r) + "-ring-peer", p.gpu_flops()));
      zone->add_route(hosts[r]->get_netpoint(), out.ring_peers.back()->get_netpoint(), nullptr, nullptr,
                      links.route(r, r, reduced->ring_across_nodes), false);
      if (!reduced->cp_ring) continue;
      out.cp_peers.push_back(zone->create_host("gpu" + std::to_string(r) + "-cp-peer", p.gpu_flops()));
      zone->add_route(hosts[r]->get_netpoint(), out.cp_peers.back()->get_netpoint(), nullptr, nullptr,
                      links.route(r, r, reduced->cp_ring_across_nodes), false);
    }
  zone->seal();
  return out;
}

void execute_on(sg4::Host* host, double flops) {
  if (host == sg4::this_actor::get_host()) sg4::this_actor::execute(flops);
  else sg4::this_actor::exec_init(flops)->set_host(host)->wait();
}

void start_actor(const std::string& name, sg4::Host* host, std::function<void()> body) {
  sg4::Actor::create(name, host, std::move(body));
}

}  // namespace quintnet::sim
