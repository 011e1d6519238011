#pragma once
// Hand-made trace events for the visualizer's model tests.
#include <string>

#include "core/trace.h"

namespace quintnet::viz::testing {

// An op of `kind` named kind + microbatch ("forward3"), on `rank`'s `lane`.
inline core::TraceEvent op(int rank, const std::string& kind, double ts, double dur, int mb = 0,
                           core::Lane lane = core::Lane::Compute) {
  core::TraceEvent e;
  e.name = kind + std::to_string(mb);
  e.kind = kind;
  e.rank = rank;
  e.lane = lane;
  e.ts_us = ts;
  e.dur_us = dur;
  e.mb = mb;
  return e;
}

}  // namespace quintnet::viz::testing
