#pragma once
// The simulator's tests run each simulation as a quintnet-simulate process (SimGrid
// allows one engine per process) and read its --json summary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.h"

namespace quintnet::testing_util {

inline nlohmann::json simulate(const std::string& args) {
  const auto r = run_command(bin("quintnet-simulate") + " " + args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

}  // namespace quintnet::testing_util
