// Gradient bucketing: one all-reduce per bucket per step, the first launched while
// the backward pass is still running, identical averaged gradients on both ranks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/run_command.h"

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;

TEST(DpBuckets, OneAllReducePerBucketAndTheFirstOverlapsTheBackward) {
  auto r = run_command(bin("quintnet-launch") + " --nproc 2 -- " + bin("dp_bucket_probe"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  int steps = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto brace = line.find('{');
    ASSERT_NE(brace, std::string::npos) << line;
    auto j = nlohmann::json::parse(line.substr(brace));
    EXPECT_GT(j["buckets"].get<int>(), 2);
    EXPECT_EQ(j["allreduces"].get<int>(), j["buckets"].get<int>());
    EXPECT_LT(j["first_start_minus_backward_end_ms"].get<double>(), 0.0) << "first bucket launched after the backward";
    EXPECT_EQ(j["grad_checksums"][0].get<double>(), j["grad_checksums"][1].get<double>());
    ++steps;
  }
  EXPECT_EQ(steps, 3);
}
