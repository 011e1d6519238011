// The simulator against closed forms, each simulation a quintnet-simulate process
// (SimGrid allows one engine per process): uniform op costs on an ideal network give
// (m+p-1)(tf+tb) for AFAB and 1F1B; the bubble equals core's statistic for every
// schedule; a ring all-reduce takes 2(n-1)(a + S/(nB)); bad input exits 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "simulate_command.h"

#include "core/cost_model.h"
#include "core/schedule_generators.h"
#include "core/trace.h"
#include "core/schedule_validator.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::simulate;
using quintnet::testing_util::write_file;
namespace core = quintnet::core;

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

// A tied head on the last of two stages holds a copy of the embedding; after the backward
// both pipeline ranks all-reduce its fp32 gradient (exec/pp/tied_gradients.h): on a slow
// NVLink (100 MB/s at full efficiency, 1 µs latency) the first stage, last to finish its
// backward, waits the ring all-reduce's 2(a + S/(2B)) for S = 4 V h bytes before its
// optimizer step (and the statistics' 8-byte all-reduce: microseconds); an untied head
// (the same Llama with tie_word_embeddings false) waits for nothing.
TEST(Simulator, ATiedHeadsCopyIsAllReducedBetweenThePipelinesEndsBeforeTheOptimizer) {
  const std::string platform = write_file("slow_nvlink.json", R"({"preset": "dgx-a100", "intra_bandwidth": 1e8,
      "intra_efficiency": 1, "intra_latency": 1e-6, "memory_bytes": 0})");
  auto first_stage_wait = [&](bool tied, int pp) {
    const std::string name = std::string(tied ? "tied" : "untied") + std::to_string(pp);
    const std::string plan = write_file(name + ".yaml",
        "model: llama\nllama_config: {hidden_size: 64, num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2,"
        " intermediate_size: 128, vocab_size: 50000, tie_word_embeddings: " + std::string(tied ? "true" : "false") +
        "}\nbatch_size: 4\ngrad_acc_steps: 4\nmax_seq_length: 64\ndevice_type: cuda\nmesh_dim: [1, 1, " +
        std::to_string(pp) + "]\nmesh_name: [dp, tp, pp]\n");
    const std::string trace = ::testing::TempDir() + "/" + name + "_trace.json";
    EXPECT_EQ(run_command(bin("quintnet-simulate") + " --config " + plan + " --platform " + platform + " --trace " + trace).code, 0);
    const core::Trace t = core::read_trace(trace);
    double backward_end = 0, optimizer_start = 0;
    for (const auto& e : t.events)
      if (e.rank == 0 && e.kind == "optimizer") optimizer_start = e.ts_us;
      else if (e.rank == 0 && e.lane == core::Lane::Compute) backward_end = std::max(backward_end, e.end_us());
    return (optimizer_start - backward_end) / 1e6;
  };
  // Two members: one ring step each way of S/2, S/B in all — on pp 4 too, where a ring
  // over the whole pipeline would take 1.5 S/B.
  const double bytes = 4.0 * 50000 * 64;
  EXPECT_NEAR(first_stage_wait(true, 2), bytes / 1e8, 1e-3 * bytes / 1e8);
  EXPECT_NEAR(first_stage_wait(true, 4), bytes / 1e8, 1e-3 * bytes / 1e8);
  EXPECT_LT(first_stage_wait(false, 2), 1e-3 * bytes / 1e8);
}
