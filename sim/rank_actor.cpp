#include "sim/rank_actor.h"

#include <algorithm>
#include <cmath>

#include "core/schedule_interpreter.h"
#include "sim/cp_ring.h"
#include "sim/what_if.h"

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {

void Recorder::flow(int from_rank, double sent, int to_rank, double received) {
  trace.flows.push_back({trace.flows.size() + 1, from_rank, core::Lane::P2P, sent * 1e6, to_rank, core::Lane::P2P,
                         received * 1e6});
}

void Recorder::add(int rank, core::Lane lane, const std::string& kind, const std::string& name, double t0, double t1,
                   int mb, int chunk, double bytes, int peer) {
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

namespace {

// `rank`'s group along `axis`, its mailboxes named `name`.  A reduced step's dp groups
// are empty: one replica stands for all (sim/simulation.h).
RingGroup mesh_group(const SimStep& w, int rank, core::Axis axis, const std::string& name) {
  const bool stand_in = axis == core::Axis::Dp && w.reduced;
  return RingGroup{name, stand_in ? std::vector<int>{} : w.mesh.group(rank, axis), w.mesh.coord(rank, axis), 0};
}

// "dps1.0": a group's name from the coordinates of the other two axes.
std::string group_name(const std::string& prefix, int a, int b) {
  return prefix + std::to_string(a) + "." + std::to_string(b);
}

}  // namespace

void dp_stream(SimStep& w, int r) {
  w.streams[r] = sg4::Actor::self();
  using core::Axis;
  RingGroup group = mesh_group(w, r, Axis::Dp, group_name("dps", w.mesh.coord(r, Axis::Pp), w.mesh.coord(r, Axis::Tp)));
  BucketQueue& queue = w.buckets[static_cast<size_t>(r)];
  for (;;) {
    queue.released->acquire();
    const double bytes = queue.sizes.front();
    queue.sizes.pop_front();
    if (bytes < 0) break;  // the step is over
    const double t0 = sg4::Engine::get_clock();
    // ZeRO-1: the bucket is reduce-scattered (each member keeps the sum of its 1/dp).
    const bool scatter = w.costs.zero_stage >= 1;
    const int steps = (scatter ? 1 : 2) * (w.costs.dp - 1);
    ReplicaMeeting* meeting = w.meeting(w.bucket_meetings, r);
    if (meeting) meeting->arrive(w.mesh.coord(r, Axis::Dp));
    if (w.reduced)
      mirrored_ring(bytes, w.costs.dp, steps, w.hosts.ranks[r], w.hosts.ring_peers[r], w.dp_ring_latency);
    else if (scatter)
      ring_reduce_scatter(group, bytes, w.streams, hop_latency(group, w.platform));
    else
      dp_allreduce(group, bytes, w.streams, w.platform, w.draws);
    if (meeting) meeting->leave();
    w.recorder.add(r, core::Lane::DpCollective, scatter ? "reducescatter" : "allreduce", "dp bucket", t0,
                   sg4::Engine::get_clock(), -1, -1, bytes);
    queue.done->release();
  }
}

namespace {

// A message's mailbox: named by the message (core::Message) and its receiving rank.
std::string message_box(const core::Message& m, int to_rank) {
  return "p2p:" + std::to_string(to_rank) + (m.grad ? ":g:" : ":a:") + std::to_string(m.mb) + ":" +
         std::to_string(m.to_stage);
}

// One rank's actions as SimGrid activities.
class RankActor : public core::ScheduleHandler {
 public:
  RankActor(SimStep& w, int r)
      : w_(w), costs_(w.costs), r_(r), pp_(w.mesh.coord(r, core::Axis::Pp)), tp_(w.mesh.coord(r, core::Axis::Tp)),
        dp_(w.mesh.coord(r, core::Axis::Dp)), v_(costs_.schedule.chunks),
        // A straggler's host runs at full speed and its ops count 1/factor as many flops:
        // each takes 1/factor as long, whatever the host model (shared cores included).
        speed_(w.platform.gpu_flops() / w.platform.speed_factor(w.full_rank_of(r))),
        jitter_(w.platform.jitter, w.full_rank_of(r)) {
    tp_group_ = mesh_group(w, r, core::Axis::Tp, group_name("tp", pp_, dp_));
    pp_group_ = mesh_group(w, r, core::Axis::Pp, group_name("pp", dp_, tp_));
    dp_group_ = mesh_group(w, r, core::Axis::Dp, group_name("dpag", pp_, tp_));
    // A tied head's copy is all-reduced between the pipeline's first and last ranks
    // (exec/pp/tied_gradients.h); the middle ones take no part.
    const int pp = static_cast<int>(pp_group_.ranks.size());
    if (pp > 1 && (pp_ == 0 || pp_ == pp - 1))
      ends_group_ = RingGroup{group_name("ppends", dp_, tp_), {pp_group_.ranks.front(), pp_group_.ranks.back()},
                              pp_ == 0 ? 0 : 1, 0};
    buckets_ = costs_.dp > 1 ? std::max(1, static_cast<int>(std::ceil(costs_.dp_grad_bytes[pp_] / v_ / costs_.bucket_bytes)))
                            : 0;
    // On a shared CPU an op's tensor-parallel all-reduces sit between its pieces (after
    // each attention and MLP block), as in the executor: while a rank waits for one,
    // the other ranks' ops get its core.  On GPUs the op computes, then all-reduces
    // (the same time for the rank, far fewer simulated messages).
    interleave_tp_ = w.platform.cores_per_node > 0 && costs_.tp > 1 && costs_.tp_allreduces_per_op > 0;
    overlap_tp_ = costs_.tp_overlap && costs_.tp > 1 && costs_.tp_allreduces_per_op > 0 && !interleave_tp_;
    if (costs_.cp > 1) route_cp_ring(w);
  }

  // The rank's schedule, then the end of its DP stream.
  void run() {
    core::run_schedule(core::interpret(costs_.schedule, pp_), *this);
    if (costs_.dp > 1) to_stream(-1.0);
  }

 private:
  // Which ring attention an op runs under context parallelism (sim/cp_ring.h).
  enum class Ring { None, Forward, Backward };

  void forward(const core::Step& st) override { compute(costs_.forward_s[pp_] / v_, st, Ring::Forward); }

  void backward(const core::Step& st) override {
    // Without dp_overlap the buckets wait for GRAD_SYNC.
    const bool releases = costs_.dp > 1 && st.completes_gradients && costs_.dp_overlap;
    switch (st.action.kind) {
      case core::ActionKind::Backward:
        compute((costs_.backward_input_s[pp_] + costs_.backward_weight_s[pp_]) / v_, st, Ring::Backward, releases,
                costs_.tp_allreduces_recompute);
        break;
      case core::ActionKind::BackwardInput:
        compute(costs_.backward_input_s[pp_] / v_, st, Ring::Backward, false, costs_.tp_allreduces_recompute);
        break;
      default: compute(costs_.backward_weight_s[pp_] / v_, st, Ring::None, releases); break;
    }
  }

  void send(const core::Step& st) override {
    const int to = rank_of_stage(st.message->to_stage);
    const double t0 = sg4::Engine::get_clock();
    // Detached: the receiver's RECV waits for the bytes; the sender keeps no handle
    // (SimGrid scans an actor's pending activities linearly).  The payload is when the
    // send was posted (the receiver's exposed time and flow arrow start there).
    p2p_mailbox(message_box(*st.message, to), to)
        ->put_init(new double(t0), static_cast<uint64_t>(message_bytes()))
        ->detach([](void* posted) { delete static_cast<double*>(posted); });  // if it never arrives
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, t0, st.action.mb, st.action.chunk, message_bytes(), to);
  }

  // Scatter/gather (Narayanan et al. §4.1): each tp rank sends its 1/tp of the stage's
  // output (identical on every tp rank), the receiving stage all-gathers it over tp.
  bool scatter_gather() const { return costs_.pp_scatter_gather && costs_.tp > 1; }
  double message_bytes() const { return scatter_gather() ? costs_.p2p_bytes / costs_.tp : costs_.p2p_bytes; }

  void recv(const core::Step& st) override {
    const int from = rank_of_stage(st.message->from_stage);
    const double t0 = sg4::Engine::get_clock();
    // The sender made the mailbox eager (set its receiver) where the platform's are.
    const std::unique_ptr<double> posted(sg4::Mailbox::by_name(message_box(*st.message, r_))->get<double>());
    if (w_.draws) sg4::this_actor::sleep_for(w_.draws->sum(1));
    const double t1 = sg4::Engine::get_clock();
    // Waiting for the sender to get there is a bubble; waiting for the bytes is communication.
    w_.result.exposed_comm_s[r_] += t1 - std::max(t0, *posted);
    w_.recorder.flow(from, *posted, r_, t1);
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, t1, st.action.mb, st.action.chunk, message_bytes(), from);
    if (scatter_gather()) {  // the whole tensor back on every tp rank, over NVLink
      ring_all_gather(tp_group_, costs_.p2p_bytes, w_.ranks, hop_latency(tp_group_, w_.platform));
      const double t2 = sg4::Engine::get_clock();
      w_.result.exposed_comm_s[r_] += t2 - t1;
      w_.recorder.add(r_, core::Lane::TpCollective, "allgather", "pipeline message all-gather", t1, t2, st.action.mb,
                      st.action.chunk, costs_.p2p_bytes);
    }
  }

  void grad_sync(const core::Step& st) override {
    if (costs_.dp <= 1) return;
    const double t0 = sg4::Engine::get_clock();
    if (!costs_.dp_overlap)  // the chunk's buckets, all at once now that its backward is done
      for (int k = 0; k < buckets_; ++k) release_bucket();
    for (int k = 0; k < buckets_; ++k) w_.buckets[static_cast<size_t>(r_)].done->acquire();
    const double t1 = sg4::Engine::get_clock();
    w_.result.exposed_comm_s[r_] += t1 - t0;
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, t1, -1, st.action.chunk);
  }

  void optimizer_step(const core::Step& st) override {
    // The executor's step end: a tied head's copy of the embedding gets the gradient of
    // both copies (an all-reduce between the pipeline's ends), the last stage's loss statistics go
    // to every stage (a broadcast over the pipeline), then the gradient norm is summed
    // over tp and over pp before the optimizer may clip; each waits for the group's
    // slowest member.  The last three are modelled as ring all-reduces of one number.
    const Platform& p = w_.platform;
    if (costs_.tied_gradient_bytes > 0 && !ends_group_.ranks.empty())
      ring_allreduce(ends_group_, costs_.tied_gradient_bytes, w_.ranks, hop_latency(ends_group_, p), 1, w_.draws);
    if (costs_.step_end_collectives) ring_allreduce(pp_group_, 8, w_.ranks, hop_latency(pp_group_, p), 1, w_.draws);
    const double t0 = sg4::Engine::get_clock();
    if (costs_.step_end_collectives) {
      ring_allreduce(tp_group_, 8, w_.ranks, hop_latency(tp_group_, p), 1, w_.draws);
      ring_allreduce(pp_group_, 8, w_.ranks, hop_latency(pp_group_, p), 1, w_.draws);
    }
    if (costs_.optimizer_s > 0) execute_on(w_.hosts.compute[r_], costs_.optimizer_s * jitter_.factor() * speed_);
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, sg4::Engine::get_clock());
    if (costs_.zero_stage >= 1 && costs_.dp > 1) gather_parameters();
  }

  // ZeRO-1: each member updated 1/dp of the stage's parameters; all of them go to every
  // member before the next forward.
  void gather_parameters() {
    const double t0 = sg4::Engine::get_clock(), bytes = costs_.dp_gather_bytes[pp_];
    ReplicaMeeting* meeting = w_.meeting(w_.gather_meetings, r_);
    if (meeting) meeting->arrive(dp_);
    if (w_.reduced)
      mirrored_ring(bytes, costs_.dp, costs_.dp - 1, w_.hosts.ranks[r_], w_.hosts.ring_peers[r_], w_.dp_ring_latency);
    else
      ring_all_gather(dp_group_, bytes, w_.ranks, hop_latency(dp_group_, w_.platform));
    if (meeting) meeting->leave();
    const double t1 = sg4::Engine::get_clock();
    w_.result.exposed_comm_s[r_] += t1 - t0;
    w_.recorder.add(r_, core::Lane::DpCollective, "allgather", "dp parameters", t0, t1, -1, -1, bytes);
  }

  // An op of `seconds` (at a full core / GPU: a rank with a share of a core takes
  // longer), cut into pieces by its TP all-reduces on a shared CPU; a backward that
  // completes the chunk's gradients hands its DP buckets to the stream during its last
  // piece, as the executor's bucket hooks fire.  Under context parallelism the op's ring
  // attention runs first (its attention is part of `seconds`).
  // `recompute_tp`: the TP all-reduces of a recomputed forward (inside a B or BI).
  void compute(double seconds, const core::Step& st, Ring ring, bool releases_gradients = false, int recompute_tp = 0) {
    const double jitter = jitter_.factor();
    seconds *= jitter;
    const double t0 = sg4::Engine::get_clock();
    double communicating = ring_attention(st, ring, jitter, seconds);  // (then seconds is the op's rest)
    if (overlap_tp_) return compute_overlapping_tp(seconds, st, t0, releases_gradients, recompute_tp);
    const int pieces = interleave_tp_ ? costs_.tp_allreduces_per_op : 1;
    const int parts = releases_gradients ? buckets_ : 1;
    for (int k = 0; k < pieces; ++k) {
      const bool last = k == pieces - 1;
      for (int j = 0; j < (last ? parts : 1); ++j) {
        if (seconds > 0) execute_on(w_.hosts.compute[r_], seconds / pieces / (last ? parts : 1) * speed_);
        if (last && releases_gradients) release_bucket();
      }
      if (interleave_tp_) communicating += tp_allreduces(st, 1);
    }
    const double t1 = sg4::Engine::get_clock();
    w_.result.busy_s[r_] += t1 - t0 - communicating;
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, t1, st.action.mb, st.action.chunk);
    const int after = (interleave_tp_ ? 0 : costs_.tp_allreduces_per_op) + recompute_tp;
    if (costs_.tp > 1 && after > 0) tp_allreduces(st, after);
  }

  // tp_overlap: the op's TP all-reduces run beside its computation, so only what they
  // take beyond it shows; its DP buckets leave when both are done.
  void compute_overlapping_tp(double seconds, const core::Step& st, double t0, bool releases_gradients,
                              int recompute_tp) {
    sg4::ExecPtr exec = sg4::this_actor::exec_init(seconds * speed_)->set_host(w_.hosts.compute[r_])->start();
    tp_allreduces(st, costs_.tp_allreduces_per_op + recompute_tp);
    exec->wait();
    const double t1 = sg4::Engine::get_clock();
    w_.result.busy_s[r_] += seconds + ring_busy_s_;
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, t1, st.action.mb, st.action.chunk);
    for (int k = 0; releases_gradients && k < buckets_; ++k) release_bucket();
  }

  // The op's ring attention (sim/cp_ring.h) with its attention taken out of `seconds`;
  // returns the time its hops kept the rank waiting.
  double ring_attention(const core::Step& st, Ring ring, double jitter, double& seconds) {
    ring_busy_s_ = 0;
    if (costs_.cp <= 1 || ring == Ring::None) return 0;
    const CpRingCosts& c = costs_.cp_ring[static_cast<size_t>(pp_)];
    // An op's layers' hops merged (sim/cp_ring.h): each arrives the others' latencies later.
    const double block = c.block_bytes / v_, extra = std::max(0.0, c.layers / v_ - 1) * cp_latency_;
    std::vector<RingStep> steps;
    if (ring == Ring::Backward) {
      if (c.attention_recompute_s > 0) steps = forward_ring(costs_.cp, c.attention_recompute_s / v_ * jitter, block, extra);
      for (const RingStep& s : backward_ring(costs_.cp, c.attention_backward_s / v_ * jitter, block, extra))
        steps.push_back(s);
    } else {
      steps = forward_ring(costs_.cp, c.attention_forward_s / v_ * jitter, block, extra);
    }
    double attention = 0;
    for (RingStep& s : steps) {
      attention += s.attention_s;
      // A calibrated machine's routes have no latency: each layer's hop draws its own.
      if (w_.draws && s.bytes > 0) s.extra_latency = w_.draws->sum(std::max(1, static_cast<int>(std::lround(c.layers / v_))));
    }
    seconds = std::max(0.0, seconds - attention);
    const RingRun run = run_ring(steps, cp_route_, w_.hosts.compute[r_], speed_);
    ring_busy_s_ = run.end - run.start - run.exposed;
    w_.result.exposed_comm_s[r_] += run.exposed;
    w_.result.cp_ring_exposed_s[r_] += run.exposed;
    const std::string what = ring == Ring::Forward ? "keys and values" : "keys, values and their gradients";
    w_.recorder.add(r_, core::Lane::P2P, "cp-ring",
                    "cp ring: " + what + " (" + std::to_string(run.hops) + " hops" +
                        (cp_next_ >= 0 ? " to rank " + std::to_string(cp_next_) : std::string(", mirrored")) + ")",
                    run.start, run.end, st.action.mb, st.action.chunk, run.bytes, cp_next_);
    return run.exposed;
  }

  // Where the rank's ring hops go: the next cp rank of its replica's cp group (the
  // simulated dp axis holds dp × cp replicas, cp innermost), or its cp peer host in the
  // reduced model (sim/simulation.h).
  void route_cp_ring(SimStep& w) {
    if (!w.draws) cp_latency_ = cp_hop(costs_.cp, costs_.tp, w.platform).latency;  // drawn latencies: none on routes
    if (w.reduced) {
      cp_route_.host = w.hosts.ranks[r_];
      cp_route_.peer = w.hosts.cp_peers[r_];
      return;
    }
    cp_next_ = cp_next_rank(w.mesh, r_, costs_.cp);
    cp_route_.inbox = eager_mailbox("cp:" + std::to_string(r_), r_, w.ranks);
    cp_route_.outbox = eager_mailbox("cp:" + std::to_string(cp_next_), cp_next_, w.ranks);
  }

  // One of the chunk's DP gradient buckets to the rank's DP stream.
  void release_bucket() { to_stream(costs_.dp_grad_bytes[pp_] / v_ / buckets_); }
  void to_stream(double bytes) {
    BucketQueue& queue = w_.buckets[static_cast<size_t>(r_)];
    queue.sizes.push_back(bytes);
    queue.released->release();
  }

  double tp_allreduces(const core::Step& st, int count) {
    const double c0 = sg4::Engine::get_clock();
    ring_allreduce(tp_group_, costs_.tp_allreduce_bytes, w_.ranks, hop_latency(tp_group_, w_.platform), count,
                   w_.draws);
    const double c1 = sg4::Engine::get_clock();
    w_.result.exposed_comm_s[r_] += c1 - c0;
    w_.recorder.add(r_, core::Lane::TpCollective, "allreduce", "tp allreduce", c0, c1, st.action.mb, st.action.chunk,
                    costs_.tp_allreduce_bytes);
    return c1 - c0;
  }

  // Eager: the bytes move as soon as the send is posted.  Rendezvous: the message
  // waits in its mailbox until the receiver asks for it.
  sg4::Mailbox* p2p_mailbox(const std::string& box, int receiver) {
    return w_.platform.p2p_rendezvous ? sg4::Mailbox::by_name(box) : eager_mailbox(box, receiver, w_.ranks);
  }

  int rank_of_stage(int stage) const { return pp_group_.ranks[costs_.schedule.rank_of_stage(stage)]; }

  SimStep& w_;
  const StepCosts& costs_;
  const int r_, pp_, tp_, dp_;
  const double v_;      // chunks per rank: an op of a chunk is 1/v of the rank's share
  const double speed_;  // flop/s of a full GPU or core
  OpJitter jitter_;     // what-if: each op's time times a drawn factor
  RingGroup tp_group_, pp_group_, dp_group_;
  RingGroup ends_group_;  // the pipeline's first and last ranks, for a tied head; empty elsewhere
  int buckets_ = 0;  // DP gradient buckets per chunk
  bool interleave_tp_ = false;
  bool overlap_tp_ = false;  // tp_overlap on GPUs (compute_overlapping_tp)
  CpRingRoute cp_route_;     // cp > 1: where the ring's hops go
  int cp_next_ = -1;         // the next cp rank (a full simulation)
  double cp_latency_ = 0;    // a ring hop's route latency
  double ring_busy_s_ = 0;   // the time the op's ring computed
};

}  // namespace

void rank_actor(SimStep& w, int r) {
  w.ranks[r] = sg4::Actor::self();
  sg4::this_actor::yield();  // every actor registers before the first message
  RankActor(w, r).run();
}

}  // namespace quintnet::sim
