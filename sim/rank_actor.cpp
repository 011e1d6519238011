#include "sim/rank_actor.h"

#include <algorithm>
#include <cmath>

#include "core/schedule_interpreter.h"
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
    buckets_ = costs_.dp > 1 ? std::max(1, static_cast<int>(std::ceil(costs_.dp_grad_bytes[pp_] / v_ / costs_.bucket_bytes)))
                            : 0;
    // On a shared CPU an op's tensor-parallel all-reduces sit between its pieces (after
    // each attention and MLP block), as in the executor: while a rank waits for one,
    // the other ranks' ops get its core.  On GPUs the op computes, then all-reduces
    // (the same time for the rank, far fewer simulated messages).
    interleave_tp_ = w.platform.cores_per_node > 0 && costs_.tp > 1 && costs_.tp_allreduces_per_op > 0;
    overlap_tp_ = costs_.tp_overlap && costs_.tp > 1 && costs_.tp_allreduces_per_op > 0 && !interleave_tp_;
  }

  // The rank's schedule, then the end of its DP stream.
  void run() {
    core::run_schedule(core::interpret(costs_.schedule, pp_), *this);
    if (costs_.dp > 1) to_stream(-1.0);
  }

 private:
  void forward(const core::Step& st) override { compute(costs_.forward_s[pp_] / v_, st); }

  void backward(const core::Step& st) override {
    // Without dp_overlap the buckets wait for GRAD_SYNC.
    const bool releases = costs_.dp > 1 && st.completes_gradients && costs_.dp_overlap;
    switch (st.action.kind) {
      case core::ActionKind::Backward:
        compute((costs_.backward_input_s[pp_] + costs_.backward_weight_s[pp_]) / v_, st, releases,
                costs_.tp_allreduces_recompute);
        break;
      case core::ActionKind::BackwardInput:
        compute(costs_.backward_input_s[pp_] / v_, st, false, costs_.tp_allreduces_recompute);
        break;
      default: compute(costs_.backward_weight_s[pp_] / v_, st, releases); break;
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
    // The executor's step end: the last stage's loss statistics go to every stage (a
    // broadcast over the pipeline), then the gradient norm is summed over tp and over
    // pp before the optimizer may clip; each waits for the group's slowest member.
    // Modelled as ring all-reduces of one number.
    const Platform& p = w_.platform;
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
    const double t0 = sg4::Engine::get_clock(), bytes = costs_.dp_grad_bytes[pp_];
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
  // piece, as the executor's bucket hooks fire.
  // `recompute_tp`: the TP all-reduces of a recomputed forward (inside a B or BI).
  void compute(double seconds, const core::Step& st, bool releases_gradients = false, int recompute_tp = 0) {
    if (overlap_tp_) return compute_overlapping_tp(seconds, st, releases_gradients, recompute_tp);
    seconds *= jitter_.factor();
    const double t0 = sg4::Engine::get_clock();
    const int pieces = interleave_tp_ ? costs_.tp_allreduces_per_op : 1;
    const int parts = releases_gradients ? buckets_ : 1;
    double communicating = 0;
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
  void compute_overlapping_tp(double seconds, const core::Step& st, bool releases_gradients, int recompute_tp) {
    seconds *= jitter_.factor();
    const double t0 = sg4::Engine::get_clock();
    sg4::ExecPtr exec = sg4::this_actor::exec_init(seconds * speed_)->set_host(w_.hosts.compute[r_])->start();
    tp_allreduces(st, costs_.tp_allreduces_per_op + recompute_tp);
    exec->wait();
    const double t1 = sg4::Engine::get_clock();
    w_.result.busy_s[r_] += seconds;
    w_.recorder.add(r_, st.lane, st.kind, st.name, t0, t1, st.action.mb, st.action.chunk);
    for (int k = 0; releases_gradients && k < buckets_; ++k) release_bucket();
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
  int buckets_ = 0;  // DP gradient buckets per chunk
  bool interleave_tp_ = false;
  bool overlap_tp_ = false;  // tp_overlap on GPUs (compute_overlapping_tp)
};

}  // namespace

void rank_actor(SimStep& w, int r) {
  w.ranks[r] = sg4::Actor::self();
  sg4::this_actor::yield();  // every actor registers before the first message
  RankActor(w, r).run();
}

}  // namespace quintnet::sim
