#pragma once
// Statistics of a selected time range, per rank: how long its compute lane was busy,
// how long it was idle, and how long its communication lanes (p2p, TP, DP) were
// active — what the viewer's rubber-band selection shows.
#include <vector>

#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct RankRangeStats {
  int rank = 0;
  double busy_us = 0;  // compute events overlapping the range (optimizer included)
  double idle_us = 0;  // range length - busy
  double comm_us = 0;  // union of p2p and collective events overlapping the range
};

// Ranks in the timeline's row order.  Overlapping events on one lane count once.
std::vector<RankRangeStats> range_statistics(const Timeline& tl, double t0_us, double t1_us);

}  // namespace quintnet::viz
