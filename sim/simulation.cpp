#include "sim/simulation.h"

#include <memory>
#include <set>
#include <simgrid/s4u.hpp>

#include "core/mesh.h"
#include "core/trace_analysis.h"
#include "sim/collectives.h"
#include "sim/memory_estimate.h"
#include "sim/rank_actor.h"
#include "sim/simgrid_compat.h"

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {
namespace {

// The engine, quiet, with the network model where latency and bandwidth mean what
// they say (CM02; SimGrid's default LV08 scales both), no TCP window limit and no
// acknowledgement traffic (which takes 5% of the reverse direction's bandwidth).
sg4::Engine make_engine() {
  // No guard page under each actor's stack: with one it costs two memory mappings, and
  // 16,384 ranks (two actors each) exceed Linux's default 65,530 mappings per process.
  static int argc = 6;
  static char name[] = "quintnet-simulate", log[] = "--log=root.thres:warning", model[] = "--cfg=network/model:CM02",
              gamma[] = "--cfg=network/TCP-gamma:0", cross[] = "--cfg=network/crosstraffic:0",
              guard[] = "--cfg=contexts/guard-size:0";
  static char* argv[] = {name, log, model, gamma, cross, guard, nullptr};
  return sg4::Engine(&argc, argv);
}

}  // namespace

SimResult simulate_step(const SimPlan& plan, const Platform& platform) {
  check_simulation_fits(plan, false);  // refused with a message, never killed silently
  const core::Schedule& s = plan.schedule;
  const core::Mesh mesh({plan.dp, plan.tp, s.pp}, {"dp", "tp", "pp"});
  const int world = mesh.world_size();

  // The (src, dst) pairs that exchange messages: stage neighbours and ring neighbours.
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < world; ++r) {
    const int pp = mesh.coord(r, "pp"), tp = mesh.coord(r, "tp"), dp = mesh.coord(r, "dp");
    auto rank_at = [&](int d, int t, int p) { return mesh.rank({d, t, p}); };
    if (plan.tp > 1) pairs.insert({r, rank_at(dp, (tp + 1) % plan.tp, pp)});
    if (plan.dp > 1) {
      RingGroup group{"dp", {}, dp, 0};
      for (int d = 0; d < plan.dp; ++d) group.ranks.push_back(rank_at(d, tp, pp));
      add_dp_routes(group, platform, pairs);
    }
    if (s.pp > 1) {
      pairs.insert({r, rank_at(dp, tp, (pp + 1) % s.pp)});
      pairs.insert({r, rank_at(dp, tp, (pp + s.pp - 1) % s.pp)});
    }
  }
  sg4::Engine engine = make_engine();
  const PlatformHosts hosts = build_platform(platform, world, {pairs.begin(), pairs.end()});
  std::unique_ptr<LatencyDraws> draws;
  if (!platform.measured_latencies.empty()) draws = std::make_unique<LatencyDraws>(platform.measured_latencies);

  SimResult result;
  result.busy_s.assign(world, 0);
  result.exposed_comm_s.assign(world, 0);
  SimStep step{plan, platform, mesh, hosts, draws.get(), result, {}, std::vector<sg4::ActorPtr>(world),
               std::vector<sg4::ActorPtr>(world), {}};
  if (plan.dp > 1)
    for (int r = 0; r < world; ++r)
      start_actor("dp-stream" + std::to_string(r), hosts.ranks[r], [&step, r] { dp_stream(step, r); });
  for (int r = 0; r < world; ++r)
    start_actor("rank" + std::to_string(r), hosts.ranks[r], [&step, r] { rank_actor(step, r); });
  engine.run();

  core::Trace& t = step.recorder.trace;
  t.source = "sim";
  for (int r = 0; r < world; ++r)
    t.ranks.push_back({mesh.coord(r, "dp"), mesh.coord(r, "tp"), mesh.coord(r, "pp")});
  for (const auto& e : t.events) result.step_time_s = std::max(result.step_time_s, e.end_us() / 1e6);
  result.bubble_fraction = core::measured_bubble_fraction(t);
  result.trace = std::move(t);
  return result;
}

double simulate_ring_allreduce(double bytes, int ranks, const Platform& platform) {
  RingGroup whole{"ring", {}, 0, 0};
  for (int k = 0; k < ranks; ++k) whole.ranks.push_back(k);
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < ranks && ranks > 1; ++r) {
    RingGroup me = whole;
    me.index = r;
    add_dp_routes(me, platform, pairs);
  }
  sg4::Engine engine = make_engine();
  const PlatformHosts hosts = build_platform(platform, ranks, {pairs.begin(), pairs.end()});
  auto actors = std::make_shared<std::vector<sg4::ActorPtr>>(ranks);
  double end = 0;
  for (int r = 0; r < ranks; ++r)
    start_actor("rank" + std::to_string(r), hosts.ranks[r], [&, r, actors] {
      (*actors)[r] = sg4::Actor::self();
      sg4::this_actor::yield();
      RingGroup g = whole;
      g.index = r;
      dp_allreduce(g, bytes, *actors, platform);
      end = std::max(end, sg4::Engine::get_clock());
    });
  engine.run();
  return end;
}

}  // namespace quintnet::sim
