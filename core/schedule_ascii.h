#pragma once
// A terminal drawing of a timed schedule, one row per pipeline rank, in the style of
// the diagrams in pipeline papers:
//
//   rank 0 |F0F1F2F3........B0==F4..B1==...
//
// Each cell is one time unit (the shortest compute op); an op shows its letter and
// microbatch in its first cell and '=' for the rest; '.' is idle (the bubble).
// Letters: F forward, B backward, I input-gradient, W weight-gradient; lowercase
// marks odd chunks of an interleaved schedule.
#include <string>

#include "core/schedule.h"
#include "core/schedule_validator.h"

namespace quintnet::core {

// color: ANSI background colours per kind (for terminals).
std::string render_ascii_timeline(const Schedule& schedule, const ScheduleStats& stats, bool color);

}  // namespace quintnet::core
