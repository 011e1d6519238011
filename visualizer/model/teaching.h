#pragma once
// Teaching mode: a schedule drawn straight from core's generator, before anything
// runs, with the phases of a pipeline explained.
#include <string>
#include <vector>

#include "core/trace.h"

namespace quintnet::viz {

struct TeachingSchedule {
  std::string schedule = "1f1b";
  int pp = 4, microbatches = 8, chunks = 1;
  double forward = 1, backward_input = 2, backward_weight = 0;  // B costs backward_input + backward_weight
};

// The simulated timeline as a trace (1 cost unit = 1 ms).  Throws core::UserError for
// an unknown schedule or one that cannot run (e.g. interleaved with m < pp).
core::Trace teaching_trace(const TeachingSchedule& t);

// Warm-up, steady state, cool-down: what each phase is, for the legend.
std::vector<std::string> phase_legend(const std::string& schedule);

}  // namespace quintnet::viz
