// The simulator at scale and its what-ifs: the memory estimate that refuses a simulation
// too big for the machine, the reduced model (one data-parallel replica) against the
// full simulation, stragglers, networks of switches, degraded and failed NICs, jitter —
// each against a closed form or the exact simulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/cost_model.h"
#include "sim/replica_classes.h"
#include "core/trace.h"
#include "simulate_command.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::simulate;
using quintnet::testing_util::write_file;
namespace core = quintnet::core;

}  // namespace

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
// (To 1e-8 of the step: SimGrid ends an execution within its work-amount precision, and
// the step sums four microbatches' ops — measured 2.8e-9.)
TEST(Simulator, AStragglerSlowsTheStepAsTheClosedFormSays) {
  const std::string sync = write_file("sync1024.yaml", "batch_size: 4096\ngrad_acc_steps: 4\ndevice_type: cuda\n"
                                                       "mesh_dim: [1024, 1, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  const std::string base = "--config " + sync + " --model gpt2-124m --platform ideal";
  const double normal = simulate(base).value("step_time_s", 0.0);
  ASSERT_GT(normal, 0);
  EXPECT_NEAR(simulate(base + " --straggler 517:0.8").value("step_time_s", 0.0), normal / 0.8, 1e-8 * normal);
  EXPECT_NEAR(simulate(base + " --slow-node 0:0.8").value("step_time_s", 0.0), normal / 0.8, 1e-8 * normal);
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
// to 1,024 ranks — every schedule, GPT-3 6.7B to 175B, dp 2 to 128, replicas on whole
// nodes, two to a node and all ranks on one node, with recomputation, sequence
// parallelism and ZeRO-1 — and within 0.5% where two ring members share a node and
// pipeline messages share their NICs with the ring.
TEST(Simulator, ReducedDataParallelModelEqualsTheFullSimulation) {
  struct Case {
    int dp, tp, pp, microbatches, chunks;
    std::string schedule, model, memory_options = "";
  };
  const std::vector<Case> cases = {
      {2, 8, 8, 16, 1, "1f1b", "gpt3-6.7b"},   {4, 8, 8, 8, 1, "afab", "gpt3-6.7b"},
      {4, 8, 4, 8, 2, "interleaved", "gpt3-6.7b"}, {8, 8, 2, 8, 1, "zb-h1", "gpt3-6.7b"},
      {8, 1, 8, 8, 1, "1f1b", "gpt3-6.7b"},   {64, 8, 2, 4, 1, "1f1b", "gpt3-13b"},
      {16, 8, 8, 16, 1, "1f1b", "gpt3-13b"},  {2, 8, 16, 16, 2, "interleaved", "gpt3-175b", "recompute: selective\n"},
      {4, 8, 16, 32, 1, "1f1b", "gpt3-175b"}, {32, 8, 4, 8, 1, "zb-h1", "gpt3-6.7b"},
      {2, 4, 8, 8, 1, "afab", "gpt3-13b"},    // a stage's tp x dp = one node: ring hops inside it
      {2, 2, 2, 4, 1, "1f1b", "gpt3-1.3b"},  // 8 ranks, one node
      // Recomputation, sequence parallelism and ZeRO-1 (reduce-scatter, all-gather).
      {8, 8, 2, 8, 1, "zb-h1", "gpt3-6.7b", "recompute: full\nzero_stage: 1\n"},
      {16, 8, 4, 8, 1, "1f1b", "gpt3-13b", "recompute: selective\nsequence_parallel: true\nzero_stage: 1\n"},
      {2, 2, 2, 4, 1, "1f1b", "gpt3-1.3b", "zero_stage: 1\n"},
      // tp 4 of 8 GPUs: two ring members to a node, every other hop across nodes; with a
      // pipeline the stand-in's ring transfer shares the messages' NIC (0.5%, below).
      {64, 4, 1, 4, 1, "1f1b", "gpt3-6.7b"}, {64, 4, 2, 4, 1, "zb-h1", "gpt3-6.7b"},
      {16, 4, 4, 8, 1, "afab", "gpt3-13b"}, {128, 4, 2, 4, 1, "1f1b", "gpt3-6.7b"},
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
    const bool shares_nics = 2 * c.tp == 8 && c.pp > 1;  // see why_not_reducible
    const double tolerance = shares_nics ? 5e-3 : 1e-3;
    EXPECT_NEAR(reduced.value("step_time_s", 0.0), step, tolerance * step) << what;
    EXPECT_NEAR(reduced.value("bubble_fraction", 0.0), bubble, tolerance * std::max(bubble, 1e-3)) << what;
    EXPECT_EQ(reduced.value("events", 0), full.value("events", -1)) << what;
    EXPECT_EQ(reduced.value("ranks", 0), ranks) << what;
  }
  // Ring hops of which only every fourth crosses nodes (tp 2: four members to a node) and
  // networks of leaf or rail switches break the symmetry: simulated in full.
  const std::string mixed = write_file("reduce_mixed.yaml", "batch_size: 128\ngrad_acc_steps: 4\ndevice_type: cuda\n"
                                                           "mesh_dim: [32, 2, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  EXPECT_EQ(simulate("--config " + mixed + " --model gpt2-124m --platform dgx-a100 --nodes 8").value("replicas_simulated_once", 0), 1);
  EXPECT_EQ(simulate("--config " + mixed + " --model gpt2-124m --platform dgx-a100-superpod --nodes 8")
                .value("replicas_simulated_once", 0), 1);
}

// Symmetry with exceptions (sim/replica_classes.h): a what-if's replicas simulated as
// themselves and one stand-in for the others — or, under jitter, 16 sampled replicas and
// the expected latest arrival of all — against the full simulation (--exact), every
// what-if kind on three layouts of 256 to 512 GPUs (ring hops across nodes, a pipeline
// with ZeRO-1, two ring members to a node): step time within 0.5%.  A failed NIC where two
// members share a node is simulated in full (their stand-ins would share its directions).
TEST(Simulator, WhatIfsSimulateTheirReplicasAndStandInsAsTheFullStepDoes) {
  struct Layout {
    int dp, tp, pp, microbatches;
    std::string schedule, options;
  };
  const std::vector<Layout> layouts = {{64, 8, 1, 4, "1f1b", ""}, {16, 8, 4, 8, "zb-h1", "zero_stage: 1\n"}, {32, 4, 2, 4, "1f1b", ""}};
  const std::vector<std::string> what_ifs = {"--straggler 13:0.8", "--slow-node 5:0.7", "--slow-nic 5/3:0.25",
                                             "--failed-nic 5/3", "--jitter normal:0.05",
                                             "--jitter lognormal:0.05 --seed 2", "--jitter normal:0.05 --straggler 13:0.9"};
  for (const Layout& l : layouts) {
    std::ostringstream yaml;
    yaml << "model: gpt2\nmodel_config: {n_embd: 4096, n_layer: 32, n_head: 32, n_positions: 2048}\nbatch_size: "
         << l.dp * l.microbatches << "\ngrad_acc_steps: " << l.microbatches << "\ndevice_type: cuda\nmesh_dim: [" << l.dp
         << ", " << l.tp << ", " << l.pp << "]\nmesh_name: ['dp', 'tp', 'pp']\nschedule: " << l.schedule << "\n" << l.options;
    const std::string plan = write_file("what_if_" + std::to_string(l.dp) + ".yaml", yaml.str());
    const std::string base = "--config " + plan + " --model gpt3-6.7b --seq 2048 --platform dgx-a100 --nodes " +
                             std::to_string(l.dp * l.tp * l.pp / 8) + " ";
    for (const std::string& what_if : what_ifs) {
      const std::string what = plan + " " + what_if;
      const auto reduced = simulate(base + what_if), full = simulate(base + what_if + " --exact");
      const bool jitter = what_if.find("jitter") != std::string::npos;
      const bool paired_nic = l.tp == 4 && what_if.find("failed-nic") != std::string::npos;
      // The touched replicas (node 5 holds one replica's stage, or two with tp 4) and a
      // stand-in; under jitter 16 samples too.
      const bool on_node_5 = what_if.find("node") != std::string::npos || what_if.find("nic") != std::string::npos;
      const int expected = paired_nic ? l.dp : jitter ? std::min(l.dp, 16 + (what_if.find("straggler") != std::string::npos))
                                              : 1 + (l.tp == 4 && on_node_5 ? 2 : 1);
      EXPECT_EQ(reduced.value("replicas_simulated", 0), expected) << what;
      const double step = full.value("step_time_s", 0.0);
      ASSERT_GT(step, 0) << what;
      EXPECT_NEAR(reduced.value("step_time_s", 0.0), step, 5e-3 * step) << what;
      EXPECT_EQ(reduced.value("events", 0), full.value("events", -1)) << what;
    }
  }
}

// Jitter on 256 replicas of one node each (tp 8, 16 microbatches, no pipeline): the step
// waits for the latest of 256 replicas at the DP all-reduce; 16 sampled ones and the
// expected maximum of 256 normals (sim/replica_classes.h) against the full simulation,
// over three seeds: the mean difference within 0.25% (measured -0.09%; with the latest of
// the 16 samples alone, no extrapolation, -0.40%: the test fails), each within 0.6%.
TEST(Simulator, JitterExtrapolatesTheLatestReplicaFromSamples) {
  const std::string plan = write_file("jitter_256.yaml", "model: gpt2\nmodel_config: {n_embd: 4096, n_layer: 32, n_head: 32, "
                                                         "n_positions: 2048}\nbatch_size: 4096\ngrad_acc_steps: 16\n"
                                                         "device_type: cuda\nmesh_dim: [256, 8, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  const std::string base = "--config " + plan + " --model gpt3-6.7b --seq 2048 --platform dgx-a100 --nodes 256 --jitter normal:0.05";
  double sum = 0;
  for (int seed = 1; seed <= 3; ++seed) {
    const std::string args = base + " --seed " + std::to_string(seed);
    const double reduced = simulate(args).value("step_time_s", 0.0), full = simulate(args + " --exact").value("step_time_s", 0.0);
    ASSERT_GT(full, 0) << args;
    EXPECT_NEAR(reduced, full, 6e-3 * full) << args;
    sum += (reduced - full) / full;
  }
  EXPECT_NEAR(sum / 3, 0.0, 2.5e-3);
  EXPECT_NEAR(quintnet::sim::expected_max_of_normals(2), 1 / std::sqrt(M_PI), 1e-9);  // a closed form
  EXPECT_NEAR(quintnet::sim::expected_max_of_normals(1000), 3.24144, 1e-4);  // Tippett's table (1925)
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
