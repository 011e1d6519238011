#include "core/trace_analysis.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace quintnet::core {

double measured_bubble_fraction(const Trace& trace) {
  struct Window {
    double lo = 1e300, hi = -1e300, busy = 0;
  };
  std::map<int, Window> steps;
  for (const auto& e : trace.events) {
    if (e.lane != Lane::Compute || e.kind == "optimizer") continue;
    Window& w = steps[e.step];
    w.lo = std::min(w.lo, e.ts_us);
    w.hi = std::max(w.hi, e.end_us());
    w.busy += e.dur_us;
  }
  double sum = 0;
  int counted = 0;
  for (const auto& [step, w] : steps) {
    if (w.hi <= w.lo || trace.num_ranks() == 0) continue;
    sum += 1.0 - w.busy / (static_cast<double>(trace.num_ranks()) * (w.hi - w.lo));
    ++counted;
  }
  return counted ? sum / counted : 0.0;
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

OpCosts median_op_costs(const Trace& trace, int chunks_per_rank) {
  std::map<std::string, std::vector<double>> durations;
  for (const auto& e : trace.events)
    if (e.lane == Lane::Compute) durations[e.kind].push_back(e.dur_us);
  auto typical = [&](const char* kind) {
    auto it = durations.find(kind);
    return it == durations.end() ? 0.0 : median(it->second) * chunks_per_rank;
  };
  OpCosts c;
  c.forward = typical("forward");
  if (durations.count("backward")) {
    c.backward_input = typical("backward");  // unsplit: all of it in tb
    c.backward_weight = 0.0;
  } else {
    c.backward_input = typical("backward-input");
    c.backward_weight = typical("backward-weight");
  }
  std::vector<double> transfers;
  for (const auto& f : trace.flows) transfers.push_back(std::max(0.0, f.to_ts_us - f.from_ts_us));
  c.p2p = median(transfers);
  return c;
}

}  // namespace quintnet::core
