#include "core/trace_analysis.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/schedule_interpreter.h"
#include "core/schedule_trace.h"

namespace quintnet::core {

double measured_bubble_fraction(const Trace& trace, const std::vector<double>& rank_weights) {
  struct Window {
    double lo = 1e300, hi = -1e300, busy = 0;
  };
  std::map<int, Window> steps;
  for (const auto& e : trace.events) {
    if (e.lane != Lane::Compute || e.kind == "optimizer") continue;
    Window& w = steps[e.step];
    w.lo = std::min(w.lo, e.ts_us);
    w.hi = std::max(w.hi, e.end_us());
    w.busy += rank_weights.empty() ? e.dur_us : e.dur_us * rank_weights[static_cast<size_t>(e.rank)];
  }
  double ranks = static_cast<double>(trace.num_ranks());
  if (!rank_weights.empty()) ranks = std::accumulate(rank_weights.begin(), rank_weights.end(), 0.0);
  double sum = 0;
  int counted = 0;
  for (const auto& [step, w] : steps) {
    if (w.hi <= w.lo || trace.num_ranks() == 0) continue;
    sum += 1.0 - w.busy / (ranks * (w.hi - w.lo));
    ++counted;
  }
  return counted ? sum / counted : 0.0;
}

std::map<int, double> step_spans_us(const Trace& trace) {
  std::map<int, std::pair<double, double>> span;
  for (const auto& e : trace.events) {
    auto [it, fresh] = span.try_emplace(e.step, e.ts_us, e.end_us());
    it->second.first = std::min(it->second.first, e.ts_us);
    it->second.second = std::max(it->second.second, e.end_us());
  }
  std::map<int, double> out;
  for (const auto& [step, s] : span) out[step] = s.second - s.first;
  return out;
}

double mean_step_time_us(const Trace& trace) {
  const std::map<int, double> spans = step_spans_us(trace);
  double sum = 0;
  for (const auto& [step, span] : spans) sum += span;
  return spans.empty() ? 0.0 : sum / static_cast<double>(spans.size());
}

int median_step(const Trace& trace) {
  std::vector<std::pair<double, int>> by_span;  // (span, step): ties go to the lower step
  for (const auto& [step, span] : step_spans_us(trace)) by_span.emplace_back(span, step);
  if (by_span.empty()) throw TraceError("the trace has no events, so no step to compare");
  std::sort(by_span.begin(), by_span.end());
  const double middle = by_span[by_span.size() / 2].first;
  // The lowest-numbered step of that span: the first pair (middle, step) in the order.
  return std::lower_bound(by_span.begin(), by_span.end(), std::make_pair(middle, INT_MIN))->second;
}

double median_step_time_us(const Trace& trace) { return step_spans_us(trace).at(median_step(trace)); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

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
  // Message latency.  Executor traces (Gloo, NCCL) move a message once both sides have
  // posted it, so its latency runs from the later of send and receive to the receive's
  // end, and every message measures it; so do simulated traces of a rendezvous platform.
  // Other simulated traces' messages are eager: only those whose receiver was already
  // waiting show the latency (otherwise the gap includes the receiver's own work before
  // it got to the receive).
  c.p2p_rendezvous = trace.source == "exec" ||
                     (trace.platform.is_object() && trace.platform.value("p2p", "") == "rendezvous");
  std::map<std::pair<int, long long>, double> recv_start;  // (rank, end in us) -> start
  for (const auto& e : trace.events)
    if (e.lane == Lane::P2P && e.kind == "recv") recv_start[{e.rank, std::llround(e.end_us())}] = e.ts_us;
  std::vector<double> all, waited;
  for (const auto& f : trace.flows) {
    auto it = recv_start.find({f.to_rank, std::llround(f.to_ts_us)});
    const double posted = it == recv_start.end() ? f.from_ts_us : std::max(f.from_ts_us, it->second);
    if (c.p2p_rendezvous) {
      all.push_back(std::max(0.0, f.to_ts_us - posted));
      continue;
    }
    const double gap = std::max(0.0, f.to_ts_us - f.from_ts_us);
    all.push_back(gap);
    if (it != recv_start.end() && it->second <= f.from_ts_us) waited.push_back(gap);
  }
  // Rendezvous latencies: the mean, as the bubble adds them up; on an oversubscribed CPU
  // they spread from 0.1 to 30 ms (whether the peers' threads get a core), and their
  // median was 25-40% below the mean and predicted bubbles 0.08 too small (docs/EXECUTOR.md).
  if (c.p2p_rendezvous)
    c.p2p = all.empty() ? 0.0 : std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size());
  else
    c.p2p = median(waited.empty() ? all : waited);
  return c;
}

double replayed_bubble_fraction(const Trace& trace, const Schedule& schedule) {
  const OpCosts typical = median_op_costs(trace, schedule.chunks);
  using Key = std::tuple<int, int, std::string, int, int>;  // step, pp rank, kind, mb, chunk
  std::map<Key, double> measured;
  std::set<int> steps;
  for (const auto& e : trace.events) {
    if (e.lane != Lane::Compute || e.kind == "optimizer" || e.rank >= static_cast<int>(trace.ranks.size())) continue;
    const RankCoords& c = trace.ranks[e.rank];
    if (c.dp != 0 || c.tp != 0) continue;
    measured[{e.step, c.pp, e.kind, e.mb, e.chunk}] = e.dur_us;
    steps.insert(e.step);
  }
  double sum = 0;
  for (int step : steps) {
    OpCosts costs = typical;
    costs.per_action = [&](int rank, const Action& a) {
      auto it = measured.find({step, rank, trace_kind(a.kind), a.mb, a.chunk});
      return it == measured.end() ? -1.0 : it->second;
    };
    sum += simulate_schedule(schedule, costs).bubble_fraction;
  }
  return steps.empty() ? 0.0 : sum / static_cast<double>(steps.size());
}

}  // namespace quintnet::core
