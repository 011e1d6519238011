#pragma once
// core::Trace — the trace format both back ends write and the visualizer reads.
//
// On disk it is Chrome trace-event JSON, which Perfetto and chrome://tracing open:
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
//   - complete events  {"ph":"X", "pid": rank, "tid": lane, "ts": µs, "dur": µs,
//                       "name", "cat": kind, "args": {step, mb, chunk, kind, bytes, peer, dp, tp, pp}}
//   - flow events      {"ph":"s"/"f", "id", "pid", "tid", "ts", "bp":"e"} pairing a send with its receive
//   - metadata events  {"ph":"M", "name":"process_name"|"thread_name", ...} naming ranks and lanes
//   - otherData        {source: "exec"|"sim"|"schedule", plan, platform, summary}
// One reader and one writer live here; nothing else parses the format.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace quintnet::core {

// The sub-lanes of a rank; tid in the file.
enum class Lane { Compute = 0, P2P = 1, TpCollective = 2, DpCollective = 3 };
constexpr int kNumLanes = 4;
const char* lane_name(Lane lane);  // "compute", "p2p", "tp-collective", "dp-collective"

struct TraceEvent {
  std::string name;  // e.g. "F3", "SEND_ACT 3", "allreduce bucket 2"
  std::string kind;  // forward, backward, backward-input, backward-weight, send, recv,
                     // allreduce, grad-sync, optimizer, ... (the category)
  int rank = 0;
  Lane lane = Lane::Compute;
  double ts_us = 0.0;
  double dur_us = 0.0;
  int step = 0;
  int mb = -1;
  int chunk = -1;
  std::int64_t bytes = 0;
  int peer = -1;

  double end_us() const { return ts_us + dur_us; }
  bool operator==(const TraceEvent& o) const;
};

// An arrow from a send (on `from_rank`) to the matching receive (on `to_rank`).
struct TraceFlow {
  std::uint64_t id = 0;
  int from_rank = 0;
  Lane from_lane = Lane::P2P;
  double from_ts_us = 0.0;
  int to_rank = 0;
  Lane to_lane = Lane::P2P;
  double to_ts_us = 0.0;

  bool operator==(const TraceFlow& o) const;
};

// Mesh coordinates of a rank, shown in lane labels and stored in every event's args.
// cp (context parallelism) is written only by traces of meshes that have it.
struct RankCoords {
  int dp = 0, tp = 0, pp = 0, cp = 0;
  bool operator==(const RankCoords& o) const { return dp == o.dp && tp == o.tp && pp == o.pp && cp == o.cp; }
};

struct Trace {
  std::string source;                   // "exec", "sim" or "schedule"
  nlohmann::json plan = nullptr;        // core::Plan::to_json() or schedule parameters
  nlohmann::json platform = nullptr;    // hardware description (sim) or host (exec)
  nlohmann::json summary = nullptr;     // step time, bubble fraction, throughput, ...
  std::vector<RankCoords> ranks;        // index = global rank
  std::vector<TraceEvent> events;
  std::vector<TraceFlow> flows;

  int num_ranks() const { return static_cast<int>(ranks.size()); }
};

nlohmann::json trace_to_json(const Trace& trace);
// Throws TraceError naming the event index and field, e.g.
// "trace.json: traceEvents[17].dur: expected a number >= 0, got "abc"".
Trace trace_from_json(const nlohmann::json& doc, const std::string& origin = "<trace>");

// Builds a Trace from a trace document's parts as they arrive (the DOM path above
// and the streaming reader use it): otherData first, then each traceEvents element.
// Throws TraceError naming traceEvents[i].field.  `max_events` bounds rank numbers
// (no rank beyond the number of events a file of that size could hold).
class TraceAssembler {
 public:
  TraceAssembler(std::string origin, std::size_t max_events);
  void other_data(const nlohmann::json& other_data);
  void event(const nlohmann::json& element, std::size_t index);
  // A complete event ("X") already decoded and checked (the streaming reader's fast
  // path); `coords` are args.dp/tp/pp when present.
  void add_event(TraceEvent ev, const std::optional<std::int64_t> (&coords)[3], std::size_t index);
  // One end of a flow ("s": start, "f": finish), already decoded and checked.
  void add_flow_end(std::uint64_t id, bool start, int rank, int lane, double ts_us);
  Trace finish();
  void reserve(std::size_t events) { t_.events.reserve(events); }

 private:
  struct FlowEnd {
    bool present = false;
    int rank = 0, lane = 0;
    double ts_us = 0;
  };
  std::string origin_;
  std::size_t max_events_;
  Trace t_;
  std::unordered_map<std::uint64_t, std::pair<FlowEnd, FlowEnd>> flow_ends_;  // id -> (start, finish)
};

// Atomic write (temporary file + rename): a crash never leaves half a trace.
void write_trace(const Trace& trace, const std::string& path);
// Throws TraceError: unreadable file, JSON syntax error (with byte offset), bad fields.
Trace read_trace(const std::string& path);
Trace parse_trace_text(std::string_view text, const std::string& origin);

}  // namespace quintnet::core
