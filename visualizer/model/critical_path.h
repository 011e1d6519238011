#pragma once
// The critical path of a step: the chain of ops and messages that sets its duration.
//
// Found backwards from the step's last op to end: at each op, what made it finish when
// it did?
//   - a receive that was posted before its sender sent waited for the message: the
//     chain goes to the sender's send (then to whatever delayed the sender);
//   - a collective member that arrived before the group's last member waited for it:
//     the chain goes to the last arrival;
//   - otherwise the op ran for its own duration and started when its rank's previous
//     op ended (the one ending latest at or before its start, any lane); on exact ties
//     the op that started earliest wins (real work over zero-length bookkeeping).
// Time between a predecessor's end and the op's start is charged to the compute op
// enclosing it on that rank (e.g. a forward around its tensor-parallel all-reduces), or
// to "idle" when there is none (host overhead, an oversubscribed CPU).
// The segments tile the path without gaps, so their shares per kind sum to its length,
// which for a trace whose first rank starts the step equals the step's span.
//
// Uniform 1F1B with free messages, by construction: the first microbatch's forward
// through every stage, the last stage's steady state, the last microbatch's backward
// back through every stage — (m + p − 1)(tf + tb) in all.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct PathSegment {
  double begin_us = 0, end_us = 0;
  long event = -1;   // index into the timeline's trace events; -1 for idle time
  int rank = 0;
  std::string kind;  // the event's kind, or "idle"
  // How the chain reached this segment's op from the one after it.
  enum class Via { End, SameRank, Message, Collective } via = Via::End;
  double length_us() const { return end_us - begin_us; }
};

struct CriticalPath {
  int step = 0;
  double begin_us = 0, end_us = 0;    // the path's start and the step's end
  std::vector<PathSegment> segments;  // in time order, contiguous
  // Time on the path per kind, longest first; sums to end_us - begin_us.
  std::vector<std::pair<std::string, double>> by_kind;
  double length_us() const { return end_us - begin_us; }
  bool contains(long event) const;
};

// The critical path of `step` in the timeline's trace.  Throws core::TraceError when
// the step has no events.
CriticalPath critical_path(const Timeline& tl, int step);

// One per step of the timeline, in step order.
std::shared_ptr<const std::vector<CriticalPath>> critical_paths(const Timeline& tl);

// "critical path 33 ms: forward 33.3%, backward 66.7%" (kinds below 0.1% left out).
std::string critical_path_summary(const CriticalPath& path);

}  // namespace quintnet::viz
