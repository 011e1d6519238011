#pragma once
// Comparing two timelines — measured vs simulated, or two schedules of one plan:
// step-time difference, per-op-kind and per-rank deltas, and both drawn stacked on a
// shared time axis (each from its own start).
#include <string>
#include <vector>

#include "visualizer/model/scene.h"
#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct KindDelta {
  std::string kind;
  double a_us = 0, b_us = 0;  // total duration of the kind's events over all ranks
};
struct RankDelta {
  int rank = 0;
  double busy_a_us = 0, busy_b_us = 0;  // compute time inside the step windows
};
struct Comparison {
  // Mean step span (first op start to last op end, optimizer included): for the one step
  // compare mode shows of each, its span — core::median_step_time_us's definition, so
  // a measured trace against its simulation shows `quintnet simulate --measured`'s error.
  double step_a_us = 0, step_b_us = 0;
  double bubble_a = 0, bubble_b = 0;
  std::vector<KindDelta> kinds;  // kinds present in either, in a fixed order
  std::vector<RankDelta> ranks;  // ranks present in both
};

Comparison compare_timelines(const Timeline& a, const Timeline& b);

// `a` above `b`, with a header of the deltas; names label the two.
Scene draw_comparison(const Timeline& a, const Timeline& b, const std::string& name_a, const std::string& name_b,
                      const ViewOptions& view);

}  // namespace quintnet::viz
