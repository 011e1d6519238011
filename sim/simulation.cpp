#include "sim/simulation.h"

#include <algorithm>
#include <memory>
#include <set>
#include <simgrid/s4u.hpp>

#include "core/mesh.h"
#include "core/trace_analysis.h"
#include "sim/collectives.h"
#include "sim/cp_ring.h"
#include "sim/memory_estimate.h"
#include "sim/rank_actor.h"
#include "sim/replica_classes.h"
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

namespace {

// A DP ring hop of the full step: its members (same tp and pp coordinates, rank =
// tp + TP (dp + DP pp)) are TP ranks apart inside one stage's block of TP x DP ranks.
// Inside: every hop inside a node; Across: every hop between nodes (tp a multiple of a
// node's GPUs); Paired: two members to a node, in order (tp half a node's GPUs, a
// stage's block whole nodes), so every other hop crosses to the next node and each
// member has one hop inside and one across; Mixed: other.
enum class RingHops { Inside, Across, Paired, Mixed };
RingHops ring_hops(const StepCosts& costs, const Platform& p) {
  const int gpn = p.gpus_per_node, block = costs.tp * costs.dp;
  if (costs.tp * costs.dp * costs.schedule.pp <= gpn || gpn % block == 0) return RingHops::Inside;
  if (costs.tp % gpn == 0) return RingHops::Across;
  if (2 * costs.tp == gpn && block % gpn == 0) return RingHops::Paired;
  return RingHops::Mixed;
}

// A cp ring hop of the full step: its members (rank = tp + TP (c + CP (d + DP pp))) are
// TP ranks apart inside a block of TP x CP ranks.
RingHops cp_ring_hops(const StepCosts& costs, const Platform& p) {
  const int gpn = p.gpus_per_node, block = costs.tp * costs.cp;
  if (costs.tp * costs.dp * costs.schedule.pp <= gpn || gpn % block == 0) return RingHops::Inside;
  if (costs.tp % gpn == 0) return RingHops::Across;
  return RingHops::Mixed;
}

}  // namespace

std::string why_not_reducible(const StepCosts& costs, const Platform& p) {
  const int world = costs.tp * costs.schedule.pp * costs.dp;
  if (costs.dp <= 1) return "dp is 1";
  if (!p.xml_file.empty()) return "a SimGrid XML platform";
  if (p.cores_per_node > 0) return "ranks share CPU cores";
  if (!p.measured_latencies.empty()) return "message latencies are drawn";
  if (p.topology != Topology::Switch) return "a " + topology_name(p.topology) + " network (replicas share its uplinks unevenly)";
  if (p.hierarchical_collectives) return "hierarchical all-reduces";
  if (world > p.gpus_per_node && p.nics_per_node < p.gpus_per_node) return "replicas share NICs";
  const RingHops hops = ring_hops(costs, p);
  // (With 4 or more members to a node, the members whose both hops stay inside finish
  // their folded ring steps early in the full step: the replicas are not alike.)
  if (hops == RingHops::Mixed) return "DP ring hops of which only some cross nodes, not every other one";
  // Paired: replica 0's member is the first of its node, its ring step in from another
  // node — the hop that sets the ring's pace — and a transfer out and back through its
  // own links loads them as that hop does; exact while the core never limits a flow
  // (it carries all NICs' bandwidth and each flow through it leaves a NIC), in the full
  // step and in the reduced one alike — but for pipeline messages, which leave through
  // the member's NIC: in the full step that NIC carries no ring step out (its
  // node-mate's does), in the reduced one the stand-in's transfer shares it with them
  // (measured: the step within 0.2% of --exact, the bubble within 0.4%).
  if (hops == RingHops::Paired && p.oversubscription > 1)
    return "an oversubscribed core and DP ring hops of which only some cross nodes";
  // Paired, one direction each: the first member's NIC takes the ring step in, the second's
  // the step out.  A failed NIC puts two members on one NIC — in the full step one uses it
  // inbound, the other outbound; their stand-in transfers would share both directions
  // (measured: 28% slow).
  const bool failed_nic = std::any_of(p.nic_factor.begin(), p.nic_factor.end(), [](const auto& f) { return f.second == 0; });
  if (hops == RingHops::Paired && failed_nic) return "a failed NIC where DP ring hops alternate inside and across nodes";
  if (costs.cp > 1) {
    if (cp_ring_hops(costs, p) == RingHops::Mixed) return "cp ring hops of which only some cross nodes";
    if (!p.rank_speed.empty() || !p.nic_factor.empty() || p.jitter.active())
      return "what-ifs under context parallelism (a touched rank's cp ring partners wait for it)";
  }
  return "";
}

namespace {

core::Mesh simulated_mesh(int dp, int tp, int pp) { return core::Mesh::from_axes({dp, tp, pp}, core::all_axes()); }

// The simulated replicas' ranks where they sit in the full step (the reduced model).
ReducedLayout reduced_layout(const StepCosts& costs, const Platform& platform, const core::Mesh& mesh,
                             const ReplicaClasses& classes) {
  ReducedLayout layout;
  const core::Mesh full = simulated_mesh(costs.dp, costs.tp, costs.schedule.pp);
  for (int r = 0; r < mesh.world_size(); ++r)
    layout.placement.push_back(full.rank({classes.simulated[static_cast<size_t>(mesh.coord(r, core::Axis::Dp))],
                                          mesh.coord(r, core::Axis::Tp), mesh.coord(r, core::Axis::Pp)}));
  layout.full_ranks = full.world_size();
  layout.replicas = static_cast<double>(costs.dp) / static_cast<double>(classes.simulated.size());
  layout.ring_across_nodes = ring_hops(costs, platform) != RingHops::Inside;
  layout.cp_ring = costs.cp > 1;
  layout.cp_ring_across_nodes = layout.cp_ring && cp_ring_hops(costs, platform) == RingHops::Across;
  return layout;
}

// The (src, dst) pairs that exchange messages: tp ring neighbours, dp ring neighbours
// (their routes: sim/collectives.h), cp ring neighbours (a full simulation; the dp axis
// holds dp x cp replicas, cp innermost) and pipeline neighbours both ways.
std::vector<std::pair<int, int>> message_pairs(const StepCosts& costs, const Platform& platform, const core::Mesh& mesh,
                                               bool reduced) {
  using core::Axis;
  std::set<std::pair<int, int>> pairs;
  auto next = [&](int r, Axis axis, int step) {
    const std::vector<int> group = mesh.group(r, axis);
    const int n = static_cast<int>(group.size());
    return group[(mesh.coord(r, axis) + step + n) % n];
  };
  for (int r = 0; r < mesh.world_size(); ++r) {
    if (costs.tp > 1) pairs.insert({r, next(r, Axis::Tp, 1)});
    if (!reduced && costs.cp > 1) pairs.insert({r, cp_next_rank(mesh, r, costs.cp)});
    if (!reduced && costs.dp > 1) add_dp_routes(RingGroup{"dp", mesh.group(r, Axis::Dp), mesh.coord(r, Axis::Dp), 0},
                                               platform, pairs);
    if (costs.schedule.pp > 1) {
      pairs.insert({r, next(r, Axis::Pp, 1)});
      pairs.insert({r, next(r, Axis::Pp, -1)});
    }
  }
  return {pairs.begin(), pairs.end()};
}

// The step's trace, step time and bubble; the busy and exposed times of the replicas the
// simulated ones stand for copied from them, replica after replica.
void collect_result(SimStep& step, const core::Mesh& mesh, const ReplicaClasses& classes, SimResult& result) {
  core::Trace& t = step.recorder.trace;
  t.source = "sim";
  const int world = mesh.world_size();
  // The simulated dp axis holds the dp × cp replicas, cp innermost (the mesh's tp-cp-dp-pp).
  const int cp = step.costs.cp;
  for (int r = 0; r < world; ++r) {
    const int replica = classes.simulated[static_cast<size_t>(mesh.coord(r, core::Axis::Dp))];
    t.ranks.push_back({replica / cp, mesh.coord(r, core::Axis::Tp), mesh.coord(r, core::Axis::Pp), replica % cp});
  }
  for (const auto& e : t.events) result.step_time_s = std::max(result.step_time_s, e.end_us() / 1e6);
  // Each simulated rank's compute counted once for every replica it stands for.
  std::vector<double> weights;
  if (classes.unequal())
    for (int r = 0; r < world; ++r)
      weights.push_back(classes.stands_for[static_cast<size_t>(mesh.coord(r, core::Axis::Dp))]);
  result.bubble_fraction = core::measured_bubble_fraction(t, weights);
  for (const auto& e : t.events)
    result.events += classes.stands_for[static_cast<size_t>(mesh.coord(e.rank, core::Axis::Dp))];
  result.trace = std::move(t);
  result.classes = classes;
  if (classes.simulated.size() == classes.class_of.size()) return;  // every replica simulated
  const std::vector<double> busy = std::move(result.busy_s), exposed = std::move(result.exposed_comm_s);
  result.busy_s.clear();
  result.exposed_comm_s.clear();
  for (int stand_in : classes.class_of)
    for (int r = 0; r < world; ++r)
      if (mesh.coord(r, core::Axis::Dp) == stand_in) {
        result.busy_s.push_back(busy[static_cast<size_t>(r)]);
        result.exposed_comm_s.push_back(exposed[static_cast<size_t>(r)]);
      }
}

}  // namespace

ReplicaClasses simulated_replicas(const StepCosts& costs, const Platform& platform, bool exact) {
  if (exact || !why_not_reducible(costs, platform).empty()) return all_replicas(costs.dp);
  return replica_classes(costs, platform);
}

SimResult simulate_step(const StepCosts& costs, const Platform& platform, bool exact) {
  const bool reduced = !exact && why_not_reducible(costs, platform).empty();
  const ReplicaClasses classes = simulated_replicas(costs, platform, exact);
  const int simulated = static_cast<int>(classes.simulated.size());
  check_simulation_fits(costs, false, reduced ? simulated : 0);  // refused with a message, never killed silently
  const core::Mesh mesh = simulated_mesh(simulated, costs.tp, costs.schedule.pp);
  const int world = mesh.world_size();
  const ReducedLayout layout = reduced ? reduced_layout(costs, platform, mesh, classes) : ReducedLayout{};

  sg4::Engine engine = make_engine();
  const PlatformHosts hosts =
      build_platform(platform, world, message_pairs(costs, platform, mesh, reduced), reduced ? &layout : nullptr);
  std::unique_ptr<LatencyDraws> draws;
  if (!platform.measured_latencies.empty()) draws = std::make_unique<LatencyDraws>(platform.measured_latencies);

  SimResult result;
  result.busy_s.assign(world, 0);
  result.exposed_comm_s.assign(world, 0);
  result.cp_ring_exposed_s.assign(world, 0);
  SimStep step{costs, platform, mesh, hosts, draws.get(), result, {}, std::vector<sg4::ActorPtr>(world),
               std::vector<sg4::ActorPtr>(world), {}};
  step.reduced = result.reduced = reduced;
  if (costs.dp > 1) step.buckets = std::vector<BucketQueue>(static_cast<size_t>(world));
  step.full_rank = reduced ? layout.placement : std::vector<int>{};
  // A DP ring hop in the full step: inside the node when every rank is on one.
  step.dp_ring_latency = layout.ring_across_nodes ? platform.intra_latency + platform.inter_latency : platform.intra_latency;
  // One meeting place per DP group for its buckets, one for its parameter all-gathers.
  if (costs.dp > 1 && !draws && platform.cores_per_node == 0)
    for (int g = 0; g < costs.tp * costs.schedule.pp; ++g) {
      step.bucket_meetings.push_back(std::make_unique<ReplicaMeeting>(classes));
      step.gather_meetings.push_back(std::make_unique<ReplicaMeeting>(classes));
    }
  if (costs.dp > 1)
    for (int r = 0; r < world; ++r)
      start_actor("dp-stream" + std::to_string(r), hosts.ranks[r], [&step, r] { dp_stream(step, r); });
  for (int r = 0; r < world; ++r)
    start_actor("rank" + std::to_string(r), hosts.ranks[r], [&step, r] { rank_actor(step, r); });
  engine.run();
  collect_result(step, mesh, classes, result);
  return result;
}

double simulate_ring_allreduce(double bytes, int ranks, const Platform& platform, bool reduce_scatter) {
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
      if (reduce_scatter) ring_reduce_scatter(g, bytes, *actors, hop_latency(g, platform));
      else dp_allreduce(g, bytes, *actors, platform);
      end = std::max(end, sg4::Engine::get_clock());
    });
  engine.run();
  return end;
}

}  // namespace quintnet::sim
