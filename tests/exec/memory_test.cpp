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

// Rank 0's "memory: fullest rank ..." line, activations in MiB, after a 4-step run of the
// original ViT on pp 2 with 1F1B, full recomputation (so the stored activations are
// small and the buffers show) and `microbatches` microbatches of 8 samples.
double activations_mib(int microbatches) {
  const std::string config = write_file(
      "memory_mb" + std::to_string(microbatches) + "_" + std::to_string(getpid()) + ".yaml",
      "batch_size: " + std::to_string(8 * microbatches) + "\ngrad_acc_steps: " + std::to_string(microbatches) +
          "\nlearning_rate: 1e-4\nimg_size: 28\npatch_size: 4\nhidden_dim: 64\nn_heads: 4\ndepth: 8\n"
          "mesh_dim: [1, 1, 2]\nmesh_name: ['dp', 'tp', 'pp']\nschedule: 1f1b\nrecompute: full\n");
  const std::string cmd = bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-train") + " --config " + config +
                          " --max-steps 4 --no-eval --quiet --threads 1";
  const auto r = run_command(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
  std::smatch match;
  const std::regex line(R"(memory: fullest rank [^\n]* activations ([0-9.]+))");
  if (!std::regex_search(r.out, match, line)) {
    ADD_FAILURE() << "no memory line in:\n" << r.out;
    return 0;
  }
  return std::stod(match[1]);
}

}  // namespace

// 1F1B keeps at most pp microbatches in flight, so 8 microbatches peak where 4 do (one
// activation here is 8 x 50 x 64 floats, 0.1 MiB, about 3% of the peak).
TEST(PipelineMemory, PeakDoesNotGrowWithTheStepsMicrobatches) {
  const double four = activations_mib(4), eight = activations_mib(8);
  ASSERT_GT(four, 0);
  EXPECT_NEAR(eight, four, 0.01 * four);
}
