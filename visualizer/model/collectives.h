#pragma once
// Collectives across their group: the k-th tensor-parallel all-reduce of a step on
// every member of a tp group (same dp and pp coordinates) is one collective, and so
// is the k-th DP all-reduce across a dp group (same tp and pp).  The viewer joins
// the members' lanes at the last arrival — the moment the collective could start
// moving data — so a straggler shows as the line's late position.
#include <vector>

#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct CollectiveSpan {
  core::Lane lane = core::Lane::TpCollective;
  int step = 0;
  std::vector<int> ranks;        // the group's members that took part
  std::vector<size_t> events;    // their events (indices into the trace), in the same order
  double last_arrival_us = 0;    // latest start over the members
  double first_end_us = 0;       // earliest end
};

std::vector<CollectiveSpan> collective_spans(const Timeline& tl);

}  // namespace quintnet::viz
