#include "core/schedule_trace.h"

#include <map>

#include "core/schedule_interpreter.h"

namespace quintnet::core {

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

  // Each send's event, by message, for the arrows to the receives.
  std::map<Message, std::pair<int, double>> sends;
  std::vector<std::vector<Step>> steps;
  for (int r = 0; r < s.pp; ++r) {
    steps.push_back(interpret(s, r));
    for (std::size_t i = 0; i < stats.timeline[r].size(); ++i) {
      const TimedAction& ta = stats.timeline[r][i];
      const Step& st = steps[r][i];
      const Action& a = ta.action;
      TraceEvent e;
      e.name = st.name;
      e.kind = st.kind;
      e.rank = r;
      e.lane = st.lane;
      e.ts_us = ta.start * us_per_unit;
      e.dur_us = (ta.end - ta.start) * us_per_unit;
      e.mb = a.mb;
      e.chunk = a.chunk;
      e.peer = a.peer;
      t.events.push_back(e);
      if (is_send(a.kind)) sends[*st.message] = {r, e.ts_us};
    }
  }
  std::uint64_t next_id = 1;
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t i = 0; i < stats.timeline[r].size(); ++i) {
      const TimedAction& ta = stats.timeline[r][i];
      const ActionKind kind = ta.action.kind;
      if (kind != ActionKind::RecvAct && kind != ActionKind::RecvGrad) continue;
      const auto it = sends.find(*steps[r][i].message);
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
