#include "core/schedule_trace.h"

#include <map>
#include <tuple>

namespace quintnet::core {

const char* trace_kind(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward: return "forward";
    case ActionKind::Backward: return "backward";
    case ActionKind::BackwardInput: return "backward-input";
    case ActionKind::BackwardWeight: return "backward-weight";
    case ActionKind::SendAct:
    case ActionKind::SendGrad: return "send";
    case ActionKind::RecvAct:
    case ActionKind::RecvGrad: return "recv";
    case ActionKind::GradSync: return "grad-sync";
    case ActionKind::OptimizerStep: return "optimizer";
  }
  return "?";
}

namespace {

Lane lane_of(ActionKind kind) {
  if (is_p2p(kind)) return Lane::P2P;
  if (kind == ActionKind::GradSync) return Lane::DpCollective;
  return Lane::Compute;
}

std::string event_name(const Action& a) {
  if (a.kind == ActionKind::GradSync) return "GRAD_SYNC c" + std::to_string(a.chunk);
  if (a.kind == ActionKind::OptimizerStep) return "OPTIMIZER_STEP";
  std::string name = std::string(action_name(a.kind)) + std::to_string(a.mb);
  if (is_p2p(a.kind)) name = std::string(action_name(a.kind)) + " " + std::to_string(a.mb);
  return name;
}

}  // namespace

Trace schedule_to_trace(const Schedule& s, const ScheduleStats& stats, const OpCosts& costs, double us_per_unit) {
  Trace t;
  t.source = "schedule";
  t.plan = {{"schedule", s.name}, {"pp", s.pp}, {"microbatches", s.microbatches}, {"chunks", s.chunks}};
  t.platform = {{"costs", {{"tf", costs.forward}, {"tb", costs.backward_input}, {"tw", costs.backward_weight},
                           {"p2p", costs.p2p}}},
                {"time_unit_us", us_per_unit}};
  t.summary = {{"step_time_us", stats.step_time * us_per_unit},
               {"bubble_fraction", stats.bubble_fraction},
               {"bubble_fraction_per_rank", stats.bubble_per_rank},
               {"peak_activations", stats.peak_activations}};
  for (int r = 0; r < s.pp; ++r) t.ranks.push_back({0, 0, r});

  // Sends by message identity (gradient?, microbatch, receiving stage) -> send event.
  std::map<std::tuple<bool, int, int>, std::pair<int, double>> sends;
  for (int r = 0; r < s.pp; ++r)
    for (const TimedAction& ta : stats.timeline[r]) {
      const Action& a = ta.action;
      TraceEvent e;
      e.name = event_name(a);
      e.kind = trace_kind(a.kind);
      e.rank = r;
      e.lane = lane_of(a.kind);
      e.ts_us = ta.start * us_per_unit;
      e.dur_us = (ta.end - ta.start) * us_per_unit;
      e.mb = a.mb;
      e.chunk = a.chunk;
      e.peer = a.peer;
      t.events.push_back(e);
      if (a.kind == ActionKind::SendAct || a.kind == ActionKind::SendGrad) {
        const bool grad = a.kind == ActionKind::SendGrad;
        const int to_stage = s.stage(r, a.chunk) + (grad ? -1 : 1);
        sends[{grad, a.mb, to_stage}] = {r, e.ts_us};
      }
    }
  std::uint64_t next_id = 1;
  for (int r = 0; r < s.pp; ++r)
    for (const TimedAction& ta : stats.timeline[r]) {
      const Action& a = ta.action;
      if (a.kind != ActionKind::RecvAct && a.kind != ActionKind::RecvGrad) continue;
      const auto it = sends.find({a.kind == ActionKind::RecvGrad, a.mb, s.stage(r, a.chunk)});
      if (it == sends.end()) continue;
      TraceFlow f;
      f.id = next_id++;
      f.from_rank = it->second.first;
      f.from_ts_us = it->second.second;
      f.to_rank = r;
      // When the data arrived: the end of the receive, as the executor records it.
      f.to_ts_us = std::max(ta.end * us_per_unit, f.from_ts_us);
      t.flows.push_back(f);
    }
  return t;
}

}  // namespace quintnet::core
