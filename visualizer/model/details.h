#pragma once
// What the viewer's details panel says about one op: what it is and where it ran, the
// message partner it sent to or waited for, the other members of its collective, and
// how each pipeline stage spent the op's step (compute / communication / idle).
#include <string>
#include <vector>

#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct OpDetails {
  std::vector<std::string> lines;  // the text, one fact per line
  long partner = -1;               // the matching send or receive (event index), -1 when none
  std::vector<long> members;       // the collective's other members' events
};

// `event` indexes tl.trace().events; throws std::out_of_range for any other number.
OpDetails op_details(const Timeline& tl, long event);

// Per pipeline stage, over `step`'s window: mean compute, communication and idle share
// of the stage's ranks ("stage 1 (4 ranks): compute 61%, communication 30%, idle 39%").
std::vector<std::string> stage_summary(const Timeline& tl, int step);

}  // namespace quintnet::viz
