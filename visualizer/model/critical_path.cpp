#include "visualizer/model/critical_path.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/error.h"
#include "visualizer/model/collectives.h"
#include "visualizer/model/scene.h"

namespace quintnet::viz {
namespace {

// The step's events, indexed for the backward walk.
class StepIndex {
 public:
  StepIndex(const Timeline& tl, int step) : tl_(tl), t_(tl.trace()) {
    for (size_t i = 0; i < t_.events.size(); ++i) {
      const core::TraceEvent& e = t_.events[i];
      if (e.step != step) continue;
      by_end_[e.rank].push_back(i);
      span_ = std::max(span_, std::abs(e.end_us()));
    }
    if (by_end_.empty()) throw core::TraceError("step " + std::to_string(step) + " has no events");
    for (auto& [rank, events] : by_end_)
      std::sort(events.begin(), events.end(), [&](size_t a, size_t b) {
        const auto& x = t_.events[a];
        const auto& y = t_.events[b];
        return x.end_us() != y.end_us() ? x.end_us() < y.end_us() : a < b;
      });
    for (size_t f = 0; f < t_.flows.size(); ++f) flows_into_[{t_.flows[f].to_rank, t_.flows[f].to_lane}].push_back(f);
    for (auto& [end, flows] : flows_into_)
      std::sort(flows.begin(), flows.end(), [&](size_t a, size_t b) { return t_.flows[a].to_ts_us < t_.flows[b].to_ts_us; });
    for (size_t r = 0; r < tl.rows().size(); ++r) row_of_[{tl.rows()[r].rank, tl.rows()[r].lane}] = r;
    for (const CollectiveSpan& c : collective_spans(tl)) {
      if (c.step != step) continue;
      for (size_t i : c.events) group_of_[i] = groups_.size();
      groups_.push_back(c.events);
    }
  }

  // Timestamps are equal when closer than this (they are printed with finite digits).
  double eps() const { return 1e-9 * span_ + 1e-6; }

  // The op that ends last in the step; on ties the one that started first, lowest rank.
  size_t last() const {
    size_t best = by_end_.begin()->second.back();
    for (const auto& [rank, events] : by_end_) {
      const size_t i = events.back();
      const auto& e = t_.events[i];
      const auto& b = t_.events[best];
      if (e.end_us() > b.end_us() + eps() || (std::abs(e.end_us() - b.end_us()) <= eps() && e.ts_us < b.ts_us)) best = i;
    }
    return best;
  }

  // The op of `e`'s rank that ends latest at or before e's start; among equal ends the
  // earliest-starting.  Zero-length ops at e's very start count only when recorded
  // before e (their order on the rank).  npos when none.
  size_t predecessor(size_t e_index) const {
    const core::TraceEvent& e = t_.events[e_index];
    const std::vector<size_t>& events = by_end_.at(e.rank);
    auto it = std::upper_bound(events.begin(), events.end(), e.ts_us + eps(),
                               [&](double t, size_t i) { return t < t_.events[i].end_us(); });
    size_t best = npos;
    while (it != events.begin()) {
      const size_t i = *--it;
      const core::TraceEvent& p = t_.events[i];
      const bool before = p.ts_us < e.ts_us - eps() || (i < e_index && p.ts_us <= e.ts_us + eps());
      if (i == e_index || !before) continue;
      if (best != npos && p.end_us() < t_.events[best].end_us() - eps()) break;
      if (best == npos || p.ts_us < t_.events[best].ts_us) best = i;
    }
    return best;
  }

  // The send whose message `e` received, when e was posted before it was sent.
  size_t waited_for_sender(size_t e_index) const {
    const core::TraceEvent& e = t_.events[e_index];
    const auto in = flows_into_.find({e.rank, e.lane});
    if (in == flows_into_.end()) return npos;
    const std::vector<size_t>& flows = in->second;
    auto it = std::lower_bound(flows.begin(), flows.end(), e.ts_us - eps(),
                               [&](size_t f, double t) { return t_.flows[f].to_ts_us < t; });
    for (; it != flows.end() && t_.flows[*it].to_ts_us <= e.end_us() + eps(); ++it) {
      const core::TraceFlow& f = t_.flows[*it];
      const size_t s = event_at(f.from_rank, f.from_lane, f.from_ts_us);
      if (s != npos && t_.events[s].ts_us > e.ts_us + eps()) return s;
    }
    return npos;
  }

  // The member of e's collective that arrived last, when that is not e.
  size_t waited_for_member(size_t e_index) const {
    const auto g = group_of_.find(e_index);
    if (g == group_of_.end()) return npos;
    size_t last = e_index;
    for (size_t m : groups_[g->second])
      if (t_.events[m].ts_us > t_.events[last].ts_us + eps()) last = m;
    return last == e_index ? npos : last;
  }

  // The compute op of `rank` running at time t (strictly inside it), npos when none.
  size_t enclosing_compute(int rank, double t) const {
    const auto r = row_of_.find({rank, core::Lane::Compute});
    if (r == row_of_.end()) return npos;
    const auto [lo, hi] = tl_.visible(r->second, t, t);
    for (size_t k = lo; k < hi; ++k) {
      const size_t i = tl_.rows()[r->second].events[k];
      const auto& e = t_.events[i];
      if (e.ts_us < t - eps() && e.end_us() > t + eps()) return i;
    }
    return npos;
  }

  static constexpr size_t npos = static_cast<size_t>(-1);

 private:
  // The event on (rank, lane) that starts at t (a flow's end point).
  size_t event_at(int rank, core::Lane lane, double t) const {
    const auto r = row_of_.find({rank, lane});
    if (r == row_of_.end()) return npos;
    const auto [lo, hi] = tl_.visible(r->second, t - eps(), t + eps());
    for (size_t k = lo; k < hi; ++k) {
      const size_t i = tl_.rows()[r->second].events[k];
      if (std::abs(t_.events[i].ts_us - t) <= eps()) return i;
    }
    return npos;
  }

  const Timeline& tl_;
  const core::Trace& t_;
  double span_ = 0;
  std::map<int, std::vector<size_t>> by_end_;  // per rank, by end time
  std::map<std::pair<int, core::Lane>, size_t> row_of_;
  std::map<std::pair<int, core::Lane>, std::vector<size_t>> flows_into_;  // by arrival time
  std::map<size_t, size_t> group_of_;          // event -> its collective
  std::vector<std::vector<size_t>> groups_;
};

}  // namespace

bool CriticalPath::contains(long event) const {
  return std::any_of(segments.begin(), segments.end(), [&](const PathSegment& s) { return s.event == event; });
}

CriticalPath critical_path(const Timeline& tl, int step) {
  const StepIndex index(tl, step);
  const auto& events = tl.trace().events;
  const double eps = index.eps();
  CriticalPath path;
  path.step = step;
  std::vector<PathSegment> backwards;
  auto add = [&](double begin, double end, long event, int rank, std::string kind, PathSegment::Via via) {
    if (end - begin > 0) backwards.push_back({begin, end, event, rank, std::move(kind), via});
  };

  size_t current = index.last();
  double cursor = events[current].end_us();  // the time still to explain
  path.end_us = cursor;
  PathSegment::Via via = PathSegment::Via::End;
  std::set<std::pair<size_t, double>> visited;  // (op, cursor): no loops on malformed traces
  while (visited.insert({current, cursor}).second) {
    const core::TraceEvent& e = events[current];
    const long ev = static_cast<long>(current);
    if (const size_t sender = index.waited_for_sender(current); sender != StepIndex::npos) {
      // The message was in flight from the sender's end to this receive's end.
      const double arrival_from = std::min(events[sender].end_us(), cursor);
      add(arrival_from, cursor, ev, e.rank, e.kind, via);
      current = sender, cursor = arrival_from, via = PathSegment::Via::Message;
      continue;
    }
    if (const size_t member = index.waited_for_member(current); member != StepIndex::npos) {
      // The collective moved data from its last member's arrival; that member's own
      // start is explained by its rank's previous op, below.
      const double arrival = std::min(events[member].ts_us, cursor);
      add(arrival, cursor, ev, e.rank, e.kind, via);
      current = member, cursor = arrival, via = PathSegment::Via::Collective;
    } else {
      add(std::min(e.ts_us, cursor), cursor, ev, e.rank, e.kind, via);
      cursor = std::min(e.ts_us, cursor);
    }
    const size_t pred = index.predecessor(current);
    if (pred == StepIndex::npos) break;
    const double pred_end = std::min(events[pred].end_us(), cursor);
    if (cursor - pred_end > eps) {
      // A gap: inside a longer compute op of this rank (its own work), or idle.
      const size_t around = index.enclosing_compute(events[current].rank, (pred_end + cursor) / 2);
      if (around != StepIndex::npos)
        add(pred_end, cursor, static_cast<long>(around), events[around].rank, events[around].kind, PathSegment::Via::SameRank);
      else
        add(pred_end, cursor, -1, events[current].rank, "idle", PathSegment::Via::SameRank);
    }
    current = pred, cursor = pred_end, via = PathSegment::Via::SameRank;
  }
  path.begin_us = cursor;
  path.segments.assign(backwards.rbegin(), backwards.rend());

  std::map<std::string, double> per_kind;
  for (const PathSegment& s : path.segments) per_kind[s.kind] += s.length_us();
  path.by_kind.assign(per_kind.begin(), per_kind.end());
  std::stable_sort(path.by_kind.begin(), path.by_kind.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return path;
}

std::shared_ptr<const std::vector<CriticalPath>> critical_paths(const Timeline& tl) {
  auto paths = std::make_shared<std::vector<CriticalPath>>();
  for (int step : tl.steps()) paths->push_back(critical_path(tl, step));
  return paths;
}

std::string critical_path_summary(const CriticalPath& path) {
  std::string s = "critical path " + duration_text(path.length_us()) + ":";
  bool first = true;
  for (const auto& [kind, us] : path.by_kind) {
    const double share = path.length_us() > 0 ? us / path.length_us() : 0;
    if (share < 0.001) continue;
    char part[96];
    std::snprintf(part, sizeof(part), "%s %s %.1f%%", first ? "" : ",", kind.c_str(), 100 * share);
    s += part;
    first = false;
  }
  return s;
}

}  // namespace quintnet::viz
