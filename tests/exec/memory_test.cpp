// The executor's peak memory: a pipeline rank keeps only the microbatches the schedule
// has in flight.  Its sent activations and gradients are released as their sends
// complete (exec/pp/pipeline_runner.h); kept until the step's end, they grew the peak by
// one activation per microbatch of the step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "common/run_command.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

// Rank 0's "memory: fullest rank ... = parameters P + gradients G + optimizer state O +
// activations A ..." line (MiB) after a 4-step run of `plan` on `nproc` ranks.
struct MemoryLine {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0;
};

MemoryLine run_and_read_memory(const std::string& name, const std::string& plan, int nproc) {
  const std::string config = write_file(name + "_" + std::to_string(getpid()) + ".yaml", plan);
  const std::string cmd = bin("quintnet-launch") + " --nproc " + std::to_string(nproc) + " -- " + bin("quintnet-train") +
                          " --config " + config + " --max-steps 4 --no-eval --quiet --threads 1";
  const auto r = run_command(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
  std::smatch m;
  const std::regex line(R"(memory: fullest rank [^\n]* parameters ([0-9.]+) \+ gradients ([0-9.]+) \+ )"
                        R"(optimizer state ([0-9.]+) \+ activations ([0-9.]+))");
  if (!std::regex_search(r.out, m, line)) {
    ADD_FAILURE() << "no memory line in:\n" << r.out;
    return {};
  }
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4])};
}

// The original ViT (hidden 64, depth 8: 1.6 MiB of fp32 parameters) in microbatches of 8.
std::string vit_plan(int microbatches, const std::string& mesh, const std::string& extra) {
  return "batch_size: " + std::to_string(8 * microbatches) + "\ngrad_acc_steps: " + std::to_string(microbatches) +
         "\nlearning_rate: 1e-4\nimg_size: 28\npatch_size: 4\nhidden_dim: 64\nn_heads: 4\ndepth: 8\n"
         "mesh_dim: " + mesh + "\nmesh_name: ['dp', 'tp', 'pp']\nschedule: 1f1b\n" + extra;
}

// The activations (MiB) of pp 2 with 1F1B, full recomputation (so the stored activations
// are small and the buffers show) and `microbatches` microbatches.
double activations_mib(int microbatches) {
  return run_and_read_memory("memory_mb" + std::to_string(microbatches), vit_plan(microbatches, "[1, 1, 2]", "recompute: full\n"), 2)
      .activations;
}

}  // namespace

// 1F1B keeps at most pp microbatches in flight, so 8 microbatches peak where 4 do (one
// activation here is 8 x 50 x 64 floats, 0.1 MiB, about 3% of the peak).
TEST(PipelineMemory, PeakDoesNotGrowWithTheStepsMicrobatches) {
  const double four = activations_mib(4), eight = activations_mib(8);
  ASSERT_GT(four, 0);
  EXPECT_NEAR(eight, four, 0.01 * four);
}

// bf16 weights: the model computes with 2 bytes per parameter, and the fp32 masters (4)
// count with AdamW's moments (8) as optimizer state, as in the simulator's split.  Under
// ZeRO-1 over dp 2 each rank keeps its half of the masters as well as of the moments
// (Megatron-LM's distributed optimizer: 12/dp bytes per parameter), so the optimizer
// state is 3/4 of an fp32 run's; the gradients stay fp32 (accumulated in fp32).
TEST(ZeroOneMemory, Bf16WeightsKeepOnlyTheirPiecesOfTheMasters) {
  const MemoryLine fp32 = run_and_read_memory("memory_fp32", vit_plan(2, "[1, 1, 1]", ""), 1);
  const MemoryLine bf16 = run_and_read_memory("memory_bf16w", vit_plan(2, "[1, 1, 1]", "precision: bf16_weights\n"), 1);
  const MemoryLine zero = run_and_read_memory(
      "memory_bf16w_zero", vit_plan(2, "[2, 1, 1]", "precision: bf16_weights\nzero_stage: 1\n"), 2);
  ASSERT_GT(fp32.parameters, 1.0);
  const double rounding = 0.02;  // the line prints MiB with two decimals
  EXPECT_NEAR(bf16.parameters, fp32.parameters / 2, rounding);
  EXPECT_NEAR(bf16.gradients, fp32.gradients, rounding);
  EXPECT_NEAR(bf16.optimizer, fp32.optimizer * 1.5, rounding);
  EXPECT_NEAR(zero.parameters, fp32.parameters / 2, rounding) << "the masters are not the parameters";
  EXPECT_NEAR(zero.gradients, fp32.gradients, rounding);
  EXPECT_NEAR(zero.optimizer, fp32.optimizer * 0.75, rounding) << "half of the masters and moments";
}
