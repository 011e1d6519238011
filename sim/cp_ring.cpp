#include "sim/cp_ring.h"

#include <algorithm>

#include "sim/simgrid_compat.h"

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {

std::vector<RingStep> forward_ring(int cp, double attention_s, double block_bytes, double extra_latency) {
  std::vector<RingStep> steps;
  for (int k = 0; k < cp; ++k) steps.push_back({attention_s / cp, k + 1 < cp ? block_bytes : 0.0, extra_latency});
  return steps;
}

std::vector<RingStep> backward_ring(int cp, double attention_s, double block_bytes, double extra_latency) {
  std::vector<RingStep> steps;
  for (int k = 0; k < cp; ++k) {
    const double block = k + 1 < cp ? block_bytes : 0.0;  // the key/value block moves on
    const double gradients = k > 0 ? block_bytes : 0.0;   // the previous step's gradients follow
    steps.push_back({attention_s / cp, block + gradients, extra_latency});
  }
  steps.push_back({0.0, block_bytes, extra_latency});  // the last gradients, home
  return steps;
}

CpHop cp_hop(int cp, int tp, const Platform& p) {
  if (tp * cp <= p.gpus_per_node) return {p.intra_latency, p.intra_link_bandwidth()};
  return {p.intra_latency + p.inter_latency, p.nic_link_bandwidth()};
}

int cp_next_rank(const core::Mesh& mesh, int rank, int cp) {
  const int d = mesh.coord(rank, core::Axis::Dp), next = d - d % cp + (d % cp + 1) % cp;
  return mesh.rank({next, mesh.coord(rank, core::Axis::Tp), mesh.coord(rank, core::Axis::Pp)});
}

double ring_exposed_seconds(const std::vector<RingStep>& steps, double latency, double bandwidth) {
  double exposed = 0;
  for (const RingStep& s : steps)
    if (s.bytes > 0) exposed += std::max(0.0, latency + s.bytes / bandwidth - s.attention_s);
  return exposed;
}

void estimate_cp_ring(CpRingCosts& c, int cp, int tp, const Platform& p) {
  if (c.layers == 0) return;
  const auto [latency, bandwidth] = cp_hop(cp, tp, p);
  const double layers = c.layers, block = c.block_bytes / layers;
  c.estimate_forward_s = layers * ring_exposed_seconds(forward_ring(cp, c.attention_forward_s / layers, block), latency, bandwidth);
  c.estimate_backward_s =
      layers * (ring_exposed_seconds(backward_ring(cp, c.attention_backward_s / layers, block), latency, bandwidth) +
                (c.attention_recompute_s > 0
                     ? ring_exposed_seconds(forward_ring(cp, c.attention_recompute_s / layers, block), latency, bandwidth)
                     : 0.0));
}

RingRun run_ring(const std::vector<RingStep>& steps, const CpRingRoute& route, sg4::Host* compute, double flops_per_s) {
  static char token;  // a hop's payload carries nothing: its bytes are what it costs
  RingRun run;
  run.start = sg4::Engine::get_clock();
  for (const RingStep& s : steps) {
    sg4::CommPtr hop;
    if (s.bytes > 0) {
      hop = route.outbox ? route.outbox->put_async(&token, static_cast<uint64_t>(s.bytes))
                         : sg4::Comm::sendto_async(route.host, route.peer, static_cast<uint64_t>(s.bytes));
      run.bytes += s.bytes;
      ++run.hops;
    }
    if (s.attention_s > 0) execute_on(compute, s.attention_s * flops_per_s);
    const double computed = sg4::Engine::get_clock();
    if (hop) {
      double arrived = 0;
      if (route.inbox) {
        char* payload = nullptr;
        sg4::CommPtr in = route.inbox->get_async<char>(&payload);
        in->wait();
        arrived = in->get_finish_time();
      }
      hop->wait();
      sg4::this_actor::sleep_until(std::max(arrived, hop->get_finish_time()) + s.extra_latency);
    }
    run.exposed += sg4::Engine::get_clock() - computed;
  }
  run.end = sg4::Engine::get_clock();
  return run;
}

}  // namespace quintnet::sim
