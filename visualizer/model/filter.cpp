#include "visualizer/model/filter.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/error.h"
#include "visualizer/model/grouping.h"

namespace quintnet::viz {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int number(const std::string& term, const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > (1 << 30)) throw core::UserError(term + ": expected a number >= 0");
  return static_cast<int>(v);
}

double duration_us(const std::string& term, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  const double scale = unit == "ns" ? 1e-3 : unit == "us" || unit.empty() ? 1 : unit == "ms" ? 1e3 : unit == "s" ? 1e6 : -1;
  if (end == text.c_str() || scale < 0 || !(v >= 0)) throw core::UserError(term + ": expected a duration like 2ms (ns, us, ms, s)");
  return v * scale;
}

const std::set<std::string>& known_kinds() {
  static const std::set<std::string> kinds = {"forward", "backward", "backward-input", "backward-weight", "send",
                                              "recv", "allreduce", "grad-sync", "optimizer", "reduce-scatter",
                                              "all-gather", "allgather", "cp-ring"};
  return kinds;
}

}  // namespace

EventFilter EventFilter::parse(const std::string& text) {
  EventFilter f;
  std::istringstream in(text);
  std::string term;
  while (in >> term) {
    const std::string t = lower(term);
    const auto eq = t.find_first_of("=:");
    if (t.rfind("dur>", 0) == 0 || t[0] == '>') {
      f.min_dur_us = duration_us(term, t.substr(t[0] == '>' ? 1 : 4));
    } else if (eq != std::string::npos) {
      const std::string key = t.substr(0, eq), value = t.substr(eq + 1);
      if (key == "mb") f.mb = number(term, value);
      else if (key == "rank") f.rank = number(term, value);
      else if (key == "pp") f.pp = number(term, value);
      else if (key == "tp") f.tp = number(term, value);
      else if (key == "dp") f.dp = number(term, value);
      else if (key == "node") f.node = number(term, value);
      else if (key == "kind") f.kinds.push_back(value);
      else throw core::UserError(term + ": expected mb=, rank=, pp=, tp=, dp=, node=, kind= or dur>");
    } else if (known_kinds().count(t)) {
      f.kinds.push_back(t);
    } else {
      f.name_parts.push_back(t);
    }
  }
  return f;
}

bool EventFilter::empty() const {
  return kinds.empty() && !mb && !rank && !pp && !tp && !dp && !node && min_dur_us <= 0 && name_parts.empty();
}

bool EventFilter::keeps(const core::Trace& t, const core::TraceEvent& e) const {
  const core::RankCoords c = e.rank < t.num_ranks() ? t.ranks[static_cast<size_t>(e.rank)] : core::RankCoords{0, 0, e.rank};
  if ((rank && e.rank != *rank) || (pp && c.pp != *pp) || (tp && c.tp != *tp) || (dp && c.dp != *dp)) return false;
  if (node && e.rank / gpus_per_node != *node) return false;
  if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), e.kind) == kinds.end()) return false;
  if ((mb && e.mb != *mb) || e.dur_us < min_dur_us) return false;
  const std::string name = lower(e.name);
  return std::all_of(name_parts.begin(), name_parts.end(), [&](const std::string& p) { return name.find(p) != std::string::npos; });
}

core::Trace filter_trace(const core::Trace& trace, const EventFilter& terms, const std::string& text) {
  EventFilter filter = terms;
  filter.gpus_per_node = gpus_per_node(trace);
  core::Trace out;
  out.source = trace.source;
  out.plan = trace.plan;
  out.platform = trace.platform;
  out.summary = trace.summary;
  out.ranks = trace.ranks;
  std::set<int> ranks;
  for (const core::TraceEvent& e : trace.events)
    if (filter.keeps(trace, e)) {
      out.events.push_back(e);
      ranks.insert(e.rank);
    }
  if (out.events.empty()) throw core::TraceError("no op matches '" + text + "'");
  for (const core::TraceFlow& f : trace.flows)
    if (ranks.count(f.from_rank) && ranks.count(f.to_rank)) out.flows.push_back(f);
  return out;
}

}  // namespace quintnet::viz
