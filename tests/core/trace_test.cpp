// core::Trace: lossless round trip, clear errors with positions, schedule traces.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "core/schedule_generators.h"
#include "core/schedule_trace.h"
#include "core/trace.h"
#include "core/trace_analysis.h"

using namespace quintnet::core;

namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/" + name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

Trace sample_trace() {
  Trace t;
  t.source = "exec";
  t.plan = {{"batch_size", 32}, {"mesh_dim", {2, 1, 2}}};
  t.platform = {{"host", "test"}};
  t.summary = {{"step_time_us", 1234.5}};
  t.ranks = {{0, 0, 0}, {1, 0, 0}, {0, 0, 1}, {1, 0, 1}};
  t.events.push_back({"F0", "forward", 0, Lane::Compute, 0.125, 10.0 / 3.0, 1, 0, 0, 0, -1});
  t.events.push_back({"SEND_ACT 0", "send", 0, Lane::P2P, 3.5, 0.0, 1, 0, 0, 4096, 2});
  t.events.push_back({"RECV_ACT 0", "recv", 2, Lane::P2P, 1e-3, 3.75, 1, 0, 0, 4096, 0});
  t.events.push_back({"allreduce bucket 0", "allreduce", 3, Lane::DpCollective, 1e9 + 0.1, 77.0, 2, -1, -1,
                      25 << 20, -1});
  t.flows.push_back({7, 0, Lane::P2P, 3.5, 2, Lane::P2P, 3.75});
  return t;
}

// Uniform op costs: forward, backward input, backward weight, message latency.
OpCosts op_costs(double tf, double tb, double tw, double p2p) {
  OpCosts c;
  c.forward = tf;
  c.backward_input = tb;
  c.backward_weight = tw;
  c.p2p = p2p;
  return c;
}

std::string read_error(const std::string& text) {
  const std::string path = temp_path("bad_trace.json");
  write_file(path, text);
  try {
    read_trace(path);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Trace, WriteThenReadIsLossless) {
  const Trace t = sample_trace();
  const std::string path = temp_path("roundtrip.json");
  write_trace(t, path);
  const Trace back = read_trace(path);
  EXPECT_EQ(back.source, t.source);
  EXPECT_EQ(back.plan, t.plan);
  EXPECT_EQ(back.platform, t.platform);
  EXPECT_EQ(back.summary, t.summary);
  EXPECT_EQ(back.ranks, t.ranks);
  EXPECT_EQ(back.events, t.events);  // doubles compared exactly
  EXPECT_EQ(back.flows, t.flows);
}

TEST(Trace, FileIsAChromeTraceWithLaneNamesAndFlows) {
  const nlohmann::json j = trace_to_json(sample_trace());
  ASSERT_TRUE(j["traceEvents"].is_array());
  int thread_names = 0, flows_s = 0, flows_f = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
    if (e["ph"] == "s") ++flows_s;
    if (e["ph"] == "f") {
      ++flows_f;
      EXPECT_EQ(e["bp"], "e");
    }
    if (e["ph"] == "X") {
      for (const char* k : {"step", "mb", "chunk", "kind", "bytes", "peer", "dp", "tp", "pp"})
        EXPECT_TRUE(e["args"].contains(k)) << k;
    }
  }
  EXPECT_EQ(thread_names, 4 * kNumLanes);
  EXPECT_EQ(flows_s, 1);
  EXPECT_EQ(flows_f, 1);
  EXPECT_EQ(j["otherData"]["source"], "exec");
}

TEST(Trace, MalformedFilesNameThePosition) {
  std::string full = trace_to_json(sample_trace()).dump();
  std::string msg = read_error(full.substr(0, full.size() / 2));
  EXPECT_NE(msg.find("not valid JSON at byte"), std::string::npos) << msg;

  msg = read_error(R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1, "dur": "long"}]})");
  EXPECT_NE(msg.find("traceEvents[0].dur"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"long\""), std::string::npos) << msg;

  // A complete event without its duration (the fast scanner took it as 0 until the
  // clang fuzzing build found it disagreeing with the document path).
  msg = read_error(R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1}]})");
  EXPECT_NE(msg.find("traceEvents[0].dur"), std::string::npos) << msg;

  msg = read_error(R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 9, "ts": 1, "dur": 1}]})");
  EXPECT_NE(msg.find("traceEvents[0].tid"), std::string::npos) << msg;

  msg = read_error(R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1e300, "dur": 1}]})");
  EXPECT_NE(msg.find("traceEvents[0].ts"), std::string::npos) << msg;

  msg = read_error(R"({"traceEvents": [{"ph": "s", "id": 3, "pid": 0, "tid": 1, "ts": 1}]})");
  EXPECT_NE(msg.find("flow 3"), std::string::npos) << msg;

  msg = read_error(R"({"events": []})");
  EXPECT_NE(msg.find("traceEvents"), std::string::npos) << msg;

  msg = read_error("");
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;

  EXPECT_THROW(read_trace(temp_path("does_not_exist.json")), TraceError);
}

TEST(Trace, ScheduleTraceHasOneFlowPerMessageAndTheComputeOps) {
  const Schedule s = make_1f1b(4, 8);
  const OpCosts costs;
  const ScheduleStats stats = simulate_schedule(s, costs);
  const Trace t = schedule_to_trace(s, stats, costs);
  int compute = 0, sends = 0;
  for (const auto& e : t.events) {
    if (e.kind == "forward" || e.kind == "backward") ++compute;
    if (e.kind == "send") ++sends;
  }
  EXPECT_EQ(compute, 2 * 4 * 8);
  EXPECT_EQ(sends, 2 * 3 * 8);  // activations and gradients over 3 stage boundaries
  EXPECT_EQ(static_cast<int>(t.flows.size()), sends);
  for (const auto& f : t.flows) EXPECT_GE(f.to_ts_us, f.from_ts_us);
  EXPECT_NEAR(t.summary["bubble_fraction"].get<double>(), 3.0 / 11.0, 1e-12);
}

// A trace made from a simulated schedule with uneven op costs: the measured bubble,
// and the replay of its per-op times, equal the simulation's bubble fraction.
TEST(TraceAnalysis, ReplayOfAScheduleTraceReproducesItsBubble) {
  const Schedule s = make_1f1b(4, 8);
  OpCosts costs = op_costs(1.0, 2.0, 0.0, 0.25);
  // Rank 2's microbatch 3 is slow: a per-action cost, not expressible per kind.
  costs.per_action = [](int rank, const Action& a) { return rank == 2 && a.mb == 3 ? 5.0 : -1.0; };
  const ScheduleStats stats = simulate_schedule(s, costs);
  const Trace t = schedule_to_trace(s, stats, costs);
  EXPECT_NEAR(measured_bubble_fraction(t), stats.bubble_fraction, 1e-9);
  EXPECT_NEAR(replayed_bubble_fraction(t, s), stats.bubble_fraction, 1e-9);
  // Without the slow microbatch the schedule's bubble is smaller: the replay saw it.
  OpCosts uniform = costs;
  uniform.per_action = nullptr;
  EXPECT_LT(simulate_schedule(s, uniform).bubble_fraction, stats.bubble_fraction - 0.01);
}

// The median step is the typical one: not the slow first, not the stalled one; spans
// are per step over every rank and lane; an odd count has one middle, ties go to the
// lower step number, and a trace without events has no step to offer.
TEST(TraceAnalysis, MedianStepIsTheTypicalStep) {
  Trace t;
  auto op = [&](int step, int rank, double ts, double dur) {
    TraceEvent e;
    e.name = "F0", e.kind = "forward", e.step = step, e.rank = rank, e.ts_us = ts, e.dur_us = dur;
    t.events.push_back(e);
  };
  op(0, 0, 0, 90);      // step 0: 0..90 (warm-up)
  op(1, 0, 100, 20);    // step 1: 100..140 over two ranks
  op(1, 1, 110, 30);
  op(2, 0, 200, 500);   // step 2: a stall
  op(3, 1, 800, 40);    // step 3: 40
  op(4, 0, 900, 45);    // step 4: 45
  const std::map<int, double> spans = step_spans_us(t);
  EXPECT_EQ(spans.at(1), 40);
  EXPECT_EQ(median_step(t), 4);  // spans 40, 40, 45, 90, 500: the middle is 45
  op(5, 0, 1000, 40);   // 40, 40, 40, 45, 90, 500: the upper middle is 45 still
  EXPECT_EQ(median_step(t), 4);
  op(6, 0, 1100, 40);   // four 40s, 45, 90, 500: 40, of the lowest step among them
  EXPECT_EQ(median_step(t), 1);
  EXPECT_EQ(median_step_time_us(t), 40);
  EXPECT_THROW(median_step(Trace{}), TraceError);
}

// Executor traces (Gloo, NCCL) move a message once both sides posted it: a late
// receiver still waits the latency.  A schedule simulated that way and written as an
// executor trace gives back its latency (every message measures it) and its bubble.
TEST(TraceAnalysis, RendezvousLatencyIsRecoveredFromAnExecutorTrace) {
  const Schedule s = make_1f1b(4, 8);
  OpCosts costs = op_costs(1.0, 2.0, 0.0, 0.4);
  costs.p2p_rendezvous = true;
  const ScheduleStats stats = simulate_schedule(s, costs);
  Trace t = schedule_to_trace(s, stats, costs);
  t.source = "exec";
  const OpCosts measured = median_op_costs(t, s.chunks);
  EXPECT_TRUE(measured.p2p_rendezvous);
  EXPECT_NEAR(measured.p2p, 0.4 * 1000.0, 1e-6);  // cost units -> the trace's 1000 us per unit
  EXPECT_NEAR(measured.forward, 1000.0, 1e-6);
  EXPECT_NEAR(simulate_schedule(s, measured).bubble_fraction, stats.bubble_fraction, 1e-9);
}

TEST(TraceAnalysis, RendezvousDelaysALateReceiverByTheLatency) {
  // AFAB, pp 2, 2 microbatches, tf = tb = 1, latency L.  Eager: rank 1 gets microbatch
  // 0 at 1 + L, and from then on each message is there by the time its receiver asks
  // or its receiver idles for it: step = 6 + 2L.  Rendezvous:
  // two receivers come late — rank 1 reaches RECV_ACT 1 at 2 + L (sent at 2) and rank
  // 0 reaches RECV_GRAD 1 after its B0 — and each waits L more: step = 6 + 4L.
  const Schedule s = make_afab(2, 2);
  OpCosts costs = op_costs(1.0, 1.0, 0.0, 0.3);
  const double eager = simulate_schedule(s, costs).step_time;
  costs.p2p_rendezvous = true;
  EXPECT_NEAR(eager, 6.0 + 2 * 0.3, 1e-12);
  EXPECT_NEAR(simulate_schedule(s, costs).step_time, 6.0 + 4 * 0.3, 1e-12);
}
