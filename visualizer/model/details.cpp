#include "visualizer/model/details.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "visualizer/model/collectives.h"
#include "visualizer/model/range_stats.h"
#include "visualizer/model/scene.h"

namespace quintnet::viz {
namespace {

// The event on (rank, lane) whose span holds t (a flow's end point); -1 when none.
long event_holding(const Timeline& tl, int rank, core::Lane lane, double t) {
  const auto& events = tl.trace().events;
  long best = -1;
  for (size_t i = 0; i < events.size(); ++i) {
    const core::TraceEvent& e = events[i];
    if (e.rank != rank || e.lane != lane || t < e.ts_us - 1e-6 || t > e.end_us() + 1e-6) continue;
    // The closest start wins when zero-length ops share the time.
    if (best < 0 || std::abs(e.ts_us - t) < std::abs(events[static_cast<size_t>(best)].ts_us - t)) best = static_cast<long>(i);
  }
  return best;
}

std::string coords_text(const core::Trace& t, int rank) {
  const core::RankCoords c = rank < t.num_ranks() ? t.ranks[static_cast<size_t>(rank)] : core::RankCoords{0, 0, rank};
  return "rank " + std::to_string(rank) + "   pp " + std::to_string(c.pp) + "  tp " + std::to_string(c.tp) +
         (c.cp > 0 ? "  cp " + std::to_string(c.cp) : std::string()) + "  dp " + std::to_string(c.dp);
}

}  // namespace

OpDetails op_details(const Timeline& tl, long event) {
  const core::Trace& t = tl.trace();
  const core::TraceEvent& e = t.events.at(static_cast<size_t>(event));
  OpDetails d;
  d.lines.push_back(e.name + "  (" + e.kind + ")");
  d.lines.push_back(coords_text(t, e.rank) + "   lane " + core::lane_name(e.lane));
  std::string where = "step " + std::to_string(e.step);
  if (e.mb >= 0) where += "   microbatch " + std::to_string(e.mb);
  if (e.chunk >= 0) where += "   chunk " + std::to_string(e.chunk);
  d.lines.push_back(where);
  d.lines.push_back("start " + duration_text(e.ts_us - tl.begin_us()) + "   duration " + duration_text(e.dur_us) +
                    "   end " + duration_text(e.end_us() - tl.begin_us()));
  if (e.bytes > 0) d.lines.push_back(std::to_string(e.bytes) + " bytes");

  for (const core::TraceFlow& f : t.flows) {
    const bool sends = f.from_rank == e.rank && f.from_lane == e.lane && std::abs(f.from_ts_us - e.ts_us) <= 1e-6;
    const bool receives = f.to_rank == e.rank && f.to_lane == e.lane && f.to_ts_us >= e.ts_us - 1e-6 && f.to_ts_us <= e.end_us() + 1e-6;
    if (!sends && !receives) continue;
    d.partner = sends ? event_holding(tl, f.to_rank, f.to_lane, f.to_ts_us) : event_holding(tl, f.from_rank, f.from_lane, f.from_ts_us);
    if (d.partner < 0) continue;
    const core::TraceEvent& p = t.events[static_cast<size_t>(d.partner)];
    const double latency = f.to_ts_us - f.from_ts_us;
    d.lines.push_back(std::string(sends ? "received by " : "sent by ") + p.name + " on rank " + std::to_string(p.rank) +
                      "   in flight " + duration_text(latency) +
                      (receives && p.ts_us > e.ts_us ? "   waited " + duration_text(p.ts_us - e.ts_us) + " for the sender" : ""));
    break;
  }
  for (const CollectiveSpan& c : collective_spans(tl)) {
    if (std::find(c.events.begin(), c.events.end(), static_cast<size_t>(event)) == c.events.end()) continue;
    std::string ranks;
    int last_rank = e.rank;
    double last = -1e300;
    for (size_t i : c.events) {
      const core::TraceEvent& m = t.events[i];
      if (m.ts_us > last) last = m.ts_us, last_rank = m.rank;
      if (i == static_cast<size_t>(event)) continue;
      d.members.push_back(static_cast<long>(i));
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(m.rank);
    }
    d.lines.push_back(std::string(c.lane == core::Lane::TpCollective ? "tensor-parallel" : "data-parallel") +
                      " collective with rank" + (d.members.size() > 1 ? "s " : " ") + ranks);
    d.lines.push_back(last_rank == e.rank ? "this rank arrived last"
                                          : "waited " + duration_text(last - e.ts_us) + " for rank " + std::to_string(last_rank));
    break;
  }
  return d;
}

std::vector<std::string> stage_summary(const Timeline& tl, int step) {
  double lo = 1e300, hi = -1e300;
  for (const core::TraceEvent& e : tl.trace().events)
    if (e.step == step) lo = std::min(lo, e.ts_us), hi = std::max(hi, e.end_us());
  std::vector<std::string> out;
  if (!(hi > lo)) return out;
  struct Sum {
    double busy = 0, comm = 0, idle = 0;
    int ranks = 0;
  };
  std::map<int, Sum> stages;
  const core::Trace& t = tl.trace();
  for (const RankRangeStats& r : range_statistics(tl, lo, hi)) {
    Sum& s = stages[r.rank < t.num_ranks() ? t.ranks[static_cast<size_t>(r.rank)].pp : 0];
    s.busy += r.busy_us, s.comm += r.comm_us, s.idle += r.idle_us, ++s.ranks;
  }
  for (const auto& [stage, s] : stages) {
    const double len = (hi - lo) * s.ranks;
    char line[160];
    const std::string ranks = s.ranks > 1 ? " (" + std::to_string(s.ranks) + " ranks)" : "";
    std::snprintf(line, sizeof(line), "stage %d%s: compute %.0f%%, communication %.0f%%, idle %.0f%%", stage, ranks.c_str(),
                  100 * s.busy / len, 100 * s.comm / len, 100 * s.idle / len);
    out.push_back(line);
  }
  return out;
}

}  // namespace quintnet::viz
