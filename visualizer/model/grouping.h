#pragma once
// Lanes grouped along mesh axes, so a 16,384- or 131,072-rank step is readable: one lane
// per value of the kept axes (`pp`: one per pipeline stage; `pp,dp`: one per stage and
// replica; `node`: one per node of `gpus_per_node` ranks), the other axes collapsed.
// A group's k-th op on a lane stands for the k-th op of every member on that lane: drawn
// at the members' median start and median end, with the spread from the earliest start
// to the latest end beside it (min / median / max).  Ops line up by their order on each
// member, which is what the members share when they run the same schedule — any grouping
// that keeps `pp`.  A group is expanded by searching for it (pp=3) without grouping.
#include <string>
#include <vector>

#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct Grouping {
  std::vector<std::string> axes;  // of pp, tp, dp, node; empty: no grouping
  int gpus_per_node = 8;
  // "pp", "pp,dp", "node", "none" / "".  Throws core::UserError naming a bad axis.
  static Grouping parse(const std::string& text, int gpus_per_node = 8);
  bool empty() const { return axes.empty(); }
};

struct GroupedTrace {
  core::Trace trace;                    // one "rank" per group; events at the median times
  std::vector<std::string> labels;      // per group: "pp3 ×1024" (1024 members)
  std::vector<std::vector<int>> members;  // per group, its ranks
  std::vector<Interval> spread;         // per event of `trace`: earliest start, latest end over the members
};

GroupedTrace group_trace(const core::Trace& t, const Grouping& g);

// The trace's node size: otherData.platform.gpus_per_node when it has one, else 8.
int gpus_per_node(const core::Trace& t);

// The search that shows a group's ranks one by one: "pp3 dp1 ×64" -> "pp=3 dp=1".
std::string expand_search(const std::string& group_label);

// The grouped trace as a timeline whose compute rows carry the group labels.
std::unique_ptr<Timeline> grouped_timeline(const GroupedTrace& g);

}  // namespace quintnet::viz
