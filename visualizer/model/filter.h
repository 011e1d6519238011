#pragma once
// The viewer's search: which ops to show, from a line of terms that must all hold.
//   forward            an op kind (forward, backward, send, recv, allreduce, ...)
//   mb=3               microbatch          rank=5        one rank
//   pp=1 tp=0 dp=1     a mesh coordinate   dur>2ms       longer than (ns, us, ms, s)
//   node=2             the ranks of node 2 (the trace's gpus_per_node, else 8)
//   bucket             any other word: part of the op's name
// Terms about ranks (rank, pp, tp, dp, node) keep every op of the matching ranks, so their
// lanes and bubbles stay whole; terms about ops keep only the matching ops.
#include <optional>
#include <string>
#include <vector>

#include "core/trace.h"

namespace quintnet::viz {

struct EventFilter {
  std::vector<std::string> kinds;  // any of them (empty: any kind)
  std::optional<int> mb, rank, pp, tp, dp, node;
  int gpus_per_node = 8;  // for node=; filter_trace takes it from the trace
  double min_dur_us = 0;
  std::vector<std::string> name_parts;  // all of them, case-insensitive

  // Throws core::UserError naming the term it cannot read, e.g. "mb=x: expected a number".
  static EventFilter parse(const std::string& text);
  bool empty() const;
  bool keeps(const core::Trace& t, const core::TraceEvent& e) const;
};

// The trace with only the ops the filter keeps, and the flows between kept ops' ranks.
// Throws core::TraceError when nothing matches ("no op matches 'mb=99'").
core::Trace filter_trace(const core::Trace& trace, const EventFilter& filter, const std::string& text);

}  // namespace quintnet::viz
