#include "core/trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace quintnet::core {

using Json = nlohmann::json;

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::Compute: return "compute";
    case Lane::P2P: return "p2p";
    case Lane::TpCollective: return "tp-collective";
    case Lane::DpCollective: return "dp-collective";
  }
  return "?";
}

bool TraceEvent::operator==(const TraceEvent& o) const {
  return name == o.name && kind == o.kind && rank == o.rank && lane == o.lane && ts_us == o.ts_us &&
         dur_us == o.dur_us && step == o.step && mb == o.mb && chunk == o.chunk && bytes == o.bytes &&
         peer == o.peer;
}

bool TraceFlow::operator==(const TraceFlow& o) const {
  return id == o.id && from_rank == o.from_rank && from_lane == o.from_lane && from_ts_us == o.from_ts_us &&
         to_rank == o.to_rank && to_lane == o.to_lane && to_ts_us == o.to_ts_us;
}

Json trace_to_json(const Trace& t) {
  Json events = Json::array();
  const bool has_cp = std::any_of(t.ranks.begin(), t.ranks.end(), [](const RankCoords& c) { return c.cp > 0; });
  for (int r = 0; r < t.num_ranks(); ++r) {
    const RankCoords& c = t.ranks[r];
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(r) + " (pp" + std::to_string(c.pp) + " tp" +
                                             std::to_string(c.tp) + " dp" + std::to_string(c.dp) +
                                             (has_cp ? " cp" + std::to_string(c.cp) : std::string()) + ")"}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"tid", 0},
                      {"args", {{"sort_index", r}}}});
    for (int l = 0; l < kNumLanes; ++l)
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", l},
                        {"args", {{"name", lane_name(static_cast<Lane>(l))}}}});
  }
  for (const TraceEvent& e : t.events) {
    const RankCoords c = e.rank >= 0 && e.rank < t.num_ranks() ? t.ranks[e.rank] : RankCoords{};
    events.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.kind}, {"pid", e.rank},
                      {"tid", static_cast<int>(e.lane)}, {"ts", e.ts_us}, {"dur", e.dur_us},
                      {"args", {{"step", e.step}, {"mb", e.mb}, {"chunk", e.chunk}, {"kind", e.kind},
                                {"bytes", e.bytes}, {"peer", e.peer}, {"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}}}});
  }
  for (const TraceFlow& f : t.flows) {
    events.push_back({{"ph", "s"}, {"name", "p2p"}, {"cat", "flow"}, {"id", f.id}, {"pid", f.from_rank},
                      {"tid", static_cast<int>(f.from_lane)}, {"ts", f.from_ts_us}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"name", "p2p"}, {"cat", "flow"}, {"id", f.id},
                      {"pid", f.to_rank}, {"tid", static_cast<int>(f.to_lane)}, {"ts", f.to_ts_us}});
  }
  Json ranks = Json::array();
  for (const RankCoords& c : t.ranks) {
    ranks.push_back({{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}});
    if (has_cp) ranks.back()["cp"] = c.cp;
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"format", "quintnet-trace/1"}, {"source", t.source}, {"plan", t.plan}, {"platform", t.platform},
            {"summary", t.summary}, {"ranks", std::move(ranks)}}}};
}

namespace {

class EventReader {
 public:
  EventReader(const Json& e, std::string where) : e_(e), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    std::string got = e_.contains(field) ? e_[field].dump(-1, ' ', false, Json::error_handler_t::replace) : "nothing";
    if (got.size() > 40) got = got.substr(0, 37) + "...";
    throw TraceError(where_ + "." + field + ": expected " + what + ", got " + got);
  }
  double number(const std::string& field, double min = -1e18) const {
    if (!e_.contains(field) || !e_[field].is_number()) fail(field, "a number");
    double v = e_[field].get<double>();
    if (!std::isfinite(v) || v < min || v > 1e18) fail(field, "a finite number from " + std::to_string(min) + " to 1e18");
    return v;
  }
  int integer(const std::string& field, int min, int max) const {
    if (!e_.contains(field) || !e_[field].is_number_integer()) fail(field, "a whole number");
    auto v = e_[field].get<std::int64_t>();
    if (v < min || v > max) fail(field, "a whole number from " + std::to_string(min) + " to " + std::to_string(max));
    return static_cast<int>(v);
  }
  std::string text(const std::string& field, const std::string& fallback) const {
    if (!e_.contains(field)) return fallback;
    if (!e_[field].is_string()) fail(field, "text");
    return e_[field].get<std::string>();
  }
  // A field inside args, optional with a default.
  std::int64_t arg(const std::string& field, std::int64_t fallback) const {
    if (!e_.contains("args")) return fallback;
    const Json& a = e_["args"];
    if (!a.is_object()) fail("args", "an object");
    if (!a.contains(field)) return fallback;
    if (!a[field].is_number_integer()) {
      EventReader(a, where_ + ".args").fail(field, "a whole number");
    }
    return a[field].get<std::int64_t>();
  }

 private:
  const Json& e_;
  std::string where_;
};

constexpr int kMaxRanks = 1 << 24;

}  // namespace

TraceAssembler::TraceAssembler(std::string origin, std::size_t max_events)
    : origin_(std::move(origin)), max_events_(max_events) {}

void TraceAssembler::other_data(const Json& od) {
  if (!od.is_object()) throw TraceError(origin_ + ": otherData: expected an object");
  if (od.contains("source")) {
    if (!od["source"].is_string()) throw TraceError(origin_ + ": otherData.source: expected text");
    t_.source = od["source"].get<std::string>();
  }
  t_.plan = od.value("plan", Json(nullptr));
  t_.platform = od.value("platform", Json(nullptr));
  t_.summary = od.value("summary", Json(nullptr));
  if (od.contains("ranks")) {
    const Json& rs = od["ranks"];
    if (!rs.is_array() || rs.size() > static_cast<size_t>(kMaxRanks))
      throw TraceError(origin_ + ": otherData.ranks: expected a list of rank coordinates");
    for (size_t i = 0; i < rs.size(); ++i) {
      EventReader r(rs[i], origin_ + ": otherData.ranks[" + std::to_string(i) + "]");
      if (!rs[i].is_object()) r.fail("dp", "an object {dp, tp, pp}");
      t_.ranks.push_back({r.integer("dp", 0, kMaxRanks), r.integer("tp", 0, kMaxRanks), r.integer("pp", 0, kMaxRanks),
                          rs[i].contains("cp") ? r.integer("cp", 0, kMaxRanks) : 0});
    }
  }
}

void TraceAssembler::event(const Json& e, std::size_t i) {
  const std::string where = origin_ + ": traceEvents[" + std::to_string(i) + "]";
  EventReader r(e, where);
  if (!e.is_object())
    throw TraceError(where + ": expected an event object, got " +
                     e.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 40));
  const std::string ph = r.text("ph", "");
  if (ph == "X") {
    TraceEvent ev;
    ev.name = r.text("name", "");
    ev.kind = r.text("cat", "");
    ev.rank = r.integer("pid", 0, kMaxRanks - 1);
    ev.lane = static_cast<Lane>(r.integer("tid", 0, kNumLanes - 1));
    ev.ts_us = r.number("ts");
    ev.dur_us = r.number("dur", 0.0);
    ev.step = static_cast<int>(r.arg("step", 0));
    ev.mb = static_cast<int>(r.arg("mb", -1));
    ev.chunk = static_cast<int>(r.arg("chunk", -1));
    ev.bytes = r.arg("bytes", 0);
    ev.peer = static_cast<int>(r.arg("peer", -1));
    if (static_cast<std::size_t>(ev.rank) >= max_events_ + t_.ranks.size())
      r.fail("pid", "a rank below the number of events (a sane rank count)");
    std::optional<std::int64_t> coords[3];
    const char* names[3] = {"dp", "tp", "pp"};
    for (int k = 0; k < 3; ++k)
      if (e.contains("args") && e["args"].contains(names[k])) coords[k] = r.arg(names[k], 0);
    add_event(std::move(ev), coords, i);
  } else if (ph == "s" || ph == "f") {
    if (!e.contains("id") || !e["id"].is_number_unsigned()) r.fail("id", "a flow id (whole number >= 0)");
    const std::uint64_t id = e["id"].get<std::uint64_t>();
    EventReader end(e, origin_ + ": flow " + std::to_string(id) + (ph == "s" ? " start" : " finish"));
    add_flow_end(id, ph == "s", end.integer("pid", 0, kMaxRanks - 1), end.integer("tid", 0, kNumLanes - 1), end.number("ts"));
  }
  // Metadata ("M") and event types other tools add are not part of the model.
}

void TraceAssembler::add_flow_end(std::uint64_t id, bool start, int rank, int lane, double ts_us) {
  auto& ends = flow_ends_[id];
  (start ? ends.first : ends.second) = FlowEnd{true, rank, lane, ts_us};
}

void TraceAssembler::add_event(TraceEvent ev, const std::optional<std::int64_t> (&coords)[3], std::size_t index) {
  if (ev.rank >= t_.num_ranks()) {
    if (static_cast<std::size_t>(ev.rank) >= max_events_ + t_.ranks.size())
      throw TraceError(origin_ + ": traceEvents[" + std::to_string(index) +
                       "].pid: expected a rank below the number of events (a sane rank count)");
    t_.ranks.resize(ev.rank + 1);
  }
  RankCoords& c = t_.ranks[ev.rank];
  if (coords[0]) c.dp = static_cast<int>(*coords[0]);
  if (coords[1]) c.tp = static_cast<int>(*coords[1]);
  if (coords[2]) c.pp = static_cast<int>(*coords[2]);
  t_.events.push_back(std::move(ev));
}

Trace TraceAssembler::finish() {
  // In id order, whatever order the file had them in.
  std::vector<std::uint64_t> ids;
  ids.reserve(flow_ends_.size());
  for (const auto& entry : flow_ends_) ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());
  t_.flows.reserve(ids.size());
  for (const std::uint64_t id : ids) {
    const auto& ends = flow_ends_.at(id);
    if (!ends.first.present || !ends.second.present)
      throw TraceError(origin_ + ": flow " + std::to_string(id) + " has a " + (ends.first.present ? "start" : "finish") +
                       " event but no " + (ends.first.present ? "finish ('f')" : "start ('s')"));
    TraceFlow flow;
    flow.id = id;
    flow.from_rank = ends.first.rank;
    flow.from_lane = static_cast<Lane>(ends.first.lane);
    flow.from_ts_us = ends.first.ts_us;
    flow.to_rank = ends.second.rank;
    flow.to_lane = static_cast<Lane>(ends.second.lane);
    flow.to_ts_us = ends.second.ts_us;
    const int hi = std::max(flow.from_rank, flow.to_rank);
    if (hi >= t_.num_ranks()) {
      if (static_cast<std::size_t>(hi) > t_.ranks.size() + max_events_)
        throw TraceError(origin_ + ": flow " + std::to_string(id) + " start.pid: expected a rank that has events");
      t_.ranks.resize(hi + 1);
    }
    t_.flows.push_back(flow);
  }
  return std::move(t_);
}

Trace trace_from_json(const Json& doc, const std::string& origin) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw TraceError(origin + ": not a Chrome trace: expected an object with a \"traceEvents\" list");
  const Json& events = doc["traceEvents"];
  TraceAssembler a(origin, events.size());
  if (doc.contains("otherData")) a.other_data(doc["otherData"]);
  for (size_t i = 0; i < events.size(); ++i) a.event(events[i], i);
  return a.finish();
}

void write_trace(const Trace& trace, const std::string& path) {
  try {
    write_file_atomically(path, trace_to_json(trace).dump(-1, ' ', false, Json::error_handler_t::replace) + "\n");
  } catch (const UserError& e) {
    throw TraceError(std::string(e.what()) + " (the trace)");
  }
}

}  // namespace quintnet::core
