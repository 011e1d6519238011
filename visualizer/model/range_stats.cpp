#include "visualizer/model/range_stats.h"

#include <algorithm>
#include <map>

namespace quintnet::viz {
namespace {

// Length of the union of intervals clipped to [t0, t1].
double covered(std::vector<Interval> v, double t0, double t1) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin_us < b.begin_us; });
  double total = 0, cursor = t0;
  for (const Interval& i : v) {
    const double b = std::max(i.begin_us, cursor), e = std::min(i.end_us, t1);
    if (e > b) {
      total += e - b;
      cursor = e;
    }
  }
  return total;
}

}  // namespace

std::vector<RankRangeStats> range_statistics(const Timeline& tl, double t0_us, double t1_us) {
  if (t1_us < t0_us) std::swap(t0_us, t1_us);
  std::map<int, std::vector<Interval>> compute, comm;
  std::vector<int> order;
  for (size_t r = 0; r < tl.rows().size(); ++r) {
    const Row& row = tl.rows()[r];
    if (row.lane == core::Lane::Compute) order.push_back(row.rank);
    const auto [lo, hi] = tl.visible(r, t0_us, t1_us);
    auto& into = row.lane == core::Lane::Compute ? compute[row.rank] : comm[row.rank];
    for (size_t k = lo; k < hi; ++k) {
      const auto& e = tl.trace().events[row.events[k]];
      into.push_back({e.ts_us, e.end_us()});
    }
  }
  std::vector<RankRangeStats> out;
  for (int rank : order) {
    RankRangeStats s;
    s.rank = rank;
    s.busy_us = covered(compute[rank], t0_us, t1_us);
    s.idle_us = (t1_us - t0_us) - s.busy_us;
    s.comm_us = covered(comm[rank], t0_us, t1_us);
    out.push_back(s);
  }
  return out;
}

}  // namespace quintnet::viz
