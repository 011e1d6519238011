#include "visualizer/model/collectives.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace quintnet::viz {

std::vector<CollectiveSpan> collective_spans(const Timeline& tl) {
  const core::Trace& t = tl.trace();
  auto coords = [&](int rank) { return rank < static_cast<int>(t.ranks.size()) ? t.ranks[rank] : core::RankCoords{0, 0, rank}; };
  // (lane, step, group key a, group key b, k) -> members' events
  using Key = std::tuple<int, int, int, int, size_t>;
  std::map<Key, std::vector<size_t>> groups;
  std::map<std::tuple<int, int, int>, size_t> seen;  // (rank, lane, step) -> events so far
  for (const Row& row : tl.rows()) {
    if (row.lane != core::Lane::TpCollective && row.lane != core::Lane::DpCollective) continue;
    for (size_t i : row.events) {  // sorted by start: the k-th is the k-th collective of the step
      const core::TraceEvent& e = t.events[i];
      const size_t k = seen[{e.rank, static_cast<int>(e.lane), e.step}]++;
      const core::RankCoords c = coords(e.rank);
      const bool tp = e.lane == core::Lane::TpCollective;
      groups[{static_cast<int>(e.lane), e.step, tp ? c.dp : c.tp, c.pp, k}].push_back(i);
    }
  }
  std::vector<CollectiveSpan> out;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    CollectiveSpan s;
    s.lane = static_cast<core::Lane>(std::get<0>(key));
    s.step = std::get<1>(key);
    s.last_arrival_us = -1e300;
    s.first_end_us = 1e300;
    for (size_t i : members) {
      const core::TraceEvent& e = t.events[i];
      s.ranks.push_back(e.rank);
      s.events.push_back(i);
      s.last_arrival_us = std::max(s.last_arrival_us, e.ts_us);
      s.first_end_us = std::min(s.first_end_us, e.end_us());
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.last_arrival_us < b.last_arrival_us; });
  return out;
}

}  // namespace quintnet::viz
