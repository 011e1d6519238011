// The `quintnet` front door and core's verbs, run as a user runs them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "common/run_command.h"
#include "core/trace.h"

namespace {

using quintnet::testing_util::CommandResult;

CommandResult run(const std::string& args) { return quintnet::testing_util::run_command(std::string(QN_BIN_DIR) + "/quintnet " + args); }

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(Cli, Schedule1F1BPp4M8ReportsBubble3Over11) {
  CommandResult r = run("schedule --schedule 1f1b --pp 4 --microbatches 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["bubble_fraction"].get<double>(), 3.0 / 11.0, 1e-9);
  EXPECT_EQ(j["peak_activations"], nlohmann::json({4, 3, 2, 1}));
  EXPECT_TRUE(j.contains("step_time"));
}

TEST(Cli, ScheduleTextShowsTheTimelineAndTheRoundedBubble) {
  CommandResult r = run("schedule --schedule 1f1b --pp 4 --microbatches 8 --no-color");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bubble fraction : 0.2727"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 3 |......F0B0==F1B1"), std::string::npos) << r.out;
}

TEST(Cli, ScheduleTraceIsReadable) {
  const std::string path = testing::TempDir() + "/schedule_trace.json";
  CommandResult r = run("schedule --schedule zb-h1 --pp 4 --microbatches 8 --trace " + path + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  quintnet::core::Trace t = quintnet::core::read_trace(path);
  EXPECT_EQ(t.num_ranks(), 4);
  EXPECT_EQ(t.source, "schedule");
  EXPECT_FALSE(t.flows.empty());
}

TEST(Cli, BubbleOfAScheduleTraceIsTheScheduleModelsOwn) {
  // A schedule's trace is its model's timeline: measured, predicted and replayed agree.
  const std::string path = testing::TempDir() + "/bubble_schedule_trace.json";
  ASSERT_EQ(run("schedule --schedule 1f1b --pp 4 --microbatches 8 --trace " + path).code, 0);
  CommandResult r = run("bubble " + path + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j.at("measured").get<double>(), 3.0 / 11.0, 1e-9);
  EXPECT_NEAR(j.at("predicted").get<double>(), 3.0 / 11.0, 1e-9);
  EXPECT_NEAR(j.at("replayed").get<double>(), 3.0 / 11.0, 1e-9);
}

TEST(Cli, BubbleRefusesATraceWithoutAPlan) {
  const std::string path = testing::TempDir() + "/bubble_no_plan.json";
  std::ofstream(path) << R"({"traceEvents": [], "otherData": {"source": "exec"}})";
  for (const std::string& args : {"bubble " + path, "bubble " + path + ".missing", std::string("bubble")}) {
    CommandResult r = run(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  EXPECT_NE(run("bubble " + path).err.find("carries no plan"), std::string::npos);
}

TEST(Cli, BadArgumentsExit2WithOneLine) {
  for (const char* args : {"schedule --pp 0", "schedule --schedule 3f3b", "schedule --bogus",
                           "schedule --costs 1,x", "schedule --schedule 1f1b --chunks 2", "frobnicate"}) {
    CommandResult r = run(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(Cli, CheckConfigAcceptsTheOriginalConfig) {
  CommandResult r = run(std::string("check-config ") + QN_SOURCE_DIR + "/experiments/configs/original/config.yaml --world-size 8");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dp=2 x tp=2 x pp=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("micro 8 x 2 microbatches x dp 2"), std::string::npos) << r.out;
}

TEST(Cli, CheckConfigRejectsBadPlansWithExit2) {
  const std::string base = "batch_size: 32\ngrad_acc_steps: 2\nmesh_dim: [2, 2, 2]\n";
  struct Case {
    std::string text, world, expect;
  } cases[] = {
      {base, "--world-size 4", "needs 8 ranks"},
      {base + "n_heads: 3\nhidden_dim: 63\n", "", "n_heads"},
      {base + "depth: 1\n", "", "depth"},
      {base + "schedule: nope\n", "", "unknown schedule"},
      {base + "batch_size: 30\n", "", "batch_size"},
      {"batch_size: [\n", "", "YAML syntax error"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = write_temp("bad" + std::to_string(i++) + ".yaml", c.text);
    CommandResult r = run("check-config " + path + " " + c.world);
    EXPECT_EQ(r.code, 2) << c.text;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  CommandResult missing = run("check-config /nonexistent/plan.yaml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/plan.yaml"), std::string::npos);
}

TEST(Cli, FrontDoorListsItsVerbs) {
  CommandResult r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("schedule"), std::string::npos);
  EXPECT_NE(r.out.find("check-config"), std::string::npos);
  // core's built-in verbs are always in the build (bubble was once listed as missing).
  const std::string listed = r.out.substr(0, r.out.find("not in this build"));
  EXPECT_NE(listed.find("\n  bubble "), std::string::npos) << r.out;
  CommandResult version = run("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out.rfind("quintnet ", 0), 0u) << version.out;
  CommandResult verb_version = run("schedule --version");
  EXPECT_EQ(verb_version.code, 0);
  EXPECT_EQ(verb_version.out.rfind("quintnet schedule ", 0), 0u) << verb_version.out;
}

// Bash completion from the verb and option tables: the script `quintnet completion bash`
// prints, sourced, completes verbs and a verb's options as bash's compgen sees them.
TEST(Cli, BashCompletionCompletesVerbsAndTheirOptions) {
  CommandResult script = run("completion bash");
  ASSERT_EQ(script.code, 0) << script.err;
  const std::string path = write_temp("quintnet.bash", script.out);
  const std::string quintnet = std::string(QN_BIN_DIR) + "/quintnet";
  auto complete = [&](const std::string& words, int cword) {
    const std::string body = "source " + path + "\nCOMP_WORDS=(" + quintnet + " " + words + ")\nCOMP_CWORD=" +
                             std::to_string(cword) + "\n_quintnet\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n";
    return quintnet::testing_util::run_command("bash " + write_temp("complete.sh", body)).out;
  };
  EXPECT_EQ(complete("sch", 1), "schedule\n");
  EXPECT_EQ(complete("schedule --mic", 2), "--microbatches\n");
  EXPECT_EQ(complete("check-config --vers", 2), "--version\n");
  if (std::ifstream(std::string(QN_BIN_DIR) + "/quintnet-simulate").good()) {  // the sim module is in this build
    EXPECT_EQ(complete("sim", 1), "simulate\n");
    EXPECT_EQ(complete("simulate --pla", 2), "--platform\n");
  }
  CommandResult other = run("completion zsh");
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("bash is the one supported"), std::string::npos) << other.err;
}
