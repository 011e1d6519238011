#include "visualizer/model/grouping.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "core/trace_analysis.h"

namespace quintnet::viz {

Grouping Grouping::parse(const std::string& text, int gpus_per_node) {
  Grouping g;
  g.gpus_per_node = std::max(gpus_per_node, 1);
  if (text.empty() || text == "none") return g;
  std::stringstream in(text);
  std::string axis;
  while (std::getline(in, axis, ',')) {
    if (axis != "pp" && axis != "tp" && axis != "dp" && axis != "node")
      throw core::UserError("--group-by '" + text + "': '" + axis + "' is not an axis (pp, tp, dp, node; e.g. pp or pp,dp)");
    if (std::find(g.axes.begin(), g.axes.end(), axis) == g.axes.end()) g.axes.push_back(axis);
  }
  return g;
}

namespace {

int axis_value(const core::RankCoords& c, int rank, const std::string& axis, int gpus_per_node) {
  if (axis == "pp") return c.pp;
  if (axis == "tp") return c.tp;
  if (axis == "dp") return c.dp;
  return rank / gpus_per_node;  // node
}

// One slot: the k-th op on a lane in a step of every member of a group.
struct SlotKey {
  int group, lane, step;
  std::uint32_t k;
  bool operator==(const SlotKey& o) const { return group == o.group && lane == o.lane && step == o.step && k == o.k; }
};
struct SlotHash {
  size_t operator()(const SlotKey& s) const {
    std::uint64_t h = static_cast<std::uint32_t>(s.group);
    for (std::uint64_t v : {static_cast<std::uint64_t>(s.lane), static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.step)),
                            static_cast<std::uint64_t>(s.k)})
      h = h * 0x9E3779B97F4A7C15ull + v;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
struct Slot {
  SlotKey key;
  size_t first_event;  // whose name, kind and microbatch the slot shows
  std::vector<double> starts, ends;
};

// The messages between groups: a flow from the slot of each send to the slot of its
// receive, once per pair of slots, at the grouped ops' times — so arrows and the
// critical path follow the groups' messages.
std::vector<core::TraceFlow> group_flows(const core::Trace& t, const std::vector<std::vector<size_t>>& per_rank,
                                         const std::vector<size_t>& slot_of_event, const core::Trace& grouped) {
  // Each rank's events on a lane by start, for finding a flow's two ends.
  std::map<std::pair<int, core::Lane>, std::vector<size_t>> by_start;
  for (const core::TraceFlow& f : t.flows) {
    by_start.try_emplace({f.from_rank, f.from_lane});
    by_start.try_emplace({f.to_rank, f.to_lane});
  }
  for (auto& [key, list] : by_start) {
    for (size_t i : per_rank[static_cast<size_t>(key.first)])
      if (t.events[i].lane == key.second) list.push_back(i);
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) { return t.events[a].ts_us < t.events[b].ts_us; });
  }
  auto event_at = [&](int rank, core::Lane lane, double ts, bool starting) -> long {
    const std::vector<size_t>& list = by_start.at({rank, lane});
    // The last event starting at or before ts: a send starts there, a receive holds it.
    auto it = std::upper_bound(list.begin(), list.end(), ts + 1e-6, [&](double v, size_t i) { return v < t.events[i].ts_us; });
    while (it != list.begin()) {
      const core::TraceEvent& e = t.events[*--it];
      if (starting ? std::abs(e.ts_us - ts) <= 1e-6 : e.end_us() >= ts - 1e-6) return static_cast<long>(*it);
      if (starting) break;
    }
    return -1;
  };
  std::set<std::pair<size_t, size_t>> seen;
  std::vector<core::TraceFlow> flows;
  for (const core::TraceFlow& f : t.flows) {
    const long send = event_at(f.from_rank, f.from_lane, f.from_ts_us, true);
    const long recv = event_at(f.to_rank, f.to_lane, f.to_ts_us, false);
    if (send < 0 || recv < 0) continue;
    const size_t a = slot_of_event[static_cast<size_t>(send)], b = slot_of_event[static_cast<size_t>(recv)];
    if (!seen.insert({a, b}).second) continue;
    const core::TraceEvent& from = grouped.events[a];
    const core::TraceEvent& to = grouped.events[b];
    // At the grouped ops' times: medians of different groups need not keep a receive's
    // end after its send's start (by up to the members' spread); the arrow may lean back
    // by that much, and the critical path clamps the step to it.
    flows.push_back({flows.size() + 1, from.rank, from.lane, from.ts_us, to.rank, to.lane, to.end_us()});
  }
  return flows;
}

}  // namespace

GroupedTrace group_trace(const core::Trace& t, const Grouping& g) {
  int n = t.num_ranks();
  for (const auto& e : t.events) n = std::max(n, e.rank + 1);
  auto coords = [&](int r) { return r < t.num_ranks() ? t.ranks[static_cast<size_t>(r)] : core::RankCoords{0, 0, r}; };
  auto key_of = [&](int r) {
    std::vector<int> key;
    for (const std::string& a : g.axes) key.push_back(axis_value(coords(r), r, a, g.gpus_per_node));
    return key;
  };
  // Groups numbered in the order of their keys (the kept axes' values).
  std::map<std::vector<int>, int> group_of_key;
  for (int r = 0; r < n; ++r) group_of_key.emplace(key_of(r), 0);
  GroupedTrace out;
  for (auto& [key, id] : group_of_key) {
    id = static_cast<int>(out.labels.size());
    std::string label;
    core::RankCoords c;  // the kept axes' values, so rows stay in stage order; a node is its dp
    for (size_t i = 0; i < key.size(); ++i) {
      label += (i ? " " : "") + g.axes[i] + std::to_string(key[i]);
      const std::string& a = g.axes[i];
      (a == "pp" ? c.pp : a == "tp" ? c.tp : c.dp) = key[i];
    }
    out.labels.push_back(label);
    out.members.emplace_back();
    out.trace.ranks.push_back(c);
  }
  std::vector<int> group_of(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    group_of[static_cast<size_t>(r)] = group_of_key.at(key_of(r));
    out.members[static_cast<size_t>(group_of[static_cast<size_t>(r)])].push_back(r);
  }
  for (size_t i = 0; i < out.labels.size(); ++i)
    out.labels[i] += " \u00d7" + std::to_string(out.members[i].size());  // "pp3 ×1024"

  // Each rank's ops by (lane, step, start): the k-th of a run is slot k.
  std::vector<std::vector<size_t>> per_rank(static_cast<size_t>(n));
  for (size_t i = 0; i < t.events.size(); ++i) per_rank[static_cast<size_t>(t.events[i].rank)].push_back(i);
  std::unordered_map<SlotKey, size_t, SlotHash> slot_of;
  std::vector<size_t> slot_of_event(t.events.size());
  std::vector<Slot> slots;
  for (int r = 0; r < n; ++r) {
    auto& mine = per_rank[static_cast<size_t>(r)];
    std::sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
      const auto& x = t.events[a];
      const auto& y = t.events[b];
      return std::tie(x.lane, x.step, x.ts_us, a) < std::tie(y.lane, y.step, y.ts_us, b);
    });
    std::uint32_t k = 0;
    for (size_t j = 0; j < mine.size(); ++j) {
      const core::TraceEvent& e = t.events[mine[j]];
      if (j > 0 && (t.events[mine[j - 1]].lane != e.lane || t.events[mine[j - 1]].step != e.step)) k = 0;
      const SlotKey key{group_of[static_cast<size_t>(r)], static_cast<int>(e.lane), e.step, k++};
      auto [it, fresh] = slot_of.try_emplace(key, slots.size());
      if (fresh) slots.push_back({key, mine[j], {}, {}});
      slot_of_event[mine[j]] = it->second;
      slots[it->second].starts.push_back(e.ts_us);
      slots[it->second].ends.push_back(e.end_us());
    }
  }
  out.trace.source = t.source;
  out.trace.plan = t.plan;
  out.trace.platform = t.platform;
  out.trace.summary = t.summary;
  out.trace.events.reserve(slots.size());
  out.spread.reserve(slots.size());
  for (Slot& s : slots) {
    core::TraceEvent e = t.events[s.first_event];
    e.rank = s.key.group;
    e.peer = -1;
    const double earliest = *std::min_element(s.starts.begin(), s.starts.end());
    const double latest = *std::max_element(s.ends.begin(), s.ends.end());
    e.ts_us = core::median(std::move(s.starts));
    e.dur_us = std::max(core::median(std::move(s.ends)) - e.ts_us, 0.0);
    out.trace.events.push_back(std::move(e));
    out.spread.push_back({earliest, latest});
  }
  out.trace.flows = group_flows(t, per_rank, slot_of_event, out.trace);
  return out;
}

int gpus_per_node(const core::Trace& t) {
  const auto& p = t.platform;
  if (p.is_object() && p.contains("gpus_per_node") && p["gpus_per_node"].is_number_integer() && p["gpus_per_node"].get<int>() > 0)
    return p["gpus_per_node"].get<int>();
  return 8;
}

std::string expand_search(const std::string& group_label) {
  std::istringstream in(group_label);
  std::string word, search;
  while (in >> word) {
    const size_t digits = word.find_first_of("0123456789");
    if (!std::isalpha(static_cast<unsigned char>(word[0])) || digits == std::string::npos) continue;  // "×N": the count
    search += (search.empty() ? "" : " ") + word.substr(0, digits) + "=" + word.substr(digits);
  }
  return search;
}

std::unique_ptr<Timeline> grouped_timeline(const GroupedTrace& g) {
  auto tl = std::make_unique<Timeline>(g.trace);
  tl->label_ranks(g.labels);
  return tl;
}

}  // namespace quintnet::viz
