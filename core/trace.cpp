#include "core/trace.h"

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
  for (int r = 0; r < t.num_ranks(); ++r) {
    const RankCoords& c = t.ranks[r];
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(r) + " (pp" + std::to_string(c.pp) + " tp" +
                                             std::to_string(c.tp) + " dp" + std::to_string(c.dp) + ")"}}}});
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
  for (const RankCoords& c : t.ranks) ranks.push_back({{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}});
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

Trace trace_from_json(const Json& doc, const std::string& origin) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw TraceError(origin + ": not a Chrome trace: expected an object with a \"traceEvents\" list");
  Trace t;
  if (doc.contains("otherData")) {
    const Json& od = doc["otherData"];
    if (!od.is_object()) throw TraceError(origin + ": otherData: expected an object");
    if (od.contains("source")) {
      if (!od["source"].is_string()) throw TraceError(origin + ": otherData.source: expected text");
      t.source = od["source"].get<std::string>();
    }
    t.plan = od.value("plan", Json(nullptr));
    t.platform = od.value("platform", Json(nullptr));
    t.summary = od.value("summary", Json(nullptr));
    if (od.contains("ranks")) {
      const Json& rs = od["ranks"];
      if (!rs.is_array() || rs.size() > static_cast<size_t>(kMaxRanks))
        throw TraceError(origin + ": otherData.ranks: expected a list of rank coordinates");
      for (size_t i = 0; i < rs.size(); ++i) {
        EventReader r(rs[i], origin + ": otherData.ranks[" + std::to_string(i) + "]");
        if (!rs[i].is_object()) r.fail("dp", "an object {dp, tp, pp}");
        t.ranks.push_back({r.integer("dp", 0, kMaxRanks), r.integer("tp", 0, kMaxRanks), r.integer("pp", 0, kMaxRanks)});
      }
    }
  }

  std::map<std::uint64_t, std::pair<const Json*, const Json*>> flow_ends;  // id -> (s, f)
  const Json& events = doc["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    const std::string where = origin + ": traceEvents[" + std::to_string(i) + "]";
    EventReader r(e, where);
    if (!e.is_object()) throw TraceError(where + ": expected an event object, got " +
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
      if (ev.rank >= t.num_ranks()) {
        if (ev.rank >= static_cast<int>(events.size()) + t.num_ranks())
          r.fail("pid", "a rank below the number of events (a sane rank count)");
        t.ranks.resize(ev.rank + 1);
      }
      RankCoords c{static_cast<int>(r.arg("dp", t.ranks[ev.rank].dp)), static_cast<int>(r.arg("tp", t.ranks[ev.rank].tp)),
                   static_cast<int>(r.arg("pp", t.ranks[ev.rank].pp))};
      t.ranks[ev.rank] = c;
      t.events.push_back(std::move(ev));
    } else if (ph == "s" || ph == "f") {
      if (!e.contains("id") || !e["id"].is_number_unsigned()) r.fail("id", "a flow id (whole number >= 0)");
      auto& ends = flow_ends[e["id"].get<std::uint64_t>()];
      (ph == "s" ? ends.first : ends.second) = &e;
    }
    // Metadata ("M") and event types other tools add are not part of the model.
  }
  for (const auto& [id, ends] : flow_ends) {
    if (!ends.first || !ends.second)
      throw TraceError(origin + ": flow " + std::to_string(id) + " has a " + (ends.first ? "start" : "finish") +
                       " event but no " + (ends.first ? "finish ('f')" : "start ('s')"));
    EventReader s(*ends.first, origin + ": flow " + std::to_string(id) + " start");
    EventReader f(*ends.second, origin + ": flow " + std::to_string(id) + " finish");
    TraceFlow flow;
    flow.id = id;
    flow.from_rank = s.integer("pid", 0, kMaxRanks - 1);
    flow.from_lane = static_cast<Lane>(s.integer("tid", 0, kNumLanes - 1));
    flow.from_ts_us = s.number("ts");
    flow.to_rank = f.integer("pid", 0, kMaxRanks - 1);
    flow.to_lane = static_cast<Lane>(f.integer("tid", 0, kNumLanes - 1));
    flow.to_ts_us = f.number("ts");
    const int hi = std::max(flow.from_rank, flow.to_rank);
    if (hi >= t.num_ranks()) {
      if (hi > t.num_ranks() + static_cast<int>(events.size())) s.fail("pid", "a rank that has events");
      t.ranks.resize(hi + 1);
    }
    t.flows.push_back(flow);
  }
  return t;
}

void write_trace(const Trace& trace, const std::string& path) {
  try {
    write_file_atomically(path, trace_to_json(trace).dump(-1, ' ', false, Json::error_handler_t::replace) + "\n");
  } catch (const UserError& e) {
    throw TraceError(std::string(e.what()) + " (the trace)");
  }
}

Trace read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(path + ": cannot open the trace (" + std::string(std::strerror(errno)) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_trace_text(text.str(), path);
}

Trace parse_trace_text(const std::string& text, const std::string& origin) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    auto colon = what.find("error");
    throw TraceError(origin + ": not valid JSON at byte " + std::to_string(e.byte) + ": " +
                     (colon != std::string::npos ? what.substr(colon) : what));
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    throw TraceError(origin + ": not valid JSON: " + e.what());
  }
  return trace_from_json(doc, origin);
}

}  // namespace quintnet::core
