// The roofline (sim/roofline.h), the platforms' published figures, and how a simulated
// run is implemented (dp_overlap, tp_overlap, pp_scatter_gather) against closed forms:
// a kernel takes the slower of its FLOPs at the matrix rate and its bytes at memory
// bandwidth; a one-GPU step is the sum of its kernels; an all-reduce after the backward
// adds its ring time; overlapped tensor-parallel all-reduces vanish behind compute;
// scatter/gather sends 1/tp of each message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "simulate_command.h"

#include "core/cost_model.h"
#include "core/layer_kernels.h"
#include "core/trace.h"
#include "sim/platform.h"
#include "sim/roofline.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::simulate;
using quintnet::testing_util::write_file;
namespace core = quintnet::core;
namespace sim = quintnet::sim;

// A GPT-2 124M plan of 2 microbatches of 4 samples per replica on the given mesh.
std::string gpt2_plan(const std::string& name, int dp, int tp, int pp, const std::string& extra = "") {
  return write_file(name, "model: gpt2\nbatch_size: " + std::to_string(8 * dp) +
                              "\ngrad_acc_steps: 2\nmax_seq_length: 1024\ndevice_type: cuda\nmesh_dim: [" +
                              std::to_string(dp) + ", " + std::to_string(tp) + ", " + std::to_string(pp) +
                              "]\nmesh_name: [dp, tp, pp]\n" + extra);
}

}  // namespace

TEST(Roofline, AKernelTakesTheSlowerOfItsFlopsAndItsBytes) {
  const sim::Platform a100 = sim::load_platform("dgx-a100");
  // A large GEMM is bound by its FLOPs, at the matrix table's step for its size.
  core::Kernel big{"fc1", core::Pass::Forward, 2.0 * 8192 * 8192 * 8192, 2.0 * 3 * 8192 * 8192, 1};
  EXPECT_DOUBLE_EQ(sim::kernel_seconds(big, a100), big.flops / (312e12 * 0.859));
  // 0.5 GFLOP: the table's step below 1 GFLOP (Calculon's 0.1).
  core::Kernel small{"small", core::Pass::Forward, 0.5e9, 1e3, 1};
  EXPECT_DOUBLE_EQ(sim::kernel_seconds(small, a100), 0.5e9 / (312e12 * 0.1));
  // Attention scores with 64-wide heads: 2 s² d FLOPs against an s² output — bound by its bytes.
  const double s = 2048, d = 64, heads = 16;
  core::Kernel scores{"attention scores", core::Pass::Forward, 2 * s * s * d * heads, 2 * (2 * s * d + s * s) * heads, 1};
  EXPECT_DOUBLE_EQ(sim::kernel_seconds(scores, a100), scores.bytes / (2039e9 * 0.9));
  // A memory-bound kernel: its bytes at bandwidth times the step of its size (5 MB: 0.6).
  core::Kernel norm{"layernorm", core::Pass::Forward, 0, 5e6, 1};
  EXPECT_DOUBLE_EQ(sim::kernel_seconds(norm, a100), 5e6 / (2039e9 * 0.6));
  // Without a memory bandwidth (the flat model) memory-bound kernels are free.
  EXPECT_EQ(sim::kernel_seconds(norm, sim::load_platform("cpu-local")), 0);
}

TEST(Roofline, EfficiencyTablesStepAtTheirThresholds) {
  const sim::EfficiencyTable t{{{16, 0.8}, {1, 0.6}, {0, 0.1}}};
  EXPECT_EQ(t.at(1e6), 0.8);
  EXPECT_EQ(t.at(16), 0.8);
  EXPECT_EQ(t.at(15.99), 0.6);
  EXPECT_EQ(t.at(1), 0.6);
  EXPECT_EQ(t.at(0.2), 0.1);
  EXPECT_EQ(sim::EfficiencyTable{}.at(5), 1.0);
}

TEST(Platform, GpuPresetsCiteEveryFigureTheySet) {
  for (const std::string name : {"dgx-a100", "dgx-h100", "h200", "dgx-a100-superpod", "dgx-h100-superpod", "a100x4-fat-tree"}) {
    const sim::Platform p = sim::load_platform(name);
    EXPECT_TRUE(p.has_roofline()) << name;
    for (const char* figure : {"peak_flops", "matrix_efficiency", "memory_bytes", "memory_bandwidth", "memory_efficiency",
                               "intra_bandwidth", "intra_efficiency", "nic_bandwidth", "nic_efficiency",
                               "intra_latency", "inter_latency"}) {
      ASSERT_TRUE(p.sources.count(figure)) << name << ": " << figure;
      EXPECT_GT(p.sources.at(figure).size(), 20u) << name << ": " << figure;
    }
    // The JSON form carries them, and reads back as the same platform.
    const nlohmann::json j = sim::platform_to_json(p);
    EXPECT_EQ(j.at("sources").size(), p.sources.size()) << name;
    const sim::Platform again = sim::platform_from_json(j, name);
    EXPECT_EQ(again.matrix_efficiency.steps, p.matrix_efficiency.steps) << name;
    EXPECT_EQ(again.memory_bandwidth, p.memory_bandwidth) << name;
    EXPECT_EQ(again.intra_link_bandwidth(), p.intra_link_bandwidth()) << name;
  }
  // A figure a JSON file changes no longer carries the preset's citation.
  const sim::Platform changed = sim::platform_from_json({{"preset", "dgx-a100"}, {"memory_bandwidth", 1.5e12}}, "mine.json");
  EXPECT_EQ(changed.sources.at("memory_bandwidth"), "set in mine.json");
  // `quintnet simulate --show-platform` prints it.
  const auto shown = run_command(bin("quintnet-simulate") + " --platform dgx-h100 --show-platform");
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out).at("peak_flops"), 989e12);
}

TEST(Platform, MalformedEfficiencyTablesAreRefusedWithTheField) {
  for (const std::string bad : {R"({"matrix_efficiency": [[1, 0.5], [16, 0.8]]})", R"({"matrix_efficiency": [[16, 1.5]]})",
                                R"({"memory_efficiency": "fast"})", R"({"memory_efficiency": [[10]]})",
                                R"({"intra_efficiency": 2})", R"({"sources": {"peak_flops": 3}})"}) {
    const std::string file = write_file("bad_table.json", bad);
    const auto r = run_command(bin("quintnet-simulate") + " --uniform 1,2 --platform " + file);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << "\n" << r.err;
  }
}

// One GPU: the step is its two microbatches' kernels (forward and both backward passes),
// each timed by the roofline written out here, then the optimizer's bytes at bandwidth.
TEST(Simulator, OneGpuStepIsItsKernelsOnTheRoofline) {
  const sim::Platform p = sim::load_platform("dgx-a100");
  auto seconds = [&](const core::Kernel& k) {
    const double memory = k.bytes / (p.memory_bandwidth * p.memory_efficiency.at(k.bytes / 1e6));
    return k.matrix() ? std::max(k.flops / (p.peak_flops * p.matrix_efficiency.at(k.flops / 1e9)), memory) : memory;
  };
  for (const std::string kernels : {"unfused", "fused", "flash"}) {
    const auto j = simulate("--config " + gpt2_plan("one_" + kernels + ".yaml", 1, 1, 1, "kernels: " + kernels + "\n") +
                            " --platform dgx-a100");
    const core::ModelConfig gpt2 = core::Gpt2Config{};  // the plan's model: GPT-2 124M
    const core::ModelDims dims = core::model_dims(gpt2, 1024);
    core::KernelOptions o;
    o.micro_batch = 4, o.microbatches = 2, o.bytes_per_value = 2, o.set = *core::parse_option<core::KernelSet>(kernels);
    double microbatch = 0;
    for (const auto& k : core::stage_kernels(dims, 0, dims.layers, o)) microbatch += k.count * seconds(k);
    const double parameters = core::stage_cost(dims, 0, dims.layers, 4, 1).parameters, optimizer_bytes = 52 * parameters;
    const double optimizer = optimizer_bytes / (p.memory_bandwidth * p.memory_efficiency.at(optimizer_bytes / 1e6));
    EXPECT_NEAR(j.value("step_time_s", 0.0), 2 * microbatch + optimizer, 1e-9) << kernels;
  }
}

// dp_overlap: false — the gradients are all-reduced after the last backward, bucket by
// bucket: the step of one replica plus K buckets' ring all-reduces over 2 GPUs of a node,
// each 2(n-1)(a + S_k/(n B)) with B the NVLink bus bandwidth.  Overlapped, less shows.
TEST(Simulator, GradientAllReduceAfterTheBackwardAddsItsRingTime) {
  const auto one = simulate("--config " + gpt2_plan("dp1.yaml", 1, 1, 1) + " --platform dgx-a100");
  const auto after = simulate("--config " + gpt2_plan("dp2_after.yaml", 2, 1, 1, "dp_overlap: false\n") +
                              " --platform dgx-a100 --exact");
  const auto overlapped = simulate("--config " + gpt2_plan("dp2_overlap.yaml", 2, 1, 1) + " --platform dgx-a100 --exact");
  const sim::Platform p = sim::load_platform("dgx-a100");
  const core::ModelConfig gpt2 = core::Gpt2Config{};
  const double bytes = 2 * core::stage_cost(core::model_dims(gpt2, 1024), 0, 12, 4, 1).parameters;
  const double buckets = std::ceil(bytes / (25.0 * 1024 * 1024)), n = 2;
  const double ring = 2 * (n - 1) * (buckets * p.intra_latency + bytes / (n * p.intra_bandwidth * p.intra_efficiency));
  EXPECT_NEAR(after.value("step_time_s", 0.0), one.value("step_time_s", 0.0) + ring, 1e-6 * ring);
  EXPECT_LT(overlapped.value("step_time_s", 0.0), after.value("step_time_s", 0.0) - 0.5 * ring);
}

// tp_overlap: an op's tensor-parallel all-reduces run while it computes; when they take
// less than it, the step is the one with free tensor-parallel communication.
TEST(Simulator, OverlappedTensorParallelAllReducesHideBehindCompute) {
  const std::string free_links = write_file("free_nvlink.json", R"({"preset": "dgx-a100", "intra_bandwidth": 1e18,
                                                                   "intra_latency": 0})");
  const std::string args = " --model gpt3-1.3b --seq 2048", heads = "model_config: {n_head: 16}\n";
  const auto plain = simulate("--config " + gpt2_plan("tp2.yaml", 1, 2, 1, heads) + args + " --platform dgx-a100");
  const auto hidden = simulate("--config " + gpt2_plan("tp2_overlap.yaml", 1, 2, 1, heads + "tp_overlap: true\n") +
                               args + " --platform dgx-a100");
  const auto free = simulate("--config " + gpt2_plan("tp2_free.yaml", 1, 2, 1, heads) + args + " --platform " + free_links);
  EXPECT_LT(hidden.value("step_time_s", 0.0), plain.value("step_time_s", 0.0) * 0.95);
  // (Within the step end's gradient-norm all-reduce of one number over tp, a few us.)
  EXPECT_NEAR(hidden.value("step_time_s", 0.0), free.value("step_time_s", 0.0), 1e-4 * free.value("step_time_s", 0.0));
}

// pp_scatter_gather: each tp rank sends 1/tp of a stage's output and the receiving stage
// all-gathers it over the tp group — every send carries p2p / tp bytes, every receive is
// followed by an all-gather; across nodes it is faster than sending the whole tensor.
TEST(Simulator, ScatterGatherSendsOneTpthOfEachPipelineMessage) {
  const std::string args = " --model gpt3-1.3b --seq 2048 --platform dgx-a100 --nodes 2 --exact";
  const std::string heads = "model_config: {n_head: 16}\n";
  const std::string plan = gpt2_plan("sg.yaml", 1, 8, 2, heads + "pp_scatter_gather: true\n");
  const std::string trace = ::testing::TempDir() + "/scatter_gather.json";
  ASSERT_EQ(run_command(bin("quintnet-simulate") + " --config " + plan + args + " --trace " + trace).code, 0);
  const core::Trace t = core::read_trace(trace);
  const double whole = 4.0 * 2048 * 2048 * 2;  // micro-batch 4 x 2048 tokens x h 2048 x 2 bytes
  int sends = 0, receives = 0, gathers = 0;
  for (const auto& e : t.events) {
    if (e.name.rfind("SEND", 0) == 0) {
      ++sends;
      EXPECT_EQ(e.bytes, static_cast<std::int64_t>(whole / 8)) << e.name;
    }
    receives += e.name.rfind("RECV", 0) == 0;
    gathers += e.name == "pipeline message all-gather";
  }
  EXPECT_GT(sends, 0);
  EXPECT_EQ(gathers, receives);
  const auto scattered = simulate("--config " + plan + args);
  EXPECT_EQ(scattered.value("estimated_events", 0.0), scattered.value("events", -1.0));  // the memory check counts the all-gathers
  const auto whole_messages = simulate("--config " + gpt2_plan("no_sg.yaml", 1, 8, 2, heads) + args);
  EXPECT_LT(scattered.value("step_time_s", 0.0), whole_messages.value("step_time_s", 0.0));
}
