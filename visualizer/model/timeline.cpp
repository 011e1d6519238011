#include "visualizer/model/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"

namespace quintnet::viz {
namespace {

core::RankCoords coords_of(const core::Trace& t, int rank) {
  return rank < static_cast<int>(t.ranks.size()) ? t.ranks[rank] : core::RankCoords{0, 0, rank};
}

bool counts_as_compute(const core::TraceEvent& e) { return e.lane == core::Lane::Compute && e.kind != "optimizer"; }

}  // namespace

Timeline::Timeline(core::Trace trace, std::optional<int> step) : trace_(std::move(trace)) {
  if (step) keep_step(*step);
  if (trace_.events.empty()) throw core::TraceError("the trace has no events: nothing to draw");
  check_event_ranges();
  int num_ranks = static_cast<int>(trace_.ranks.size());
  begin_us_ = 1e300;
  end_us_ = -1e300;
  for (const auto& e : trace_.events) {
    num_ranks = std::max(num_ranks, e.rank + 1);
    begin_us_ = std::min(begin_us_, e.ts_us);
    end_us_ = std::max(end_us_, e.end_us());
  }
  if (step) {  // flows of the kept step only
    std::vector<core::TraceFlow> flows;
    for (const auto& f : trace_.flows)
      if (f.from_ts_us >= begin_us_ && f.to_ts_us <= end_us_) flows.push_back(f);
    trace_.flows = std::move(flows);
  }
  build_rows(num_ranks);
  find_bubbles(num_ranks);
}

void Timeline::keep_step(int step) {
  std::vector<core::TraceEvent> kept;
  for (auto& e : trace_.events)
    if (e.step == step) kept.push_back(std::move(e));
  if (kept.empty() && !trace_.events.empty()) {
    std::set<int> steps;
    for (const auto& e : trace_.events) steps.insert(e.step);
    throw core::TraceError("step " + std::to_string(step) + " is not in the trace (it has steps " +
                           std::to_string(*steps.begin()) + "-" + std::to_string(*steps.rbegin()) + ")");
  }
  trace_.events = std::move(kept);
}

void Timeline::check_event_ranges() const {
  for (size_t i = 0; i < trace_.events.size(); ++i) {
    const auto& e = trace_.events[i];
    if (!(std::abs(e.ts_us) <= 1e15) || !(e.dur_us >= 0 && e.dur_us <= 1e15) || e.rank < 0 || e.rank > 1 << 24)
      throw core::TraceError("traceEvents: event " + std::to_string(i) + " ('" + e.name +
                             "') has a time, duration or rank out of range (ts " + std::to_string(e.ts_us) + " us, dur " +
                             std::to_string(e.dur_us) + " us, rank " + std::to_string(e.rank) + ")");
  }
}

void Timeline::build_rows(int num_ranks) {
  // Rows: ranks ordered by (pp, tp, cp, dp); every rank gets the sub-lanes any rank uses.
  // Ranks without events (e.g. all filtered out by a search) get no rows.
  std::set<core::Lane> used;
  std::set<std::string> kinds_seen;
  std::vector<char> has_events(static_cast<size_t>(num_ranks), 0);
  for (const auto& e : trace_.events) {
    used.insert(e.lane);
    has_events[static_cast<size_t>(e.rank)] = 1;
    if (kinds_seen.insert(e.kind).second) kinds_.push_back(e.kind);
  }
  std::vector<int> order(num_ranks);
  for (int r = 0; r < num_ranks; ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ca = coords_of(trace_, a), cb = coords_of(trace_, b);
    return std::tie(ca.pp, ca.tp, ca.cp, ca.dp, a) < std::tie(cb.pp, cb.tp, cb.cp, cb.dp, b);
  });
  const bool cp_mesh = std::any_of(trace_.ranks.begin(), trace_.ranks.end(), [](const core::RankCoords& c) { return c.cp > 0; });
  std::map<std::pair<int, core::Lane>, size_t> row_of;
  for (int r : order) {
    if (!has_events[static_cast<size_t>(r)]) continue;
    const auto c = coords_of(trace_, r);
    for (core::Lane lane : {core::Lane::Compute, core::Lane::P2P, core::Lane::TpCollective, core::Lane::DpCollective}) {
      if (lane != core::Lane::Compute && !used.count(lane)) continue;
      Row row;
      row.rank = r;
      row.lane = lane;
      // A context-parallel rank's coordinate where the mesh has one (cp 0 is every other rank's).
      row.label = lane == core::Lane::Compute ? "pp" + std::to_string(c.pp) + " tp" + std::to_string(c.tp) +
                                                    (c.cp > 0 || cp_mesh ? " cp" + std::to_string(c.cp) : std::string()) +
                                                    " dp" + std::to_string(c.dp)
                                              : core::lane_name(lane);
      row_of[{r, lane}] = rows_.size();
      rows_.push_back(std::move(row));
    }
  }
  for (size_t i = 0; i < trace_.events.size(); ++i) {
    const auto& e = trace_.events[i];
    rows_[row_of.at({e.rank, e.lane})].events.push_back(i);
  }
  for (Row& row : rows_) {
    std::stable_sort(row.events.begin(), row.events.end(),
                     [&](size_t a, size_t b) { return trace_.events[a].ts_us < trace_.events[b].ts_us; });
    double longest = 0;
    for (size_t i : row.events) longest = std::max(longest, trace_.events[i].dur_us);
    max_dur_per_row_.push_back(longest);
  }
}

void Timeline::find_bubbles(int num_ranks) {
  // Per step, the window over all ranks' compute; gaps of each rank inside it.
  std::map<int, Interval> windows;
  for (const auto& e : trace_.events) {
    if (!counts_as_compute(e)) continue;
    auto [it, fresh] = windows.try_emplace(e.step, Interval{e.ts_us, e.end_us()});
    if (!fresh) {
      it->second.begin_us = std::min(it->second.begin_us, e.ts_us);
      it->second.end_us = std::max(it->second.end_us, e.end_us());
    }
  }
  bubbles_.assign(num_ranks, {});
  busy_us_.assign(num_ranks, 0.0);
  for (const auto& [s, w] : windows) window_total_us_ += w.end_us - w.begin_us;
  for (const Row& row : rows_) {
    if (row.lane != core::Lane::Compute) continue;
    for (const auto& [s, w] : windows) {
      double cursor = w.begin_us;
      for (size_t i : row.events) {
        const auto& e = trace_.events[i];
        if (e.step != s || !counts_as_compute(e)) continue;
        if (e.ts_us > cursor) bubbles_[row.rank].push_back({cursor, e.ts_us});
        cursor = std::max(cursor, e.end_us());
        busy_us_[row.rank] += e.dur_us;
      }
      if (cursor < w.end_us) bubbles_[row.rank].push_back({cursor, w.end_us});
    }
  }
}

void Timeline::label_ranks(const std::vector<std::string>& labels) {
  for (Row& row : rows_)
    if (row.lane == core::Lane::Compute && row.rank < static_cast<int>(labels.size())) row.label = labels[static_cast<size_t>(row.rank)];
}

std::vector<int> Timeline::steps() const {
  std::set<int> s;
  for (const auto& e : trace_.events) s.insert(e.step);
  return {s.begin(), s.end()};
}

double Timeline::bubble_fraction(int rank) const {
  return window_total_us_ > 0 ? 1.0 - busy_us_.at(static_cast<size_t>(rank)) / window_total_us_ : 0.0;
}

double Timeline::bubble_fraction() const {
  if (busy_us_.empty() || window_total_us_ <= 0) return 0.0;
  double busy = 0;
  for (double b : busy_us_) busy += b;
  return 1.0 - busy / (static_cast<double>(busy_us_.size()) * window_total_us_);
}

std::pair<size_t, size_t> Timeline::visible(size_t row, double t0, double t1) const {
  const auto& ev = rows_[row].events;
  auto start_of = [&](size_t i) { return trace_.events[i].ts_us; };
  // An event overlapping t0 starts at most max_dur before it.
  const double from = t0 - max_dur_per_row_[row];
  auto lo = std::lower_bound(ev.begin(), ev.end(), from, [&](size_t i, double t) { return start_of(i) < t; });
  auto hi = std::upper_bound(ev.begin(), ev.end(), t1, [&](double t, size_t i) { return t < start_of(i); });
  return {static_cast<size_t>(lo - ev.begin()), static_cast<size_t>(hi - ev.begin())};
}

size_t Timeline::first_starting_at(size_t row, size_t from, double t) const {
  const auto& ev = rows_[row].events;
  auto it = std::lower_bound(ev.begin() + static_cast<long>(from), ev.end(), t,
                             [&](size_t i, double x) { return trace_.events[i].ts_us < x; });
  return static_cast<size_t>(it - ev.begin());
}

}  // namespace quintnet::viz
