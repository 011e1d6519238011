#include "sim/simgrid_compat.h"

#include <map>
#include <set>
#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {

namespace {

std::vector<sg4::Host*> build_shared_cores(const Platform& p, int ranks, const std::vector<std::pair<int, int>>& pairs) {
  auto* zone = sg4::create_full_zone("cpus");
  const int nodes = (ranks + p.gpus_per_node - 1) / p.gpus_per_node;
  std::vector<sg4::Link*> loopbacks;
  for (int n = 0; n < nodes; ++n)
    loopbacks.push_back(zone->create_link("node" + std::to_string(n) + "-loopback", p.intra_bandwidth)
                            ->set_latency(p.intra_latency)
                            ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                            ->seal());
  std::vector<sg4::Host*> hosts;
  for (int r = 0; r < ranks; ++r) {
    const int node = r / p.gpus_per_node;
    const int on_node = std::min(p.gpus_per_node, ranks - node * p.gpus_per_node);
    const double share = std::min(1.0, static_cast<double>(p.cores_per_node) / on_node);
    hosts.push_back(zone->create_host("rank" + std::to_string(r), p.gpu_flops() * share));
  }
  for (const auto& [a, b] : pairs) {
    const int na = a / p.gpus_per_node, nb = b / p.gpus_per_node;
    std::vector<sg4::LinkInRoute> route;
    if (na == nb) {
      route.emplace_back(loopbacks[na]);
    } else {
      route.emplace_back(zone->create_link("net" + std::to_string(a) + "-" + std::to_string(b), p.nic_bandwidth)
                             ->set_latency(p.inter_latency)
                             ->seal());
    }
    zone->add_route(hosts[a]->get_netpoint(), hosts[b]->get_netpoint(), nullptr, nullptr, route, false);
  }
  zone->seal();
  return hosts;
}

}  // namespace

std::vector<sg4::Host*> build_platform(const Platform& p, int ranks, const std::vector<std::pair<int, int>>& pairs) {
  if (p.cores_per_node > 0) return build_shared_cores(p, ranks, pairs);
  auto* zone = sg4::create_full_zone("cluster");
  std::vector<sg4::Host*> hosts;
  std::vector<sg4::Link*> gpu_links, nic_links;
  for (int r = 0; r < ranks; ++r) {
    hosts.push_back(zone->create_host("gpu" + std::to_string(r), p.gpu_flops()));
    gpu_links.push_back(zone->create_split_duplex_link("gpu" + std::to_string(r) + "-link", p.intra_bandwidth)
                            ->set_latency(p.intra_latency / 2)
                            ->seal());
  }
  const int nodes = (ranks + p.gpus_per_node - 1) / p.gpus_per_node;
  if (nodes > 1) {
    for (int n = 0; n < nodes; ++n)
      for (int k = 0; k < p.nics_per_node; ++k)
        nic_links.push_back(
            zone->create_split_duplex_link("node" + std::to_string(n) + "-nic" + std::to_string(k), p.nic_bandwidth)
                ->set_latency(p.inter_latency / 2)
                ->seal());
  }
  sg4::Link* core = nodes > 1 ? zone->create_link("core", nodes * p.nics_per_node * p.nic_bandwidth / p.oversubscription)
                                    ->set_latency(0)
                                    ->seal()
                              : nullptr;
  using D = sg4::LinkInRoute::Direction;
  for (const auto& [a, b] : pairs) {
    std::vector<sg4::LinkInRoute> route = {sg4::LinkInRoute(gpu_links[a], D::UP)};
    const int na = a / p.gpus_per_node, nb = b / p.gpus_per_node;
    if (na != nb) {
      // GPU i of a node leaves through NIC i mod nics (DGX: one NIC per GPU).
      route.emplace_back(nic_links[na * p.nics_per_node + (a % p.gpus_per_node) % p.nics_per_node], D::UP);
      route.emplace_back(core);
      route.emplace_back(nic_links[nb * p.nics_per_node + (b % p.gpus_per_node) % p.nics_per_node], D::DOWN);
    }
    route.emplace_back(gpu_links[b], D::DOWN);
    zone->add_route(hosts[a]->get_netpoint(), hosts[b]->get_netpoint(), nullptr, nullptr, route, false);
  }
  zone->seal();
  return hosts;
}

void start_actor(const std::string& name, sg4::Host* host, std::function<void()> body) {
  sg4::Actor::create(name, host, std::move(body));
}

}  // namespace quintnet::sim
