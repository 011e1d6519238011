// The simulator against closed forms, each simulation a quintnet-simulate process
// (SimGrid allows one engine per process): uniform op costs on an ideal network give
// (m+p-1)(tf+tb) for AFAB and 1F1B; the bubble equals core's statistic for every
// schedule; a ring all-reduce takes 2(n-1)(a + S/(nB)); bad input exits 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/run_command.h"
#include <fstream>
#include <sstream>

#include "core/cost_model.h"
#include "core/schedule_generators.h"
#include "core/trace.h"
#include "core/schedule_validator.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;
namespace core = quintnet::core;

nlohmann::json simulate(const std::string& args) {
  const auto r = run_command(bin("quintnet-simulate") + " " + args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

}  // namespace

TEST(Simulator, UniformPipelineStepTimeIsTheClosedForm) {
  for (const char* schedule : {"afab", "1f1b"})
    for (auto [p, m] : std::vector<std::pair<int, int>>{{2, 2}, {4, 8}, {8, 3}, {3, 16}}) {
      const double tf = 0.7, tb = 1.9;
      const auto j = simulate("--uniform 0.7,1.9 --schedule " + std::string(schedule) + " --pp " + std::to_string(p) +
                              " --microbatches " + std::to_string(m) + " --platform ideal");
      const double expected = (m + p - 1) * (tf + tb);
      EXPECT_NEAR(j.value("step_time_s", 0.0), expected, 1e-6 * expected) << schedule << " p " << p << " m " << m;
    }
}

TEST(Simulator, BubbleEqualsCoresStatisticForEverySchedule) {
  for (const char* schedule : {"afab", "1f1b", "interleaved", "zb-h1"}) {
    const core::ScheduleKind kind = core::parse_schedule_kind(schedule);
    const int chunks = kind == core::ScheduleKind::Interleaved ? 2 : 1;
    core::OpCosts costs;
    costs.forward = 1;
    costs.backward_input = 1.5;
    costs.backward_weight = kind == core::ScheduleKind::ZbH1 ? 0.5 : 0.0;
    const auto stats = core::simulate_schedule(core::make_schedule(kind, 4, 8, chunks), costs);
    const auto j = simulate("--uniform 1,1.5," + std::string(kind == core::ScheduleKind::ZbH1 ? "0.5" : "0") +
                            " --schedule " + schedule + " --pp 4 --microbatches 8 --chunks " + std::to_string(chunks) +
                            " --platform ideal");
    EXPECT_NEAR(j.value("bubble_fraction", -1.0), stats.bubble_fraction, 1e-6) << schedule;
    EXPECT_NEAR(j.value("step_time_s", -1.0), stats.step_time, 1e-6 * stats.step_time) << schedule;
  }
}

TEST(Simulator, MessageLatencyEagerOrRendezvousMatchesCoresStatistic) {
  // Messages of 1 byte over a link of latency L (and no bandwidth limit to speak of):
  // each takes L, from the send (eager) or from the later of send and receive
  // (rendezvous, what Gloo does), as core's schedule statistics model them.
  const double latency = 0.3;
  for (const char* mode : {"eager", "rendezvous"})
    for (const char* schedule : {"afab", "1f1b", "zb-h1"}) {
      const core::ScheduleKind kind = core::parse_schedule_kind(schedule);
      const std::string platform =
          write_file(std::string("latency_") + mode + ".json",
                     std::string(R"({"preset": "ideal", "intra_latency": 0.3, "p2p": ")") + mode + "\"}");
      core::OpCosts costs;
      costs.forward = 1;
      costs.backward_input = 1.5;
      costs.backward_weight = kind == core::ScheduleKind::ZbH1 ? 0.5 : 0.0;
      costs.p2p = latency;
      costs.p2p_rendezvous = std::string(mode) == "rendezvous";
      const auto stats = core::simulate_schedule(core::make_schedule(kind, 4, 8), costs);
      const auto j = simulate("--uniform 1,1.5," + std::string(kind == core::ScheduleKind::ZbH1 ? "0.5" : "0") +
                              " --schedule " + schedule + " --pp 4 --microbatches 8 --p2p-bytes 1 --platform " + platform);
      EXPECT_NEAR(j.value("step_time_s", -1.0), stats.step_time, 1e-6 * stats.step_time) << mode << " " << schedule;
      EXPECT_NEAR(j.value("bubble_fraction", -1.0), stats.bubble_fraction, 1e-6) << mode << " " << schedule;
    }
}

TEST(Simulator, SimulatedTraceCarriesItsPlanAndMessagesForTheBubbleAnalysis) {
  // `quintnet bubble` on a simulated trace: the schedule from the trace's plan, the
  // latency from its send -> receive arrows (eager or rendezvous, as the platform says),
  // and so the schedule model's prediction equals what the simulation measured.
  for (const char* mode : {"eager", "rendezvous"}) {
    const std::string platform = write_file(std::string("arrows_") + mode + ".json",
                                            std::string(R"({"preset": "ideal", "intra_latency": 0.3, "p2p": ")") +
                                                mode + "\"}");
    const std::string trace = ::testing::TempDir() + "/sim_arrows_" + mode + ".json";
    simulate("--uniform 1,2 --pp 4 --microbatches 8 --p2p-bytes 1 --platform " + platform + " --trace " + trace);
    const core::Trace t = core::read_trace(trace);
    EXPECT_EQ(t.flows.size(), 2u * 3 * 8) << mode;  // activations and gradients over 3 stage boundaries
    const auto r = run_command(bin("quintnet") + " bubble " + trace + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j.at("measured").get<double>(), 3.0 / 11.0 + 0.05) << mode;  // the latency shows
    EXPECT_NEAR(j.at("predicted").get<double>(), j.at("measured").get<double>(), 1e-6) << mode;
  }
}

TEST(Simulator, RingAllReduceTakesTwoNMinusOneHopsOfLatencyAndAShare) {
  // One node of 16 GPUs: B = 100 GB/s per direction, a = 5 us between two GPUs.
  const std::string platform = write_file("ring_platform.json",
                                          R"({"name": "ring", "nodes": 1, "gpus_per_node": 16,
                                              "intra_bandwidth": 1e11, "intra_latency": 5e-6})");
  for (int n : {2, 4, 8, 16})
    for (double bytes : {1e3, 1e6, 1e9}) {
      const auto j = simulate("--allreduce " + std::to_string(bytes) + " --ranks " + std::to_string(n) +
                              " --platform " + platform);
      const double expected = 2.0 * (n - 1) * (5e-6 + bytes / (n * 1e11));
      EXPECT_NEAR(j.value("allreduce_s", -1.0), expected, 1e-6 * expected) << "n " << n << " bytes " << bytes;
    }
}

// A SimGrid <cluster>: each host a private split-duplex link (bandwidth B, latency a/2)
// (no backbone), so a route between two hosts has latency a and
// bandwidth B, like the JSON platform's NVLink switch.
std::string cluster_xml(const std::string& name, int hosts, const std::string& extra_props = "") {
  return write_file(name, R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="root" routing="Full">)" + extra_props + R"(
    <cluster id="node" prefix="gpu" radical="0-)" + std::to_string(hosts - 1) + R"(" suffix="" speed="156Tf"
             bw="100GBps" lat="2.5us" sharing_policy="SPLITDUPLEX"/>
  </zone>
</platform>
)");
}

TEST(Simulator, XmlPlatformRingAllReduceFollowsTheClosedForm) {
  const std::string platform = cluster_xml("ring_platform.xml", 16);
  for (int n : {2, 8, 16})
    for (double bytes : {1e3, 1e9}) {
      const auto j = simulate("--allreduce " + std::to_string(bytes) + " --ranks " + std::to_string(n) +
                              " --platform " + platform);
      const double expected = 2.0 * (n - 1) * (5e-6 + bytes / (n * 1e11));
      EXPECT_NEAR(j.value("allreduce_s", -1.0), expected, 1e-6 * expected) << "n " << n << " bytes " << bytes;
    }
}

// The JSON platform's links and routes written out by hand as SimGrid XML: per GPU a
// split-duplex link (up for sending, down for receiving), a route per ordered pair.
std::string full_routed_xml(const std::string& name, int hosts) {
  std::string xml = R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><zone id="root" routing="Full">
  <prop id="gpus_per_node" value=")" + std::to_string(hosts) + R"("/>
  <prop id="peak_flops" value="312e12"/><prop id="memory_bytes" value="80e9"/>
)";
  // Written in reverse so the file order is not the rank order (gpu10 before gpu9).
  for (int i = hosts - 1; i >= 0; --i)
    xml += "  <host id=\"gpu" + std::to_string(i) + "\" speed=\"156Tf\"/><link id=\"l" + std::to_string(i) +
           "\" bandwidth=\"100GBps\" latency=\"2.5us\" sharing_policy=\"SPLITDUPLEX\"/>\n";
  for (int i = 0; i < hosts; ++i)
    for (int j = 0; j < hosts; ++j)
      if (i != j)
        xml += "  <route src=\"gpu" + std::to_string(i) + "\" dst=\"gpu" + std::to_string(j) +
               "\" symmetrical=\"NO\"><link_ctn id=\"l" + std::to_string(i) + "\" direction=\"UP\"/><link_ctn id=\"l" +
               std::to_string(j) + "\" direction=\"DOWN\"/></route>\n";
  return write_file(name, xml + "</zone></platform>\n");
}

TEST(Simulator, XmlPlatformSimulatesAPlanLikeTheSameJsonPlatform) {
  // The same machine twice: as a JSON description (the simulator builds the SimGrid
  // platform) and as a SimGrid XML file.
  const std::string xml = full_routed_xml("dgx_like.xml", 16);
  const std::string json = write_file("dgx_like.json", R"({"nodes": 1, "gpus_per_node": 16, "peak_flops": 312e12,
      "efficiency": 0.5, "memory_bytes": 80e9, "intra_bandwidth": 1e11, "intra_latency": 5e-6})");
  const std::string plan = write_file("xml_plan.yaml",
                                      "batch_size: 16\ngrad_acc_steps: 4\nmesh_dim: [2, 2, 4]\n"
                                      "mesh_name: ['dp', 'tp', 'pp']\nschedule: 1f1b\n");
  const auto from_xml = simulate("--config " + plan + " --model gpt2-124m --platform " + xml);
  const auto from_json = simulate("--config " + plan + " --model gpt2-124m --platform " + json);
  ASSERT_GT(from_json.value("step_time_s", 0.0), 0.0);
  EXPECT_NEAR(from_xml.value("step_time_s", -1.0), from_json.value("step_time_s", 0.0), 1e-12);
  EXPECT_NEAR(from_xml.value("mfu", -1.0), from_json.value("mfu", 0.0), 1e-9);
  EXPECT_NEAR(from_xml.value("bubble_fraction", -1.0), from_json.value("bubble_fraction", 0.0), 1e-9);
}

TEST(Simulator, BadXmlPlatformGetsOneLineAndExitTwo) {
  const std::string malformed = write_file("malformed.xml", "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">");
  // Ranks follow the natural order of the host names (gpu2, gpu9, gpu10), not the file's.
  const std::string unrouted = write_file("unrouted.xml", R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><zone id="z" routing="Full">
  <host id="gpu10" speed="1Gf"/><host id="gpu9" speed="1Gf"/><host id="gpu2" speed="1Gf"/>
  <link id="l" bandwidth="1GBps" latency="1us"/>
  <route src="gpu2" dst="gpu9"><link_ctn id="l"/></route>
</zone></platform>
)");
  const std::string bad_prop = cluster_xml("bad_prop.xml", 4, R"(<prop id="gpus_per_node" value="four"/>)");
  const std::string uneven = cluster_xml("uneven.xml", 6, R"(<prop id="gpus_per_node" value="4"/>)");
  const std::string four = cluster_xml("four.xml", 4);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--allreduce 1e6 --ranks 2 --platform " + malformed, "not a valid SimGrid platform"},
      {"--allreduce 1e6 --ranks 3 --platform " + unrouted, "no route from gpu9 (rank 1) to gpu10 (rank 2)"},
      {"--allreduce 1e6 --ranks 2 --platform " + bad_prop, "must be a positive number, got 'four'"},
      {"--allreduce 1e6 --ranks 2 --platform " + uneven, "6 hosts are not whole nodes"},
      {"--allreduce 1e6 --ranks 8 --platform " + four, "the platform has 4 GPUs"},
      {"--allreduce 1e6 --ranks 2 --nodes 2 --platform " + four, "its hosts are fixed by the file"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_command(bin("quintnet-simulate") + " " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}

TEST(Simulator, BadInputGetsOneLineAndExitTwo) {
  const std::string broken = write_file("broken_platform.json", "{\"nodes\": 2, ");
  const std::string wrong = write_file("wrong_platform.json", "{\"nodes\": -3}");
  const std::string huge = write_file("huge_plan.yaml",
                                      "batch_size: 8\ngrad_acc_steps: 8\ndevice_type: cuda\nmesh_dim: [1, 1, 1]\n"
                                      "mesh_name: ['dp', 'tp', 'pp']\n");
  const std::string wide = write_file("wide_plan.yaml",
                                      "batch_size: 64\ngrad_acc_steps: 1\nmesh_dim: [64, 1, 1]\n"
                                      "mesh_name: ['dp', 'tp', 'pp']\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--uniform 1,2 --platform dgx-z9000", "not a preset"},
      {"--uniform 1,2 --platform " + broken, "not a JSON platform"},
      {"--uniform 1,2 --platform " + wrong, "'nodes' must be"},
      {"--config " + huge + " --model gpt3-175b --platform dgx-a100", "does not fit"},
      {"--config " + wide + " --platform dgx-a100", "needs 64 GPUs"},
      {"--config " + huge + " --model gpt5 --platform dgx-a100", "not known to the cost model"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_command(bin("quintnet-simulate") + " " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}

TEST(Simulator, TraceIsOneTheViewerAndCoreRead) {
  const std::string path = ::testing::TempDir() + "/sim_trace.json";
  const auto r = run_command(bin("quintnet-simulate") +
                             " --uniform 1,2 --schedule 1f1b --pp 4 --microbatches 8 --platform ideal --trace " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const core::Trace t = core::read_trace(path);
  EXPECT_EQ(t.source, "sim");
  int computes = 0;
  for (const auto& e : t.events) computes += e.kind == "forward" || e.kind == "backward";
  EXPECT_EQ(computes, 2 * 4 * 8);
}

TEST(Calibration, SpeedsAreCostModelFlopsOverTheCoreTimeAndBadTracesAreRefused) {
  // A serial executor trace: one rank on a 2-core machine, forward 40 ms, backward 70 ms.
  core::Plan plan;
  core::Trace t;
  t.source = "exec";
  t.plan = plan.to_json();
  t.platform = {{"cores", 2}, {"threads_per_rank", 1}};
  t.ranks = {{0, 0, 0}};
  for (int step = 0; step < 3; ++step) {
    core::TraceEvent f;
    f.kind = "forward", f.name = "F0", f.lane = core::Lane::Compute, f.step = step, f.mb = 0, f.chunk = 0;
    f.ts_us = step * 1e6, f.dur_us = 40000;
    core::TraceEvent b = f;
    b.kind = "backward", b.name = "B0", b.ts_us += 40000, b.dur_us = 70000;
    t.events.push_back(f);
    t.events.push_back(b);
  }
  const std::string path = ::testing::TempDir() + "/serial_exec_trace.json";
  core::write_trace(t, path);
  const std::string calib = ::testing::TempDir() + "/calib.json";
  auto r = run_command(bin("quintnet-calibrate") + " --trace " + path + " -o " + calib);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json c = nlohmann::json::parse(std::ifstream(calib));
  const core::ModelDims dims = core::model_dims(plan.model, plan.max_seq_length);
  const core::StageCost cost = core::stage_cost(dims, 0, dims.layers, plan.micro_batch_size(), 1);
  // No op-shape probe in this trace: all-FLOP costs at the training ops' rate.
  ASSERT_EQ(c["op_costs"].size(), 1u);
  const nlohmann::json& k = c["op_costs"][0];
  EXPECT_NEAR(k["forward_flops_per_s"].get<double>(), cost.forward_flops / 0.040, 1e-6 * cost.forward_flops / 0.04);
  EXPECT_NEAR(k["backward_flops_per_s"].get<double>(), cost.backward_flops / 0.070, 1e-6 * cost.backward_flops / 0.07);
  EXPECT_EQ(k["forward_overhead_s"].get<double>(), 0.0);
  // The calibrated simulation of the same plan reproduces the step: 40 + 70 ms.
  const std::string plan_path = write_file("serial_plan.json", plan.to_json().dump());
  const auto j = simulate("--config " + plan_path + " --calibration " + calib);
  EXPECT_NEAR(j.value("step_time_s", 0.0), 0.110, 1e-6);

  t.source = "sim";
  core::write_trace(t, path);
  r = run_command(bin("quintnet-calibrate") + " --trace " + path + " -o " + calib);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("needs an executor trace"), std::string::npos) << r.err;
}

namespace {

// An executor trace of a tp 2 run on `cores` cores whose ops cost exactly
// layers x overhead + FLOPs / speed (at tp 2: forward 0.4 ms + 20 GFLOP/s, backward 0.9 ms
// + 30 GFLOP/s; unsharded: 0.2 ms + 40, 0.5 ms + 50), the training ops taking `slowdown`
// times that, both ranks computing at once; with an op-shape probe at b, b/2, b/4.
core::Trace tp2_trace_with_probe(int cores, double slowdown) {
  core::Plan plan;
  plan.mesh_dim = {1, 2, 1};
  core::Trace t;
  t.source = "exec";
  t.plan = plan.to_json();
  t.ranks = {{0, 0, 0}, {0, 1, 0}};
  const core::ModelDims dims = core::model_dims(plan.model, plan.max_seq_length);
  const double layers = dims.layers + 2;  // the blocks, the embedding and the head
  auto cost = [&](int tp, double b, bool backward) {
    const core::StageCost c = core::stage_cost(dims, 0, dims.layers, 1, tp, 4.0);
    const double flops = b * (backward ? c.backward_flops : c.forward_flops);
    if (tp == 2) return layers * (backward ? 0.9e-3 : 0.4e-3) + flops / (backward ? 30e9 : 20e9);
    return layers * (backward ? 0.5e-3 : 0.2e-3) + flops / (backward ? 50e9 : 40e9);
  };
  const int b = plan.micro_batch_size();
  nlohmann::json probe = nlohmann::json::array();
  for (int r = 0; r < 2; ++r) {
    nlohmann::json entry = {{"rank", r}, {"solo", true}, {"micro_batch", {b, b / 2, b / 4}}, {"tp", 2}};
    nlohmann::json tp1;
    for (const bool backward : {false, true}) {
      const char* field = backward ? "backward_s" : "forward_s";
      for (const int size : {b, b / 2, b / 4}) {
        entry[field].push_back(cost(2, size, backward));
        tp1[field].push_back(cost(1, size, backward));
      }
    }
    entry["tp1"] = tp1;
    probe.push_back(entry);
  }
  t.platform = {{"cores", cores}, {"threads_per_rank", 1}, {"op_probe", probe}};
  // Two ranks on `cores` cores, computing at the same time: each has min(1, cores / 2).
  const double share = std::min(1.0, cores / 2.0);
  for (int step = 0; step < 3; ++step)
    for (int r = 0; r < 2; ++r) {
      core::TraceEvent f;
      f.kind = "forward", f.name = "F0", f.lane = core::Lane::Compute, f.step = step, f.mb = 0, f.chunk = 0, f.rank = r;
      f.ts_us = step * 1e6, f.dur_us = 1e6 * slowdown * cost(2, b, false) / share;
      core::TraceEvent bw = f;
      bw.kind = "backward", bw.name = "B0", bw.ts_us += f.dur_us, bw.dur_us = 1e6 * slowdown * cost(2, b, true) / share;
      t.events.push_back(f);
      t.events.push_back(bw);
    }
  return t;
}

}  // namespace

TEST(Calibration, TheProbeGivesEachTpsFixedAndPerFlopCostsAndTheRunItsSlowdown) {
  for (const int cores : {1, 2}) {
    const std::string path = ::testing::TempDir() + "/tp2_probe_trace.json";
    core::write_trace(tp2_trace_with_probe(cores, 1.25), path);
    const std::string calib = ::testing::TempDir() + "/tp2_probe_calib.json";
    const auto r = run_command(bin("quintnet-calibrate") + " --trace " + path + " -o " + calib);
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json c = nlohmann::json::parse(std::ifstream(calib));
    ASSERT_EQ(c["op_costs"].size(), 2u) << c.dump();
    for (const auto& k : c["op_costs"]) {
      const bool sharded = k["tp"] == 2;
      EXPECT_NEAR(k["forward_overhead_s"].get<double>(), sharded ? 0.4e-3 : 0.2e-3, 1e-9) << k.dump();
      EXPECT_NEAR(k["backward_overhead_s"].get<double>(), sharded ? 0.9e-3 : 0.5e-3, 1e-9) << k.dump();
      EXPECT_NEAR(k["forward_flops_per_s"].get<double>(), sharded ? 20e9 : 40e9, 1e-6 * 40e9) << k.dump();
      EXPECT_NEAR(k["backward_flops_per_s"].get<double>(), sharded ? 30e9 : 50e9, 1e-6 * 50e9) << k.dump();
    }
    // On one core the two ranks' ops shared it: the slowdown is what remains beyond that.
    EXPECT_NEAR(c["slowdown"].get<double>(), 1.25, 1e-9) << "cores " << cores;
    EXPECT_EQ(c["oversubscribed"].get<bool>(), cores < 2);
  }
}

TEST(Simulator, CalibratedRanksShareTheMachinesCoresWhileTheyCompute) {
  // A hand-written calibration (no message time, no optimizer): ops at tp 1 cost 1 ms
  // (forward) and 2 ms (backward) per layer.  Two data-parallel ranks computing side by
  // side take twice as long on one core as on two; on two cores as long as one rank
  // alone.  Two pipeline stages of one microbatch never compute at once: on one core
  // the step is the serial one, each op having the core to itself.
  core::Plan plan;
  const core::ModelDims dims = core::model_dims(plan.model, plan.max_seq_length);
  const double layers = dims.layers + 2;
  auto step_on = [&](int cores, int dp, int pp = 1) {
    const nlohmann::json calib = {
        {"format", "quintnet-calibration"}, {"source", "test"},
        {"op_costs", {{{"tp", 1}, {"forward_flops_per_s", 1e30}, {"forward_overhead_s", 1e-3},
                       {"backward_flops_per_s", 1e30}, {"backward_overhead_s", 2e-3}}}},
        {"probe_ranks", 1}, {"slowdown", 1.0}, {"oversubscribed", false}, {"latency_s", 0.0},
        {"latencies_s", nlohmann::json::array()}, {"bandwidth", 1e30}, {"optimizer_s_per_parameter", 0.0},
        {"cores", cores}, {"threads_per_rank", 1}, {"fitted_messages", 0}, {"fitted_ops", 0}};
    const std::string calib_path = write_file("share_calib.json", calib.dump());
    core::Plan p = plan;
    p.mesh_dim = {dp, 1, pp};
    const std::string plan_path = write_file("share_plan.json", p.to_json().dump());
    return simulate("--config " + plan_path + " --calibration " + calib_path).value("step_time_s", 0.0);
  };
  const double alone = layers * 3e-3;
  EXPECT_NEAR(step_on(2, 1), alone, 1e-6 * alone);
  EXPECT_NEAR(step_on(2, 2), alone, 1e-6 * alone);
  EXPECT_NEAR(step_on(1, 2), 2 * alone, 1e-6 * alone);
  EXPECT_NEAR(step_on(1, 1, 2), alone, 1e-6 * alone);
}

TEST(Planner, ListsFeasibleLayoutsWithReasonsForTheOthers) {
  const auto r = run_command(bin("quintnet-plan") +
                             " --model gpt2-124m --gpus 8 --platform dgx-a100 --global-batch 64 --seq 1024 --simulate 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| 1 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp does not divide the attention heads"), std::string::npos) << r.out;  // 12 heads, tp 8
  // The best layout was simulated; SimGrid and the analytic estimate agree within 10%.
  const auto row = r.out.substr(r.out.find("| 1 | "));
  const auto cells = [&] {
    std::vector<std::string> c;
    std::stringstream ss(row.substr(0, row.find('\n')));
    for (std::string cell; std::getline(ss, cell, '|');) c.push_back(cell);
    return c;
  }();
  ASSERT_GE(cells.size(), 6u) << row;
  const double analytic = std::stod(cells[4]), simulated = std::stod(cells[5]);
  EXPECT_NEAR(simulated, analytic, 0.1 * analytic) << row;

  const auto none = run_command(bin("quintnet-plan") + " --model gpt3-175b --gpus 8 --platform dgx-a100 --simulate 0");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no layout of gpt3-175b fits"), std::string::npos) << none.err;
}

TEST(Simulator, DataParallelBucketsOverlapTheLastBackward) {
  // GPT-2 355M on 8 GPUs of a DGX-A100, pure data parallelism: the gradients (710 MB in
  // 16-bit) leave in 25 MB buckets during the backward, so little of their ring
  // all-reduce shows; all of it would without the overlap.
  const std::string plan = write_file("dp8_plan.yaml",
                                      "batch_size: 64\ngrad_acc_steps: 1\ndevice_type: cuda\nmesh_dim: [8, 1, 1]\n"
                                      "mesh_name: ['dp', 'tp', 'pp']\n");
  const auto step = simulate("--config " + plan + " --model gpt2-355m --seq 1024 --platform dgx-a100");
  const double grad_bytes = core::model_dims("gpt2-355m").parameters() * 2;
  const auto ring = simulate("--allreduce " + std::to_string(grad_bytes) + " --ranks 8 --platform dgx-a100");
  const double exposed = step.value("exposed_comm_fraction", 1.0) * step.value("step_time_s", 0.0);
  const double whole = ring.value("allreduce_s", 0.0);
  EXPECT_GT(whole, 0.002);
  EXPECT_LT(exposed, 0.25 * whole) << "exposed " << exposed << " s of a " << whole << " s all-reduce";
}

TEST(Simulator, HierarchicalAllReduceIsReduceScatterAcrossNodesAllGather) {
  // 4 nodes x 4 GPUs: inside a node B_in = 100 GB/s, a_in = 2 us; between nodes one NIC
  // per GPU, B_x = 10 GB/s, route latency a_in + a_x = 2 + 8 us.
  const std::string platform = write_file("two_level_platform.json",
                                          R"({"name": "two-level", "nodes": 4, "gpus_per_node": 4, "nics_per_node": 4,
                                              "intra_bandwidth": 1e11, "intra_latency": 2e-6,
                                              "nic_bandwidth": 1e10, "inter_latency": 8e-6,
                                              "collective": "hierarchical"})");
  const double S = 1e9;
  const int k = 4, nodes = 4;
  const auto j = simulate("--allreduce " + std::to_string(S) + " --ranks 16 --platform " + platform);
  // Across nodes the route is GPU link, NIC, core, NIC, GPU link: the NICs are the
  // bottleneck (the shared core has 16 x 10 GB/s).
  const double expected = 2.0 * (k - 1) * (2e-6 + S / (k * 1e11)) + 2.0 * (nodes - 1) * (10e-6 + S / (k * nodes * 1e10));
  EXPECT_NEAR(j.value("allreduce_s", -1.0), expected, 1e-6 * expected);
  // The flat ring over the same 16 GPUs crosses the NICs in every step: slower.
  const auto flat = simulate("--allreduce " + std::to_string(S) + " --ranks 16 --collective ring --platform " + platform);
  EXPECT_GT(flat.value("allreduce_s", 0.0), 1.5 * expected);
}

// Platform JSON that is not an object, or has text where a number belongs (and the
// reverse), or a count past any cluster: one line, exit 2 (found by platform_fuzzer).
TEST(Simulator, BadJsonPlatformsGetOneLineAndExitTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2]", "is a JSON object"},
      {R"({"preset": 7})", "'preset' must be text"},
      {R"({"name": 3})", "'name' must be text"},
      {R"({"nodes": 1e300})", "'nodes' must be a number from 1 to"},
      {R"({"topology": "torus"})", "'topology' must be \"switch\", \"fat-tree\" or \"rail\""},
      {R"({"topology": "rail", "nodes_per_leaf": 0})", "'nodes_per_leaf' must be a number from 1 to"},
      {R"({"leaf_oversubscription": 0.5})", "'leaf_oversubscription' must be a number >= 1"},
      {R"({"preset": "cpu-local", "topology": "fat-tree"})", "ranks sharing CPU cores"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string path = write_file("bad_platform.json", text);
    auto r = run_command(bin("quintnet-simulate") + " --allreduce 1e6 --ranks 2 --platform " + path);
    EXPECT_EQ(r.code, 2) << text << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << text << "\n" << r.err;
  }
}

// A simulation's memory is estimated before it starts (its op count exactly: the
// schedule's actions, a TP all-reduce record per compute op, the DP buckets), and one
// that would not fit is refused with the estimate and the memory there is, exit 2.
TEST(Simulator, ASimulationTooBigForTheMachineIsRefusedBeforeItStarts) {
  const std::string dp8 = write_file("mem_dp8.yaml", "batch_size: 64\ngrad_acc_steps: 2\ndevice_type: cuda\nmesh_dim: [8, 1, 1]\n"
                                                     "mesh_name: ['dp', 'tp', 'pp']\n");
  const std::string mesh = write_file("mem_3d.yaml", "batch_size: 64\ngrad_acc_steps: 8\ndevice_type: cuda\nmesh_dim: [2, 2, 4]\n"
                                                     "mesh_name: ['dp', 'tp', 'pp']\nschedule: interleaved\n");
  for (const std::string& args : {std::string("--uniform 1,2 --pp 4 --microbatches 8 --platform ideal"),
                                  "--config " + dp8 + " --model gpt2-355m --seq 1024 --platform dgx-a100",
                                  "--config " + mesh + " --model gpt2-124m --seq 1024 --platform dgx-a100 --nodes 2"}) {
    const auto j = simulate(args);
    EXPECT_EQ(j.value("estimated_events", 0.0), j.value("events", -1.0)) << args;
    EXPECT_GT(j.value("estimated_memory_bytes", 0.0), 30e6) << args;
  }
  const auto r = run_command("QN_SIM_MEMORY_BYTES=20000000 " + bin("quintnet-simulate") + " --config " + dp8 +
                             " --model gpt2-355m --platform dgx-a100 --trace " + ::testing::TempDir() + "/never.json");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("the simulation needs about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0.02 GiB available"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// What-if stragglers against closed forms.  A synchronous data-parallel step of 1,024
// GPUs on an ideal network is set by its slowest rank: one rank (or one node) at 0.8x
// makes it 1/0.8 as long.  A 1F1B pipeline whose last stage runs at half speed keeps that
// stage busy from its first forward to its last backward: (p-1)(tf+tb) + m(tf+tb)/f.
TEST(Simulator, AStragglerSlowsTheStepAsTheClosedFormSays) {
  const std::string sync = write_file("sync1024.yaml", "batch_size: 4096\ngrad_acc_steps: 4\ndevice_type: cuda\n"
                                                       "mesh_dim: [1024, 1, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  const std::string base = "--config " + sync + " --model gpt2-124m --platform ideal";
  const double normal = simulate(base).value("step_time_s", 0.0);
  ASSERT_GT(normal, 0);
  EXPECT_NEAR(simulate(base + " --straggler 517:0.8").value("step_time_s", 0.0), normal / 0.8, 1e-9 * normal);
  EXPECT_NEAR(simulate(base + " --slow-node 0:0.8").value("step_time_s", 0.0), normal / 0.8, 1e-9 * normal);
  const double tf = 1, tb = 2, p = 4, m = 8, f = 0.5;
  const auto pipeline = simulate("--uniform 1,2 --pp 4 --microbatches 8 --platform ideal --straggler 3:0.5");
  EXPECT_NEAR(pipeline.value("step_time_s", 0.0), (p - 1) * (tf + tb) + m * (tf + tb) / f, 1e-9);
  for (const std::string bad : {"--straggler 4:0.5", "--straggler 2:0", "--straggler x", "--slow-node 1:0.5"}) {
    const auto r = run_command(bin("quintnet-simulate") + " --uniform 1,2 --pp 4 --platform ideal " + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << "\n" << r.err;
  }
}

// The reduced model (one of the dp identical replicas simulated, sim/simulation.h)
// against the full simulation (--exact): step time and bubble within 0.1% on plans of 64
// to 1,024 ranks — every schedule, GPT-3 6.7B to 175B, dp 2 to 64, replicas on whole
// nodes and all ranks on one node, with recomputation, sequence parallelism and ZeRO-1;
// a plan with a straggler is not reduced at all.
TEST(Simulator, ReducedDataParallelModelEqualsTheFullSimulation) {
  struct Case {
    int dp, tp, pp, microbatches, chunks;
    std::string schedule, model, memory_options = "";
  };
  const std::vector<Case> cases = {
      {2, 8, 8, 16, 1, "1f1b", "gpt3-6.7b"},   {4, 8, 8, 8, 1, "afab", "gpt3-6.7b"},
      {4, 8, 4, 8, 2, "interleaved", "gpt3-6.7b"}, {8, 8, 2, 8, 1, "zb-h1", "gpt3-6.7b"},
      {8, 1, 8, 8, 1, "1f1b", "gpt3-6.7b"},   {64, 8, 2, 4, 1, "1f1b", "gpt3-13b"},
      {16, 8, 8, 16, 1, "1f1b", "gpt3-13b"},  {2, 8, 16, 16, 2, "interleaved", "gpt3-175b"},
      {4, 8, 16, 32, 1, "1f1b", "gpt3-175b"}, {32, 8, 4, 8, 1, "zb-h1", "gpt3-6.7b"},
      {2, 4, 8, 8, 1, "afab", "gpt3-13b"},    // a stage's tp x dp = one node: ring hops inside it
      {2, 2, 2, 4, 1, "1f1b", "gpt3-1.3b"},  // 8 ranks, one node
      // Recomputation, sequence parallelism and ZeRO-1 (reduce-scatter, all-gather).
      {8, 8, 2, 8, 1, "zb-h1", "gpt3-6.7b", "recompute: full\nzero_stage: 1\n"},
      {16, 8, 4, 8, 1, "1f1b", "gpt3-13b", "recompute: selective\nsequence_parallel: true\nzero_stage: 1\n"},
      {2, 2, 2, 4, 1, "1f1b", "gpt3-1.3b", "zero_stage: 1\n"},
  };
  int index = 0;
  for (const Case& c : cases) {
    const int ranks = c.dp * c.tp * c.pp;
    std::ostringstream yaml;
    yaml << "model: gpt2\nmodel_config:\n  n_embd: 4096\n  n_layer: 32\n  n_head: 32\n  n_positions: 2048\n"
         << "batch_size: " << c.dp * c.microbatches << "\ngrad_acc_steps: " << c.microbatches
         << "\ndevice_type: cuda\nmesh_dim: [" << c.dp << ", " << c.tp << ", " << c.pp
         << "]\nmesh_name: ['dp', 'tp', 'pp']\nschedule: " << c.schedule << "\nvirtual_stages: " << c.chunks << "\n"
         << c.memory_options;
    const std::string plan = write_file("reduce_" + std::to_string(index++) + ".yaml", yaml.str());
    const std::string args = "--config " + plan + " --model " + c.model + " --seq 2048 --platform dgx-a100 --nodes " +
                             std::to_string(std::max(1, ranks / 8));
    const auto reduced = simulate(args), full = simulate(args + " --exact");
    const std::string what = c.model + " dp " + std::to_string(c.dp) + " tp " + std::to_string(c.tp) + " pp " +
                             std::to_string(c.pp) + " " + c.schedule + " " + c.memory_options;
    EXPECT_EQ(reduced.value("replicas_simulated_once", 0), c.dp) << what;
    EXPECT_EQ(full.value("replicas_simulated_once", 0), 1) << what;
    const double step = full.value("step_time_s", 0.0), bubble = full.value("bubble_fraction", 0.0);
    ASSERT_GT(step, 0) << what;
    EXPECT_NEAR(reduced.value("step_time_s", 0.0), step, 1e-3 * step) << what;
    EXPECT_NEAR(reduced.value("bubble_fraction", 0.0), bubble, 1e-3 * std::max(bubble, 1e-3)) << what;
    EXPECT_EQ(reduced.value("events", 0), full.value("events", -1)) << what;
    EXPECT_EQ(reduced.value("ranks", 0), ranks) << what;
  }
  // Stragglers break the symmetry, and so do ring hops some of which cross nodes (tp 4:
  // two members per node): simulated in full.
  const std::string sync = write_file("reduce_straggler.yaml", "batch_size: 64\ngrad_acc_steps: 1\ndevice_type: cuda\n"
                                                              "mesh_dim: [64, 1, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  const auto slow = simulate("--config " + sync + " --model gpt2-124m --platform dgx-a100 --nodes 8 --straggler 3:0.8");
  EXPECT_EQ(slow.value("replicas_simulated_once", 0), 1);
  const std::string mixed = write_file("reduce_mixed.yaml", "batch_size: 64\ngrad_acc_steps: 4\ndevice_type: cuda\n"
                                                           "mesh_dim: [16, 4, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  EXPECT_EQ(simulate("--config " + mixed + " --model gpt2-124m --platform dgx-a100 --nodes 8").value("replicas_simulated_once", 0), 1);
  // So do degraded NICs, jitter and networks of leaf or rail switches.
  for (const std::string what_if : {"--slow-nic 2/0:0.5", "--failed-nic 2/0", "--jitter lognormal:0.05"})
    EXPECT_EQ(simulate("--config " + sync + " --model gpt2-124m --platform dgx-a100 --nodes 8 " + what_if)
                  .value("replicas_simulated_once", 0), 1) << what_if;
  EXPECT_EQ(simulate("--config " + sync + " --model gpt2-124m --platform dgx-a100-superpod --nodes 8")
                .value("replicas_simulated_once", 0), 1);
}

// Networks of switches against closed forms, each a ring all-reduce of S bytes over n
// GPUs, one per node (NIC B_x = 10 GB/s, route latency a = 2 + 8 us): 2(n-1)(a + S/(n b))
// with b the slowest hop's share.  Fat-tree, 2 leaves of 4 nodes: the two hops between
// leaves get their leaf's uplink, 4 B_x / 8 = B_x/2 at 8:1, or a half of a spine of
// 2 uplinks / 2 = B_x/2 at 2:1 more, B_x/4.  Rail-optimized, 2 nodes of 2 GPUs and 2
// NICs: GPU 1 of a node reaches GPU 0 of the other across rails, through rail switch 1's
// uplink (2 B_x / 4 = B_x/2, both such hops going up it: B_x/4 each); one rail (one GPU
// and NIC per node) never leaves its switch, oversubscribed or not.
TEST(Simulator, FatTreeAndRailNetworksFollowTheClosedForms) {
  const double S = 1e9, Bx = 1e10, a = 10e-6;
  auto ring = [&](double n, double b) { return 2 * (n - 1) * (a + S / (n * b)); };
  auto network = [&](const std::string& name, int nodes, int gpus, const std::string& rest) {
    return write_file(name + ".json", "{\"nodes\": " + std::to_string(nodes) + ", \"gpus_per_node\": " + std::to_string(gpus) +
                                          ", \"nics_per_node\": " + std::to_string(gpus) +
                                          R"(, "intra_bandwidth": 1e11, "intra_latency": 2e-6, "nic_bandwidth": 1e10,
                                           "inter_latency": 8e-6, )" + rest + "}");
  };
  auto allreduce = [&](const std::string& platform, int n) {
    return simulate("--allreduce 1e9 --ranks " + std::to_string(n) + " --platform " + platform).value("allreduce_s", -1.0);
  };
  const std::string leaf = R"("topology": "fat-tree", "nodes_per_leaf": 4, "leaf_oversubscription": 8)";
  EXPECT_NEAR(allreduce(network("switch", 8, 1, R"("topology": "switch")"), 8), ring(8, Bx), 1e-9);
  EXPECT_NEAR(allreduce(network("fat_tree", 8, 1, leaf), 8), ring(8, Bx / 2), 1e-9);
  EXPECT_NEAR(allreduce(network("fat_tree_spine", 8, 1, leaf + R"(, "oversubscription": 2)"), 8), ring(8, Bx / 4), 1e-9);
  const std::string rails = R"("topology": "rail", "nodes_per_leaf": 4, "leaf_oversubscription": 4)";
  EXPECT_NEAR(allreduce(network("rail_cross", 2, 2, rails), 4), ring(4, Bx / 4), 1e-9);
  EXPECT_NEAR(allreduce(network("rail_one", 4, 1, rails), 4), ring(4, Bx), 1e-9);
  // The presets build and say what they are.
  for (const std::string preset : {"dgx-a100-superpod", "dgx-h100-superpod", "a100x4-fat-tree"})
    EXPECT_GT(simulate("--allreduce 1e9 --ranks 64 --platform " + preset + " --nodes 16").value("allreduce_s", 0.0), 0) << preset;
}

// A degraded NIC: the ring hop through it at its share of the bandwidth (8 nodes of one
// GPU, node 3's NIC at 0.5: 2(n-1)(a + S/(n B_x/2))).  A failed NIC: its GPU's messages
// leave through the node's next NIC, which then carries two GPUs' traffic — with the
// two-level all-reduce over 2 nodes of 4 (each position's ring across nodes on its own
// NIC), the across-nodes phase at B_x/2: 2(k-1)(a_in + S/(k B_in)) + 2(N-1)(a + S/(kN B_x/2)).
// A node with no working NIC is reported, one line, exit 2.
TEST(Simulator, ADegradedOrFailedNicSlowsTheAllReduceAsTheClosedFormSays) {
  const double S = 1e9, Bx = 1e10, Bin = 1e11, a = 10e-6, k = 4, N = 2;
  const std::string flat = write_file("nic_flat.json", R"({"nodes": 8, "gpus_per_node": 1, "nics_per_node": 1,
      "intra_bandwidth": 1e11, "intra_latency": 2e-6, "nic_bandwidth": 1e10, "inter_latency": 8e-6})");
  EXPECT_NEAR(simulate("--allreduce 1e9 --ranks 8 --platform " + flat + " --slow-nic 3/0:0.5").value("allreduce_s", 0.0),
              2 * 7 * (a + S / (8 * Bx / 2)), 1e-9);
  const std::string two_level = write_file("nic_two_level.json", R"({"nodes": 2, "gpus_per_node": 4, "nics_per_node": 4,
      "intra_bandwidth": 1e11, "intra_latency": 2e-6, "nic_bandwidth": 1e10, "inter_latency": 8e-6, "collective": "hierarchical"})");
  auto two_level_time = [&](double across) {
    return 2 * (k - 1) * (2e-6 + S / (k * Bin)) + 2 * (N - 1) * (a + S / (k * N * across));
  };
  EXPECT_NEAR(simulate("--allreduce 1e9 --ranks 8 --platform " + two_level).value("allreduce_s", 0.0), two_level_time(Bx), 1e-9);
  EXPECT_NEAR(simulate("--allreduce 1e9 --ranks 8 --platform " + two_level + " --failed-nic 1/0").value("allreduce_s", 0.0),
              two_level_time(Bx / 2), 1e-9);
  for (const std::string bad : {"--failed-nic 1/*", "--failed-nic 1/0,1/1,1/2,1/3", "--slow-nic 1/0:2", "--slow-nic 2/0:0.5",
                                "--slow-nic 1/4:0.5", "--failed-nic 1/0:0.5", "--slow-nic x", "--jitter normal:0.1"}) {
    const auto r = run_command(bin("quintnet-simulate") + " --allreduce 1e9 --ranks 8 --platform " + two_level + " " + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << "\n" << r.err;
  }
}

// Per-op jitter: reproducible from its seed, another seed another step; its factors have
// mean 1, so 400 microbatches of (1 s, 2 s) on one rank, lognormal with cv 0.1, take
// 1,200 s within a few standard deviations of the sum (sqrt(400 (1 + 4)) 0.1 = 4.5 s);
// cv 0 is no jitter.
TEST(Simulator, JitterIsReproducibleAndKeepsTheMeanOpTime) {
  const std::string serial = "--uniform 1,2 --pp 1 --microbatches 400 --platform ideal";
  const double plain = simulate(serial).value("step_time_s", 0.0);
  EXPECT_NEAR(plain, 1200, 1e-9);
  for (const char* kind : {"normal", "lognormal"}) {
    const double once = simulate(serial + " --jitter " + kind + ":0.1").value("step_time_s", 0.0);
    EXPECT_EQ(simulate(serial + " --jitter " + kind + ":0.1").value("step_time_s", -1.0), once) << kind;
    EXPECT_NE(simulate(serial + " --jitter " + kind + ":0.1 --seed 2").value("step_time_s", once), once) << kind;
    EXPECT_NE(once, plain) << kind;
    EXPECT_NEAR(once, plain, 25) << kind;
    EXPECT_EQ(simulate(serial + " --jitter " + kind + ":0").value("step_time_s", -1.0), plain) << kind;
  }
  for (const std::string bad : {"--jitter gauss:0.1", "--jitter normal:2", "--jitter normal", "--jitter lognormal:-1"}) {
    const auto r = run_command(bin("quintnet-simulate") + " " + serial + " " + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
  }
}

// Activation memory per layer (Korthikanti et al. 2022, Table 2) for GPT-3 175B at tp 8:
// sbh(10 + 24/t + 5as/(ht)) tensor-parallel only; sequence parallelism makes the 10 sbh
// of LayerNorm and dropout 10/t; selective recomputation drops the 5as/(ht) of the
// attention core; full keeps the layer's input, 2sbh.  The paper's headline — selective
// recomputation with sequence parallelism stores ~5x less than tensor parallelism alone —
// holds (5.4x here), and full recomputation recomputes the layer's forward FLOPs.
TEST(CostModel, ActivationMemoryAndRecomputationFollowKorthikanti) {
  const core::ModelDims m = core::model_dims("gpt3-175b");
  const double s = m.seq, h = m.hidden, a = m.heads, t = 8, sbh = s * h;
  auto layer = [&](const std::string& recompute, bool sp) {
    core::MemoryOptions o;
    o.recompute = recompute, o.sequence_parallel = sp;
    return core::stage_cost(m, 1, 2, 1, 8, 2.0, o);  // one middle layer, micro-batch 1
  };
  EXPECT_NEAR(layer("none", false).activation_bytes, sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1);
  EXPECT_NEAR(layer("none", true).activation_bytes, sbh * (34 / t + 5 * a * s / (h * t)), 1);
  EXPECT_NEAR(layer("selective", false).activation_bytes, sbh * (10 + 24 / t), 1);
  EXPECT_NEAR(layer("selective", true).activation_bytes, sbh * 34 / t, 1);
  EXPECT_NEAR(layer("full", false).activation_bytes, 2 * sbh, 1);
  EXPECT_NEAR(layer("full", true).activation_bytes, 2 * sbh / t, 1);
  const double ratio = layer("none", false).activation_bytes / layer("selective", true).activation_bytes;
  EXPECT_GT(ratio, 5.0);
  EXPECT_LT(ratio, 6.0);
  EXPECT_NEAR(layer("full", false).recompute_flops, layer("none", false).forward_flops, 1);
  EXPECT_NEAR(layer("selective", false).recompute_flops, s * 4 * s * h / t, 1);  // QK^T and .V
  EXPECT_EQ(layer("none", false).recompute_flops, 0);
  // ZeRO-1 keeps 1/dp of the 12 bytes of optimizer state per parameter.
  core::MemoryOptions zero;
  zero.zero_stage = 1;
  EXPECT_EQ(core::rank_memory(1e9, 0, false, zero, 8).optimizer, 12e9 / 8);
  EXPECT_EQ(core::rank_memory(1e9, 0, false, {}, 8).total(), 16e9);
}

// A ring reduce-scatter (and an all-gather, the same steps) is half an all-reduce:
// (n-1)(a + S/(nB)).
TEST(Simulator, RingReduceScatterTakesNMinusOneHops) {
  const std::string platform = write_file("rs_platform.json", R"({"name": "ring", "nodes": 1, "gpus_per_node": 16,
                                                                   "intra_bandwidth": 1e11, "intra_latency": 5e-6})");
  for (int n : {2, 4, 8, 16}) {
    const auto j = simulate("--allreduce 1e9 --reduce-scatter --ranks " + std::to_string(n) + " --platform " + platform);
    const double expected = (n - 1) * (5e-6 + 1e9 / (n * 1e11));
    EXPECT_NEAR(j.value("reduce_scatter_s", -1.0), expected, 1e-9 * expected) << n;
  }
}

// In a simulated step: full recomputation on one GPU adds each backward the layers'
// forward FLOPs — (3F + F_layers) / 3F of the step without it — and cuts the stored
// activations; ZeRO-1 over dp 2 holds half the optimizer state and its DP collectives are
// reduce-scatters and a parameter all-gather.
TEST(Simulator, RecomputationAndZeroOneChangeTimeAndMemoryAsModelled) {
  auto plan = [&](const std::string& name, const std::string& mesh, const std::string& extra) {
    return write_file(name, "model: gpt2\nmodel_config: {n_embd: 2048, n_layer: 24, n_head: 16}\nbatch_size: 8\n"
                            "grad_acc_steps: 4\ndevice_type: cuda\nmesh_dim: " + mesh + "\nmesh_name: [dp, tp, pp]\n" + extra);
  };
  const std::string args = " --model gpt3-1.3b --seq 2048 --platform dgx-a100 --nodes 1";
  const auto none = simulate("--config " + plan("rc_none.yaml", "[1, 1, 1]", "") + args);
  const auto full = simulate("--config " + plan("rc_full.yaml", "[1, 1, 1]", "recompute: full\n") + args);
  const core::ModelDims m = core::model_dims("gpt3-1.3b");
  const double all = core::stage_cost(m, 0, m.layers, 2, 1).forward_flops,
               layers = core::stage_cost(m, 1, m.layers - 1, 2, 1).forward_flops + 2 * core::stage_cost(m, 1, 2, 2, 1).forward_flops;
  EXPECT_NEAR(full.value("step_time_s", 0.0) / none.value("step_time_s", 1.0), (3 * all + layers) / (3 * all), 1e-9);
  EXPECT_LT(full["peak_memory_split"].value("activations", 1e300), 0.2 * none["peak_memory_split"].value("activations", 0.0));

  const std::string dp2 = plan("zero_dp2.yaml", "[2, 1, 1]", "zero_stage: 1\n");
  const auto zero = simulate("--config " + dp2 + args);
  const auto plain = simulate("--config " + plan("plain_dp2.yaml", "[2, 1, 1]", "") + args);
  EXPECT_NEAR(zero["peak_memory_split"].value("optimizer", 0.0), plain["peak_memory_split"].value("optimizer", 0.0) / 2, 1);
  const std::string trace = ::testing::TempDir() + "/zero_dp2.json";
  ASSERT_EQ(run_command(bin("quintnet-simulate") + " --config " + dp2 + args + " --exact --trace " + trace).code, 0);
  const core::Trace t = core::read_trace(trace);
  int scatters = 0, gathers = 0, allreduces = 0;
  for (const auto& e : t.events) {
    scatters += e.kind == "reducescatter";
    gathers += e.kind == "allgather";
    allreduces += e.kind == "allreduce";
  }
  EXPECT_GT(scatters, 0);
  EXPECT_EQ(gathers, 2);  // one per rank, after its optimizer step
  EXPECT_EQ(allreduces, 0);
}

// The planner searches recomputation, sequence parallelism and ZeRO-1 with each layout:
// GPT-3 175B on 1,024 A100s (global batch 1,536, sequence 2,048) has at least 50 layouts
// that fit, and its best simulates at least as fast as Megatron-LM's published layout for
// it (tp 8 x pp 8, interleaved, micro-batch 1, full recomputation) simulated the same way.
TEST(Planner, SearchesMemoryOptionsAndBeatsMegatronsPublishedLayout) {
  const auto r = run_command(bin("quintnet-plan") + " --model gpt3-175b --gpus 1024 --platform dgx-a100 "
                                                    "--global-batch 1536 --seq 2048 --micro-batches 1,2 --simulate 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto can_run = r.out.find(" can run");
  ASSERT_NE(can_run, std::string::npos) << r.out;
  const int feasible = std::stoi(r.out.substr(r.out.rfind(", ", can_run) + 2));
  EXPECT_GE(feasible, 50) << r.out;
  const auto row = r.out.substr(r.out.find("| 1 | "));
  std::vector<std::string> cells;
  std::stringstream ss(row.substr(0, row.find('\n')));
  for (std::string cell; std::getline(ss, cell, '|');) cells.push_back(cell);
  ASSERT_GE(cells.size(), 6u) << row;
  const double best = std::stod(cells[5]);
  const std::string megatron = write_file("megatron_175b.yaml",
      "model: gpt2\nmodel_config: {n_embd: 12288, n_layer: 96, n_head: 96}\nbatch_size: 1536\ngrad_acc_steps: 96\n"
      "device_type: cuda\nmesh_dim: [16, 8, 8]\nmesh_name: [dp, tp, pp]\nschedule: interleaved\nvirtual_stages: 2\n"
      "recompute: full\n");
  const double published = simulate("--config " + megatron + " --model gpt3-175b --seq 2048 --platform dgx-a100 --nodes 128")
                               .value("step_time_s", 0.0);
  ASSERT_GT(published, 0);
  EXPECT_LE(best, published) << row;
}
