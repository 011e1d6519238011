#include "sim/simulation.h"

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <simgrid/s4u.hpp>

#include "core/mesh.h"
#include "core/schedule_trace.h"
#include "core/trace_analysis.h"
#include "sim/simgrid_compat.h"

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {
namespace {

// The ranks of a group and this rank's index in it; collectives count their calls so
// every member's n-th all-reduce meets the others' n-th.
struct RingGroup {
  std::string name;
  std::vector<int> ranks;
  int index = 0;
  int calls = 0;
};

sg4::Mailbox* eager_mailbox(const std::string& name, int receiver, const std::vector<sg4::ActorPtr>& actors) {
  sg4::Mailbox* box = sg4::Mailbox::by_name(name);
  // A permanent receiver makes the transfer start as soon as the send is posted.
  if (receiver < static_cast<int>(actors.size()) && actors[receiver]) box->set_receiver(actors[receiver]);
  return box;
}

// Message latencies drawn from a calibration's measured ones (equally likely), with a
// fixed seed: on a real machine the hops' latencies spread (0.1 to 30 ms on 2 busy
// cores), which keeps ranks from running in lockstep, so how their ops overlap on
// shared cores — and the step — depends on the spread, not only on the mean.
// A collective's members share its draw (it ends for all of them together once the
// last one arrived, as the measured ones do).
class LatencyDraws {
 public:
  explicit LatencyDraws(const std::vector<double>& measured) : measured_(measured), rng_(20261203) {}
  double sum(int hops) {
    std::uniform_int_distribution<size_t> pick(0, measured_.size() - 1);
    double total = 0;
    for (int k = 0; k < hops; ++k) total += measured_[pick(rng_)];
    return total;
  }
  // The draw of collective `tag` (`members` ranks ask for it, the first one draws).
  double shared(const std::string& tag, int members, int hops) {
    auto [it, fresh] = shared_.try_emplace(tag, 0.0, members);
    if (fresh) it->second.first = sum(hops);
    const double value = it->second.first;
    if (--it->second.second == 0) shared_.erase(it);
    return value;
  }

 private:
  std::vector<double> measured_;
  std::mt19937_64 rng_;
  std::map<std::string, std::pair<double, int>> shared_;  // tag -> (draw, members yet to ask)
};

// A ring all-reduce of `bytes`: 2(n-1) steps of bytes/n to the ring successor.  The
// steps are folded into one transfer of 2(n-1)/n x bytes over the same route (the same
// bytes on the same links) plus the 2(n-1) - 1 further route latencies, which keeps
// the closed form 2(n-1)(a + S/(nB)) exact and the simulation at one message per
// member and collective, what lets a 1024-GPU step run in seconds.  `count` folds
// that many back-to-back all-reduces of the same size (the 2 per layer of an op).
// `steps` ring steps of `chunk` bytes each to the ring successor, folded into one
// transfer plus the steps - 1 further route latencies — or, with `draws` (the routes
// then have no latency), a drawn latency for each step.
void ring_phase(const RingGroup& g, const std::string& tag, int steps, double chunk,
                const std::vector<sg4::ActorPtr>& actors, double latency, LatencyDraws* draws = nullptr) {
  const int n = static_cast<int>(g.ranks.size());
  if (n <= 1 || steps <= 0) return;
  const int next = g.ranks[(g.index + 1) % n], me = g.ranks[g.index];
  static char token;
  sg4::CommPtr send = eager_mailbox(tag + std::to_string(next), next, actors)
                          ->put_async(&token, static_cast<uint64_t>(steps * chunk));
  eager_mailbox(tag + std::to_string(me), me, actors)->get<char>();
  send->wait();
  if (draws) sg4::this_actor::sleep_for(draws->shared(tag, n, steps));
  else if (steps > 1 && latency > 0) sg4::this_actor::sleep_for((steps - 1) * latency);
}

void ring_allreduce(RingGroup& g, double bytes, const std::vector<sg4::ActorPtr>& actors, double latency, int count = 1,
                    LatencyDraws* draws = nullptr) {
  const int n = static_cast<int>(g.ranks.size());
  if (n <= 1 || count <= 0) return;
  const std::string tag = g.name + ":" + std::to_string(g.calls++) + ":";
  ring_phase(g, tag, count * 2 * (n - 1), bytes / n, actors, latency, draws);
}

// The parts of a group that spans nodes with the same number of members on each:
// this member's node-mates and its peers (same position) on the other nodes.
bool hierarchical_parts(const RingGroup& g, int gpus_per_node, RingGroup& local, RingGroup& across) {
  std::map<int, std::vector<int>> by_node;
  for (int r : g.ranks) by_node[r / gpus_per_node].push_back(r);
  const size_t k = by_node.begin()->second.size();
  if (by_node.size() < 2 || k < 2) return false;
  for (const auto& [node, members] : by_node)
    if (members.size() != k) return false;
  const int me = g.ranks[g.index];
  const auto& mine = by_node[me / gpus_per_node];
  const int position = static_cast<int>(std::find(mine.begin(), mine.end(), me) - mine.begin());
  local = {g.name + ".node" + std::to_string(me / gpus_per_node), mine, position, 0};
  across = {g.name + ".pos" + std::to_string(position), {}, 0, 0};
  for (const auto& [node, members] : by_node) {
    if (members[position] == me) across.index = static_cast<int>(across.ranks.size());
    across.ranks.push_back(members[position]);
  }
  return true;
}

// Latency of a ring hop: inside a node, or (when the group spans nodes) the slowest hop.
double hop_latency(const RingGroup& g, const Platform& p) {
  const bool one_node = g.ranks.front() / p.gpus_per_node == g.ranks.back() / p.gpus_per_node;
  return one_node ? p.intra_latency : p.intra_latency + p.inter_latency;
}

// Hierarchical all-reduce (NCCL's tree-free two-level scheme): reduce-scatter inside
// the node (k members), all-reduce of each 1/k share across the N nodes, all-gather
// inside the node: 2(k-1)(a_in + S/(k B_in)) + 2(N-1)(a_x + S/(k N B_x)).
void hierarchical_allreduce(RingGroup& g, double bytes, const std::vector<sg4::ActorPtr>& actors,
                            const Platform& p) {
  RingGroup local, across;
  if (!hierarchical_parts(g, p.gpus_per_node, local, across)) {
    ring_allreduce(g, bytes, actors, hop_latency(g, p));
    return;
  }
  const std::string tag = g.name + ":" + std::to_string(g.calls++) + ":";
  const int k = static_cast<int>(local.ranks.size()), nodes = static_cast<int>(across.ranks.size());
  ring_phase(local, tag + "rs:", k - 1, bytes / k, actors, p.intra_latency);
  ring_phase(across, tag + "x:", 2 * (nodes - 1), bytes / (static_cast<double>(k) * nodes), actors,
             p.intra_latency + p.inter_latency);
  ring_phase(local, tag + "ag:", k - 1, bytes / k, actors, p.intra_latency);
}

// A DP all-reduce the way the platform does them: one ring or two levels.
void dp_allreduce(RingGroup& g, double bytes, const std::vector<sg4::ActorPtr>& actors, const Platform& p,
                  LatencyDraws* draws = nullptr) {
  if (p.hierarchical_collectives) hierarchical_allreduce(g, bytes, actors, p);
  else ring_allreduce(g, bytes, actors, hop_latency(g, p), 1, draws);
}

// The routes a DP group's member needs: to its ring successor, and for the two-level
// all-reduce to its successors inside the node and across nodes.
void add_dp_routes(const RingGroup& g, const Platform& p, std::set<std::pair<int, int>>& pairs) {
  const int me = g.ranks[g.index], n = static_cast<int>(g.ranks.size());
  pairs.insert({me, g.ranks[(g.index + 1) % n]});
  RingGroup local, across;
  if (p.hierarchical_collectives && hierarchical_parts(g, p.gpus_per_node, local, across)) {
    pairs.insert({me, local.ranks[(local.index + 1) % local.ranks.size()]});
    pairs.insert({me, across.ranks[(across.index + 1) % across.ranks.size()]});
  }
}

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

std::string message_box(int to_rank, bool grad, int mb, int stage) {
  return "p2p:" + std::to_string(to_rank) + (grad ? ":g:" : ":a:") + std::to_string(mb) + ":" + std::to_string(stage);
}

struct Recorder {
  core::Trace trace;
  // An arrow from a message's send to the end of its receive, as executor traces have.
  void flow(int from_rank, double sent, int to_rank, double received) {
    trace.flows.push_back({trace.flows.size() + 1, from_rank, core::Lane::P2P, sent * 1e6, to_rank, core::Lane::P2P,
                           received * 1e6});
  }
  void add(int rank, core::Lane lane, const std::string& kind, const std::string& name, double t0, double t1,
           int mb = -1, int chunk = -1, double bytes = 0, int peer = -1) {
    core::TraceEvent e;
    e.name = name;
    e.kind = kind;
    e.rank = rank;
    e.lane = lane;
    e.ts_us = t0 * 1e6;
    e.dur_us = (t1 - t0) * 1e6;
    e.mb = mb;
    e.chunk = chunk;
    e.bytes = static_cast<std::int64_t>(bytes);
    e.peer = peer;
    trace.events.push_back(std::move(e));
  }
};

}  // namespace

SimResult simulate_step(const SimPlan& plan, const Platform& platform) {
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
  std::unique_ptr<LatencyDraws> owned_draws;
  if (!platform.measured_latencies.empty()) owned_draws = std::make_unique<LatencyDraws>(platform.measured_latencies);
  LatencyDraws* draws = owned_draws.get();

  auto recorder = std::make_shared<Recorder>();
  auto actors = std::make_shared<std::vector<sg4::ActorPtr>>(world);
  auto posted = std::make_shared<std::map<std::string, double>>();  // message -> when its send was posted
  SimResult result;
  result.busy_s.assign(world, 0);
  result.exposed_comm_s.assign(world, 0);
  // DP streams: one per rank when dp > 1, all-reducing gradient buckets in order.
  auto streams = std::make_shared<std::vector<sg4::ActorPtr>>(world);
  if (plan.dp > 1)
    for (int r = 0; r < world; ++r)
      start_actor("dp-stream" + std::to_string(r), hosts.ranks[r], [&, r, recorder, streams] {
        (*streams)[r] = sg4::Actor::self();
        const int pp = mesh.coord(r, "pp"), tp = mesh.coord(r, "tp"), dp = mesh.coord(r, "dp");
        RingGroup group{"dps" + std::to_string(pp) + "." + std::to_string(tp), {}, dp, 0};
        for (int d = 0; d < plan.dp; ++d) group.ranks.push_back(mesh.rank({d, tp, pp}));
        sg4::Mailbox* requests = sg4::Mailbox::by_name("dpq:" + std::to_string(r));
        requests->set_receiver(sg4::Actor::self());
        for (;;) {
          const double* bytes = requests->get<double>();
          if (*bytes < 0) break;  // the step is over
          const double t0 = sg4::Engine::get_clock();
          dp_allreduce(group, *bytes, *streams, platform, draws);
          recorder->add(r, core::Lane::DpCollective, "allreduce", "dp bucket", t0, sg4::Engine::get_clock(), -1, -1,
                        *bytes);
          static char done;
          sg4::Mailbox::by_name("dpdone:" + std::to_string(r))->put_init(&done, 0)->detach();
        }
      });
  for (int r = 0; r < world; ++r) {
    start_actor("rank" + std::to_string(r), hosts.ranks[r], [&, r, recorder, actors, posted, streams] {
      (*actors)[r] = sg4::Actor::self();
      sg4::this_actor::yield();  // every actor registers before the first message
      const int pp = mesh.coord(r, "pp"), tp = mesh.coord(r, "tp"), dp = mesh.coord(r, "dp");
      RingGroup tp_group{"tp" + std::to_string(pp) + "." + std::to_string(dp), {}, tp, 0};
      for (int t = 0; t < plan.tp; ++t) tp_group.ranks.push_back(mesh.rank({dp, t, pp}));
      RingGroup pp_group{"pp" + std::to_string(dp) + "." + std::to_string(tp), {}, pp, 0};
      for (int p = 0; p < s.pp; ++p) pp_group.ranks.push_back(mesh.rank({dp, tp, p}));
      auto rank_of_stage = [&](int stage) {
        return mesh.rank({dp, tp, s.rank_of_stage(stage)});
      };
      // Eager: the bytes move as soon as the send is posted.  Rendezvous: the message
      // waits in its mailbox until the receiver asks for it.
      auto p2p_mailbox = [&](const std::string& box, int receiver) {
        return platform.p2p_rendezvous ? sg4::Mailbox::by_name(box) : eager_mailbox(box, receiver, *actors);
      };
      // Op times are at a full core / GPU; a rank with a share of a core takes longer.
      const double speed = platform.gpu_flops();
      // The last backward of each chunk, where the chunk's gradients become final.
      std::map<int, size_t> last_backward;
      for (size_t i = 0; i < s.ranks[pp].size(); ++i) {
        const core::Action& a = s.ranks[pp][i];
        if (a.kind == core::ActionKind::Backward || a.kind == core::ActionKind::BackwardWeight) last_backward[a.chunk] = i;
      }
      const double v = s.chunks;
      const int buckets = plan.dp > 1 ? std::max(1, static_cast<int>(std::ceil(plan.dp_grad_bytes[pp] / v / plan.bucket_bytes))) : 0;
      std::vector<std::unique_ptr<double>> requests;  // payloads outlive the messages
      sg4::Mailbox* to_stream = plan.dp > 1 ? sg4::Mailbox::by_name("dpq:" + std::to_string(r)) : nullptr;
      // On a shared CPU an op's tensor-parallel all-reduces sit between its pieces (after
      // each attention and MLP block), as in the executor: while a rank waits for one,
      // the other ranks' ops get its core.  On GPUs the op computes, then all-reduces
      // (the same time for the rank, far fewer simulated messages).
      const bool interleave_tp = platform.cores_per_node > 0 && plan.tp > 1 && plan.tp_allreduces_per_op > 0;
      auto tp_allreduces = [&](const core::Action& a, int count) {
        const double c0 = sg4::Engine::get_clock();
        ring_allreduce(tp_group, plan.tp_allreduce_bytes, *actors, hop_latency(tp_group, platform), count, draws);
        const double c1 = sg4::Engine::get_clock();
        result.exposed_comm_s[r] += c1 - c0;
        recorder->add(r, core::Lane::TpCollective, "allreduce", "tp allreduce", c0, c1, a.mb, a.chunk,
                      plan.tp_allreduce_bytes);
        return c1 - c0;
      };
      auto compute = [&](double seconds, const std::string& kind, const core::Action& a, bool releases_gradients = false) {
        const double t0 = sg4::Engine::get_clock();
        const int pieces = interleave_tp ? plan.tp_allreduces_per_op : 1;
        const int parts = releases_gradients ? buckets : 1;  // gradient buckets leave during the last piece
        double communicating = 0;
        for (int k = 0; k < pieces; ++k) {
          const bool last = k == pieces - 1;
          for (int j = 0; j < (last ? parts : 1); ++j) {
            if (seconds > 0) execute_on(hosts.compute[r], seconds / pieces / (last ? parts : 1) * speed);
            if (last && releases_gradients) {
              requests.push_back(std::make_unique<double>(plan.dp_grad_bytes[pp] / v / buckets));
              to_stream->put_init(requests.back().get(), 0)->detach();
            }
          }
          if (interleave_tp) communicating += tp_allreduces(a, 1);
        }
        const double t1 = sg4::Engine::get_clock();
        result.busy_s[r] += t1 - t0 - communicating;
        recorder->add(r, core::Lane::Compute, kind, core::action_name(a.kind) + std::to_string(a.mb), t0, t1, a.mb,
                      a.chunk);
        if (!interleave_tp && plan.tp > 1 && plan.tp_allreduces_per_op > 0) tp_allreduces(a, plan.tp_allreduces_per_op);
      };
      static char payload;
      for (size_t index = 0; index < s.ranks[pp].size(); ++index) {
        const core::Action& a = s.ranks[pp][index];
        const int stage = s.stage(pp, a.chunk);
        const bool releases = plan.dp > 1 && last_backward[a.chunk] == index;
        switch (a.kind) {
          case core::ActionKind::Forward: compute(plan.forward_s[pp] / v, "forward", a); break;
          case core::ActionKind::Backward:
            compute((plan.backward_input_s[pp] + plan.backward_weight_s[pp]) / v, "backward", a, releases);
            break;
          case core::ActionKind::BackwardInput: compute(plan.backward_input_s[pp] / v, "backward-input", a); break;
          case core::ActionKind::BackwardWeight:
            compute(plan.backward_weight_s[pp] / v, "backward-weight", a, releases);
            break;
          case core::ActionKind::SendAct:
          case core::ActionKind::SendGrad: {
            const bool grad = a.kind == core::ActionKind::SendGrad;
            const int to = rank_of_stage(stage + (grad ? -1 : 1));
            const double t0 = sg4::Engine::get_clock();
            const std::string box = message_box(to, grad, a.mb, stage + (grad ? -1 : 1));
            (*posted)[box] = t0;
            // Detached: the receiver's RECV waits for the bytes; the sender keeps no
            // handle (SimGrid scans an actor's pending activities linearly).
            p2p_mailbox(box, to)->put_init(&payload, static_cast<uint64_t>(plan.p2p_bytes))->detach();
            recorder->add(r, core::Lane::P2P, "send", core::action_name(a.kind) + std::string(" ") + std::to_string(a.mb),
                          t0, t0, a.mb, a.chunk, plan.p2p_bytes, to);
            break;
          }
          case core::ActionKind::RecvAct:
          case core::ActionKind::RecvGrad: {
            const bool grad = a.kind == core::ActionKind::RecvGrad;
            const int from = rank_of_stage(stage + (grad ? 1 : -1));
            const double t0 = sg4::Engine::get_clock();
            const std::string box = message_box(r, grad, a.mb, stage);
            p2p_mailbox(box, r)->get<char>();
            if (draws) sg4::this_actor::sleep_for(draws->sum(1));
            const double t1 = sg4::Engine::get_clock();
            // Waiting for the sender to get there is a bubble; waiting for the bytes is communication.
            result.exposed_comm_s[r] += t1 - std::max(t0, (*posted)[box]);
            recorder->flow(from, (*posted)[box], r, t1);
            recorder->add(r, core::Lane::P2P, "recv", core::action_name(a.kind) + std::string(" ") + std::to_string(a.mb),
                          t0, t1, a.mb, a.chunk, plan.p2p_bytes, from);
            break;
          }
          case core::ActionKind::GradSync: {
            if (plan.dp <= 1) break;
            const double t0 = sg4::Engine::get_clock();
            sg4::Mailbox* done = eager_mailbox("dpdone:" + std::to_string(r), r, *actors);
            for (int k = 0; k < buckets; ++k) done->get<char>();
            const double t1 = sg4::Engine::get_clock();
            result.exposed_comm_s[r] += t1 - t0;
            recorder->add(r, core::Lane::DpCollective, "grad-sync", "GRAD_SYNC", t0, t1, -1, a.chunk);
            break;
          }
          case core::ActionKind::OptimizerStep: {
            // The executor's step end: the last stage's loss statistics go to every
            // stage (a broadcast over the pipeline), then the gradient norm is summed
            // over tp and over pp before the optimizer may clip; each waits for the
            // group's slowest member.  Modelled as ring all-reduces of one number.
            if (plan.step_end_collectives) ring_allreduce(pp_group, 8, *actors, hop_latency(pp_group, platform), 1, draws);
            const double t0 = sg4::Engine::get_clock();
            if (plan.step_end_collectives) {
              ring_allreduce(tp_group, 8, *actors, hop_latency(tp_group, platform), 1, draws);
              ring_allreduce(pp_group, 8, *actors, hop_latency(pp_group, platform), 1, draws);
            }
            if (plan.optimizer_s > 0) execute_on(hosts.compute[r], plan.optimizer_s * speed);
            recorder->add(r, core::Lane::Compute, "optimizer", "OPTIMIZER_STEP", t0, sg4::Engine::get_clock());
            break;
          }
        }
      }
      if (to_stream) {
        requests.push_back(std::make_unique<double>(-1.0));
        to_stream->put(requests.back().get(), 0);
      }
    });
  }
  engine.run();

  core::Trace& t = recorder->trace;
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
