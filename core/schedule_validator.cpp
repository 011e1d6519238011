#include "core/schedule_validator.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "core/schedule_interpreter.h"

namespace quintnet::core {

double OpCosts::cost(ActionKind kind, int chunks) const {
  const double v = chunks;
  switch (kind) {
    case ActionKind::Forward: return forward / v;
    case ActionKind::Backward: return (backward_input + backward_weight) / v;
    case ActionKind::BackwardInput: return backward_input / v;
    case ActionKind::BackwardWeight: return backward_weight / v;
    case ActionKind::GradSync: return grad_sync / v;
    case ActionKind::OptimizerStep: return optimizer;
    default: return 0.0;
  }
}

namespace {

struct Posted {
  double time;
  int from_rank;
  bool received = false;
};

class LockstepRun {
 public:
  LockstepRun(const Schedule& s, const OpCosts& costs) : s_(s), costs_(costs) {
    const int p = s.pp;
    ranks_.resize(p);
    stats_.timeline.resize(p);
    stats_.busy_per_rank.assign(p, 0.0);
    stats_.peak_activations.assign(p, 0);
    stats_.peak_pending_wgrad.assign(p, 0);
  }

  ScheduleStats run() {
    check_shape();
    const int p = s_.pp;
    for (int r = 0; r < p; ++r) steps_.push_back(interpret(s_, r));
    for (;;) {
      bool progress = false, all_done = true;
      for (int r = 0; r < p; ++r) {
        while (ranks_[r].pc < s_.ranks[r].size() && step(r)) progress = true;
        if (ranks_[r].pc < s_.ranks[r].size()) all_done = false;
      }
      if (all_done) break;
      if (!progress) report_deadlock();
    }
    check_complete();
    finish_stats();
    return std::move(stats_);
  }

 private:
  struct RankState {
    size_t pc = 0;
    double clock = 0.0;
    std::set<std::pair<int, int>> forward, backward, input_grad, weight_grad;  // (mb, chunk)
    std::set<std::pair<int, int>> act_in, grad_in;  // received (mb, chunk)
    std::set<int> synced_chunks;
    int in_flight = 0, pending_w = 0;
  };

  [[noreturn]] void fail(int r, const Action& a, const std::string& why) const {
    throw ScheduleError("schedule " + s_.name + ": rank " + std::to_string(r) + ", action " +
                        std::to_string(ranks_[r].pc) + " " + to_string(a) + ": " + why);
  }

  void check_shape() const {
    if (static_cast<int>(s_.ranks.size()) != s_.pp)
      throw ScheduleError("schedule " + s_.name + ": has " + std::to_string(s_.ranks.size()) +
                          " rank lists for pp " + std::to_string(s_.pp));
  }

  void check_action_fields(int r, const Action& a) const {
    if (a.chunk < 0 || a.chunk >= s_.chunks)
      fail(r, a, "chunk outside 0.." + std::to_string(s_.chunks - 1));
    if (a.kind != ActionKind::GradSync && a.kind != ActionKind::OptimizerStep &&
        (a.mb < 0 || a.mb >= s_.microbatches))
      fail(r, a, "microbatch outside 0.." + std::to_string(s_.microbatches - 1));
  }

  bool backward_done(const RankState& st, std::pair<int, int> key) const {
    return st.backward.count(key) || st.weight_grad.count(key);
  }
  // Has the gradient w.r.t. the output of (mb, chunk) reached rank r?
  bool output_grad_ready(int r, int mb, int chunk) const {
    const int stage = s_.stage(r, chunk);
    if (stage == s_.num_stages() - 1) return true;  // the loss is computed here
    if (s_.rank_of_stage(stage + 1) != r) return ranks_[r].grad_in.count({mb, chunk}) > 0;
    const auto key = std::make_pair(mb, s_.chunk_of_stage(stage + 1));
    return ranks_[r].backward.count(key) || ranks_[r].input_grad.count(key);
  }
  bool input_act_ready(int r, int mb, int chunk) const {
    const int stage = s_.stage(r, chunk);
    if (stage == 0) return true;
    if (s_.rank_of_stage(stage - 1) != r) return ranks_[r].act_in.count({mb, chunk}) > 0;
    return ranks_[r].forward.count({mb, s_.chunk_of_stage(stage - 1)}) > 0;
  }

  void record(int r, const Action& a, double start, double end) {
    stats_.timeline[r].push_back({a, start, end});
    ranks_[r].clock = end;
  }

  // Runs the next action of rank r if it can run; false when blocked in a RECV.
  bool step(int r) {
    RankState& st = ranks_[r];
    const Step& current = steps_[r][st.pc];
    const Action& a = current.action;
    check_action_fields(r, a);
    if (is_send(a.kind)) {
      post(r, current);
    } else if (is_recv(a.kind)) {
      if (!receive(r, current)) return false;  // blocked
    } else {
      check_order(r, a);
      double dur = costs_.per_action ? costs_.per_action(r, a) : -1.0;
      if (!(dur >= 0.0)) dur = costs_.cost(a.kind, s_.chunks);
      if (is_compute(a.kind)) stats_.busy_per_rank[r] += dur;
      record(r, a, st.clock, st.clock + dur);
    }
    ++st.pc;
    return true;
  }

  // A compute action, GRAD_SYNC or OPTIMIZER_STEP: runs only after what it needs.
  void check_order(int r, const Action& a) {
    RankState& st = ranks_[r];
    const auto key = std::make_pair(a.mb, a.chunk);
    switch (a.kind) {
      case ActionKind::Forward:
        if (st.forward.count(key)) fail(r, a, "microbatch runs this stage forward twice");
        if (!input_act_ready(r, a.mb, a.chunk))
          fail(r, a, "forward runs before its input activation arrived (no RECV_ACT before it)");
        st.forward.insert(key);
        stats_.peak_activations[r] = std::max(stats_.peak_activations[r], ++st.in_flight);
        break;
      case ActionKind::Backward:
      case ActionKind::BackwardInput:
        if (!st.forward.count(key)) fail(r, a, "backward before the forward of this microbatch");
        if (st.backward.count(key) || st.input_grad.count(key))
          fail(r, a, "microbatch runs this stage backward twice");
        if (!output_grad_ready(r, a.mb, a.chunk))
          fail(r, a, "backward runs before its output gradient arrived (no RECV_GRAD before it)");
        (a.kind == ActionKind::Backward ? st.backward : st.input_grad).insert(key);
        --st.in_flight;
        if (a.kind == ActionKind::BackwardInput)
          stats_.peak_pending_wgrad[r] = std::max(stats_.peak_pending_wgrad[r], ++st.pending_w);
        break;
      case ActionKind::BackwardWeight:
        if (!st.input_grad.count(key)) fail(r, a, "weight-gradient before its input-gradient (BI)");
        if (st.weight_grad.count(key)) fail(r, a, "weight-gradient runs twice");
        st.weight_grad.insert(key);
        --st.pending_w;
        break;
      case ActionKind::GradSync:
        for (int mb = 0; mb < s_.microbatches; ++mb)
          if (!backward_done(st, {mb, a.chunk}))
            fail(r, a, "gradient sync before the backward of microbatch " + std::to_string(mb) +
                           " on this chunk finished");
        if (!st.synced_chunks.insert(a.chunk).second) fail(r, a, "chunk synchronised twice");
        break;
      case ActionKind::OptimizerStep:
        if (static_cast<int>(st.synced_chunks.size()) != s_.chunks)
          fail(r, a, "optimizer step before every chunk's GRAD_SYNC");
        break;
      default:
        break;
    }
  }

  // SEND_*: posted at once (asynchronous), after what it carries was produced.
  void post(int r, const Step& current) {
    RankState& st = ranks_[r];
    const Action& a = current.action;
    const auto key = std::make_pair(a.mb, a.chunk);
    const bool grad = a.kind == ActionKind::SendGrad;
    const int to_stage = current.message->to_stage;
    if (to_stage < 0 || to_stage >= s_.num_stages())
      fail(r, a, grad ? "the first stage has no previous stage to send a gradient to"
                      : "the last stage has no next stage to send an activation to");
    if (grad ? !(st.backward.count(key) || st.input_grad.count(key)) : !st.forward.count(key))
      fail(r, a, grad ? "sends a gradient its backward has not produced yet"
                      : "sends an activation its forward has not produced yet");
    if (a.peer != s_.rank_of_stage(to_stage))
      fail(r, a, "stage " + std::to_string(to_stage) + " lives on rank " + std::to_string(s_.rank_of_stage(to_stage)) +
                     ", not on rank " + std::to_string(a.peer));
    if (!posted_.emplace(*current.message, Posted{st.clock, r}).second) fail(r, a, "this message is sent twice");
    record(r, a, st.clock, st.clock);
  }

  // RECV_*: false while its message has not been posted; done when its data arrived.
  bool receive(int r, const Step& current) {
    RankState& st = ranks_[r];
    const Action& a = current.action;
    const bool grad = a.kind == ActionKind::RecvGrad;
    const int from_stage = current.message->from_stage;
    if (from_stage < 0 || from_stage >= s_.num_stages())
      fail(r, a, grad ? "the last stage receives no gradient" : "the first stage receives no activation");
    if (a.peer != s_.rank_of_stage(from_stage))
      fail(r, a, "stage " + std::to_string(from_stage) + " lives on rank " +
                     std::to_string(s_.rank_of_stage(from_stage)) + ", not on rank " + std::to_string(a.peer));
    auto it = posted_.find(*current.message);
    if (it == posted_.end()) return false;
    if (it->second.received) fail(r, a, "this message is received twice");
    it->second.received = true;
    (grad ? st.grad_in : st.act_in).insert({a.mb, a.chunk});
    const double t = st.clock;
    record(r, a, t, costs_.p2p_rendezvous ? std::max(t, it->second.time) + costs_.p2p
                                          : std::max(t, it->second.time + costs_.p2p));
    return true;
  }

  [[noreturn]] void report_deadlock() const {
    // Prefer the precise diagnosis: a receive whose send appears nowhere.
    std::string waits;
    for (int r = 0; r < s_.pp; ++r) {
      const auto& st = ranks_[r];
      if (st.pc >= s_.ranks[r].size()) continue;
      const Action& a = s_.ranks[r][st.pc];
      const ActionKind want = a.kind == ActionKind::RecvAct ? ActionKind::SendAct : ActionKind::SendGrad;
      const int from_chunk = s_.chunk_of_stage(steps_[r][st.pc].message->from_stage);
      const auto& peer_list = s_.ranks[a.peer];
      const Action match{want, a.mb, from_chunk, r};
      if (std::find(peer_list.begin() + ranks_[a.peer].pc, peer_list.end(), match) == peer_list.end())
        throw ScheduleError("schedule " + s_.name + ": rank " + std::to_string(r) + ", action " +
                            std::to_string(st.pc) + " " + to_string(a) + ": no matching " +
                            to_string(match) + " on rank " + std::to_string(a.peer));
      waits += (waits.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " waits at " +
               to_string(a);
    }
    throw ScheduleError("schedule " + s_.name + ": deadlock: " + waits);
  }

  void check_complete() const {
    for (const auto& [message, msg] : posted_)
      if (!msg.received) {
        throw ScheduleError("schedule " + s_.name + ": rank " + std::to_string(msg.from_rank) + ": " +
                            (message.grad ? "SEND_GRAD" : "SEND_ACT") + " of microbatch " + std::to_string(message.mb) +
                            " to rank " + std::to_string(s_.rank_of_stage(message.to_stage)) + " is never received");
      }
    for (int stage = 0; stage < s_.num_stages(); ++stage) {
      const int r = s_.rank_of_stage(stage), c = s_.chunk_of_stage(stage);
      const auto& st = ranks_[r];
      for (int mb = 0; mb < s_.microbatches; ++mb) {
        const std::string where = " on stage " + std::to_string(stage) + " (rank " + std::to_string(r) +
                                  ", chunk " + std::to_string(c) + ")";
        if (!st.forward.count({mb, c}))
          throw ScheduleError("schedule " + s_.name + ": microbatch " + std::to_string(mb) +
                              " never runs forward" + where);
        if (st.input_grad.count({mb, c}) && !st.weight_grad.count({mb, c}))
          throw ScheduleError("schedule " + s_.name + ": microbatch " + std::to_string(mb) +
                              " never runs its weight-gradient (BW)" + where);
        if (!backward_done(st, {mb, c}))
          throw ScheduleError("schedule " + s_.name + ": microbatch " + std::to_string(mb) +
                              " never runs backward" + where);
      }
    }
  }

  void finish_stats() {
    const int p = s_.pp;
    for (const auto& rank : stats_.timeline)
      for (const auto& t : rank) stats_.step_time = std::max(stats_.step_time, t.end);
    double busy = 0.0;
    stats_.bubble_per_rank.assign(p, 0.0);
    for (int r = 0; r < p; ++r) {
      busy += stats_.busy_per_rank[r];
      if (stats_.step_time > 0) stats_.bubble_per_rank[r] = 1.0 - stats_.busy_per_rank[r] / stats_.step_time;
    }
    if (stats_.step_time > 0) stats_.bubble_fraction = 1.0 - busy / (p * stats_.step_time);
  }

  const Schedule& s_;
  const OpCosts& costs_;
  std::vector<RankState> ranks_;
  std::vector<std::vector<Step>> steps_;  // per rank: its actions, read (core/schedule_interpreter.h)
  std::map<Message, Posted> posted_;
  ScheduleStats stats_;
};

}  // namespace

ScheduleStats simulate_schedule(const Schedule& schedule, const OpCosts& costs) {
  for (double c : {costs.forward, costs.backward_input, costs.backward_weight, costs.p2p,
                   costs.grad_sync, costs.optimizer})
    if (!(c >= 0.0) || c > 1e15)
      throw ConfigError("costs: every op cost must be a finite number >= 0, got " + std::to_string(c));
  return LockstepRun(schedule, costs).run();
}

}  // namespace quintnet::core
