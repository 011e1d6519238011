#include "sim/collectives.h"

#include <algorithm>
#include <utility>

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {

sg4::Mailbox* eager_mailbox(const std::string& name, int receiver, const std::vector<sg4::ActorPtr>& actors) {
  sg4::Mailbox* box = sg4::Mailbox::by_name(name);
  // A permanent receiver makes the transfer start as soon as the send is posted.
  if (receiver < static_cast<int>(actors.size()) && actors[receiver]) box->set_receiver(actors[receiver]);
  return box;
}

double LatencyDraws::sum(int hops) {
  std::uniform_int_distribution<size_t> pick(0, measured_.size() - 1);
  double total = 0;
  for (int k = 0; k < hops; ++k) total += measured_[pick(rng_)];
  return total;
}

double LatencyDraws::shared(const std::string& tag, int members, int hops) {
  auto [it, fresh] = shared_.try_emplace(tag, 0.0, members);
  if (fresh) it->second.first = sum(hops);
  const double value = it->second.first;
  if (--it->second.second == 0) shared_.erase(it);
  return value;
}

namespace {

// The member's inbox and its ring successor's (RingGroup): looked up, their receivers
// set, until both receivers have registered; kept from then on.
std::pair<sg4::Mailbox*, sg4::Mailbox*> mailboxes(RingGroup& g, const std::vector<sg4::ActorPtr>& actors) {
  if (g.inbox) return {g.inbox, g.outbox};
  const int n = static_cast<int>(g.ranks.size());
  const int next = g.ranks[(g.index + 1) % n], me = g.ranks[g.index];
  sg4::Mailbox* inbox = eager_mailbox(g.name + ":" + std::to_string(me), me, actors);
  sg4::Mailbox* outbox = eager_mailbox(g.name + ":" + std::to_string(next), next, actors);
  if (actors[static_cast<size_t>(next)] && actors[static_cast<size_t>(me)]) {
    g.inbox = inbox;
    g.outbox = outbox;
  }
  return {inbox, outbox};
}

// A ring all-reduce of `bytes`: 2(n-1) steps of bytes/n to the ring successor.  The
// steps are folded into one transfer of 2(n-1)/n x bytes over the same route (the same
// bytes on the same links) plus the 2(n-1) - 1 further route latencies, which keeps
// the closed form 2(n-1)(a + S/(nB)) exact and the simulation at one message per
// member and collective, what lets a 1024-GPU step run in seconds.  `count` folds
// that many back-to-back all-reduces of the same size (the 2 per layer of an op).
// `steps` ring steps of `chunk` bytes each to the ring successor, folded into one
// transfer plus the steps - 1 further route latencies — or, with `draws` (the routes
// then have no latency), a drawn latency for each step, shared by the members of the
// collective `tag`.
void ring_phase(RingGroup& g, const std::string& tag, int steps, double chunk, const std::vector<sg4::ActorPtr>& actors,
                double latency, LatencyDraws* draws = nullptr) {
  const int n = static_cast<int>(g.ranks.size());
  if (n <= 1 || steps <= 0) return;
  const auto [inbox, outbox] = mailboxes(g, actors);
  static char token;
  sg4::CommPtr send = outbox->put_async(&token, static_cast<uint64_t>(steps * chunk));
  inbox->get<char>();
  send->wait();
  if (draws) sg4::this_actor::sleep_for(draws->shared(tag, n, steps));
  else if (steps > 1 && latency > 0) sg4::this_actor::sleep_for((steps - 1) * latency);
}

}  // namespace

void ring_allreduce(RingGroup& g, double bytes, const std::vector<sg4::ActorPtr>& actors, double latency, int count,
                    LatencyDraws* draws) {
  const int n = static_cast<int>(g.ranks.size());
  if (n <= 1 || count <= 0) return;
  const int call = g.calls++;
  ring_phase(g, draws ? g.name + ":" + std::to_string(call) : std::string(), count * 2 * (n - 1), bytes / n, actors,
             latency, draws);
}

void ring_reduce_scatter(RingGroup& g, double bytes, const std::vector<sg4::ActorPtr>& actors, double latency) {
  const int n = static_cast<int>(g.ranks.size());
  if (n <= 1) return;
  ring_phase(g, "", n - 1, bytes / n, actors, latency);
}

void mirrored_ring(double bytes, int members, int steps, sg4::Host* member, sg4::Host* ring_peer, double latency) {
  if (members <= 1 || steps <= 0) return;
  sg4::Comm::sendto(member, ring_peer, static_cast<uint64_t>(steps * (bytes / members)));
  if (steps > 1 && latency > 0) sg4::this_actor::sleep_for((steps - 1) * latency);
}

namespace {

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

}  // namespace

double hop_latency(const RingGroup& g, const Platform& p) {
  const bool one_node = g.ranks.front() / p.gpus_per_node == g.ranks.back() / p.gpus_per_node;
  return one_node ? p.intra_latency : p.intra_latency + p.inter_latency;
}

namespace {

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
  const int k = static_cast<int>(local.ranks.size()), nodes = static_cast<int>(across.ranks.size());
  ring_phase(local, "", k - 1, bytes / k, actors, p.intra_latency);
  ring_phase(across, "", 2 * (nodes - 1), bytes / (static_cast<double>(k) * nodes), actors,
             p.intra_latency + p.inter_latency);
  ring_phase(local, "", k - 1, bytes / k, actors, p.intra_latency);
}

}  // namespace

void dp_allreduce(RingGroup& g, double bytes, const std::vector<sg4::ActorPtr>& actors, const Platform& p,
                  LatencyDraws* draws) {
  if (p.hierarchical_collectives) hierarchical_allreduce(g, bytes, actors, p);
  else ring_allreduce(g, bytes, actors, hop_latency(g, p), 1, draws);
}

void add_dp_routes(const RingGroup& g, const Platform& p, std::set<std::pair<int, int>>& pairs) {
  const int me = g.ranks[g.index], n = static_cast<int>(g.ranks.size());
  pairs.insert({me, g.ranks[(g.index + 1) % n]});
  RingGroup local, across;
  if (p.hierarchical_collectives && hierarchical_parts(g, p.gpus_per_node, local, across)) {
    pairs.insert({me, local.ranks[(local.index + 1) % local.ranks.size()]});
    pairs.insert({me, across.ranks[(across.index + 1) % across.ranks.size()]});
  }
}

}  // namespace quintnet::sim
