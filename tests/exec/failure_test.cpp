// Bad input and failing ranks: one clear message, a non-zero exit, nothing left running.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/run_command.h"

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

namespace {

std::string plan(const std::string& extra) {
  return "batch_size: 32\ngrad_acc_steps: 2\ndepth: 2\nhidden_dim: 32\nn_heads: 2\n" + extra;
}

}  // namespace

TEST(Failures, WorldSizeDifferentFromTheMeshExits2OnEveryRank) {
  const std::string config = write_file("mesh4.yaml", plan("mesh_dim: [2, 2, 1]\n"));
  // Through the launcher: exit 2 within seconds, the first failing rank's message shown
  // (the launcher then stops the other rank, which may not get to print).
  auto r = run_command(bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-train") + " --config " + config);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.err.find("needs 4 ranks but the world size is 2"), std::string::npos) << r.err;
  // Without a launcher (torchrun's variables by hand): each rank exits 2 on its own.
  const std::string train = bin("quintnet-train") + " --config " + config;
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29733";
  auto both = run_command("bash -c '" + env + " RANK=1 LOCAL_RANK=1 " + train + " 2>/dev/null & " + env +
                          " RANK=0 LOCAL_RANK=0 " + train + " 2>/dev/null; A=$?; wait $!; B=$?; echo rc=$A,$B'");
  EXPECT_NE(both.out.find("rc=2,2"), std::string::npos) << both.out << both.err;
}

TEST(Failures, MissingDatasetNamesThePathAndHowToGetIt) {
  const std::string config = write_file("nodata.yaml", plan("dataset_path: /nonexistent/mnist\n"));
  auto r = run_command(bin("quintnet-train") + " --config " + config);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/mnist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("scripts/setup.sh"), std::string::npos) << r.err;
}

TEST(Failures, WrongScheduleForTheMeshExits2) {
  // The interleaved schedule needs at least pp microbatches.
  const std::string config = write_file(
      "pp2.yaml", "batch_size: 32\ngrad_acc_steps: 1\ndepth: 4\nhidden_dim: 32\nn_heads: 2\nmesh_dim: [1, 1, 2]\n"
                  "schedule: interleaved\nvirtual_stages: 2\n");
  auto r = run_command(bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-train") + " --config " + config);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("fewer than the 2 pipeline stages"), std::string::npos) << r.err;
}

TEST(Failures, MicrobatchThreadsWhereTheyCannotBeExactExit2) {
  // Dropout masks drawn by two threads from one generator come in no fixed order.
  const std::string config = write_file("dropout.yaml", plan("dropout: 0.1\n"));
  auto r = run_command(bin("quintnet-train") + " --config " + config + " --max-steps 1 --microbatch-threads 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--microbatch-threads 2: the plan has dropout"), std::string::npos) << r.err;
}

TEST(Failures, KilledRankStopsTheJobWithinAMinuteNamingIt) {
  const std::string config = write_file("long.yaml", plan("mesh_dim: [2, 1, 1]\n"));
  const std::string metrics = ::testing::TempDir() + "/killed.jsonl";
  std::remove(metrics.c_str());
  // Start a long run, wait for training to begin, SIGKILL rank 1 (the launcher's
  // second child), and time how long the launcher takes to give up.
  const std::string script =
      bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-train") + " --config " + config +
      " --max-steps 100000 --no-eval --quiet --threads 1 --metrics " + metrics + " & L=$!; "
      "for i in $(seq 300); do [ -s " + metrics + " ] && break; sleep 0.1; done; "
      "R1=$(pgrep -P $L | sort -n | sed -n 2p); kill -9 $R1; S=$(date +%s); "
      "wait $L; RC=$?; echo \"rc=$RC seconds=$(( $(date +%s) - S )) killed=$R1\"; "
      "sleep 1; pgrep -f '" + config + "' || echo no-leftover\n";
  auto r = run_command("bash " + write_file("kill_rank.sh", script));
  EXPECT_NE(r.out.find("rc=1 "), std::string::npos) << r.out << r.err;
  const auto at = r.out.find("seconds=");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_LT(std::stoi(r.out.substr(at + 8)), 60);
  EXPECT_NE(r.err.find("rank 1 failed (signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("no-leftover"), std::string::npos) << r.out;
}

TEST(Failures, TorchrunEnvironmentWorksWithoutTheLauncher) {
  // What torchrun --no-python sets, set by hand: two ranks rendezvous and train.
  const std::string config = write_file("env2.yaml", plan("mesh_dim: [2, 1, 1]\n"));
  const std::string train = bin("quintnet-train") + " --config " + config + " --max-steps 2 --no-eval --quiet --threads 1";
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29731";
  auto r = run_command("bash -c '" + env + " RANK=1 LOCAL_RANK=1 " + train + " & " + env + " RANK=0 LOCAL_RANK=0 " +
                       train + "; A=$?; wait $!; B=$?; echo rc=$A,$B'");
  EXPECT_NE(r.out.find("rc=0,0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;
}

// A step whose gradients turn NaN on one rank (injected after its backward, as an
// overflow would leave them): every rank stops at that step, before its optimizer step,
// naming the step and the rank; the checkpoint before it resumes.  With
// --on-nonfinite skip the step is skipped and the run finishes with finite losses.
TEST(Failures, NonFiniteGradientsStopTheRunNamingStepAndRankOrAreSkipped) {
  const std::string config = write_file("nan.yaml", plan("mesh_dim: [2, 1, 2]\nmax_samples: 640\n"));
  const std::string dir = ::testing::TempDir() + "/nan_" + std::to_string(getpid());
  const std::string train = bin("quintnet-launch") + " --nproc 4 -- " + bin("quintnet-train") + " --config " + config +
                            " --max-steps 8 --no-eval --quiet --threads 1 ";
  auto stopped = run_command("QN_FAULT_NAN_GRADS=3:5 " + train + "--checkpoint-dir " + dir + "/run --checkpoint-every 2");
  EXPECT_EQ(stopped.code, 2) << stopped.err;
  EXPECT_NE(stopped.err.find("step 6: the loss is"), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("gradients not finite on rank 3"), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("the last good checkpoint is step 4"), std::string::npos) << stopped.err;
  auto resumed = run_command(train + "--resume " + dir + "/run --metrics " + dir + "/resumed.jsonl");
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("done: 8 steps"), std::string::npos) << resumed.out;

  auto skipped = run_command("QN_FAULT_NAN_GRADS=3:5 " + train + "--on-nonfinite skip --metrics " + dir + "/skip.jsonl");
  EXPECT_EQ(skipped.code, 0) << skipped.err;
  EXPECT_NE(skipped.out.find("step 6: the loss is"), std::string::npos) << skipped.out;
  EXPECT_NE(skipped.out.find("(1 non-finite steps skipped)"), std::string::npos) << skipped.out;
  EXPECT_EQ(skipped.out.find("final train loss nan"), std::string::npos) << skipped.out;
  // Every metrics line is JSON; the skipped step says so, the others stepped on finite losses.
  std::ifstream metrics(dir + "/skip.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line); ++lines) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.value("skipped", false), j["step"] == 6) << line;
    EXPECT_TRUE(j["loss"].is_number()) << line;
  }
  EXPECT_EQ(lines, 8);
}

// The rendezvous only this run's ranks can join (docs/HARDENING.md).  A one-node launch
// meets through a FileStore in a private folder: every listening socket its ranks hold
// during the run is on 127.0.0.1 (Gloo's pairs; a TCPStore would show 00000000, every
// interface — listening_sockets.sh sees that for a hand-started run).  A rank started
// with another token is refused with one line, and several nodes need a shared token.
TEST(Failures, OneNodeRunsListenOnLoopbackOnlyAndAForeignTokenIsRefused) {
  const std::string config = write_file("loopback_" + std::to_string(getpid()) + ".yaml", plan("mesh_dim: [2, 1, 1]\n"));
  auto sockets = run_command("bash " + std::string(QN_SOURCE_DIR) + "/tests/exec/listening_sockets.sh " + config + " " +
                             bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-train") + " --config " + config +
                             " --max-steps 20 --no-eval --quiet --threads 1");
  EXPECT_NE(sockets.out.find("EXIT 0"), std::string::npos) << sockets.out << sockets.err;
  std::istringstream lines(sockets.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("LISTEN ", 0) == 0) EXPECT_EQ(line.substr(7, 9), "0100007F:") << sockets.out;

  // Two ranks by hand (torchrun's variables, a TCPStore), each with its own token.
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(29000 + getpid() % 900);
  const std::string train = bin("quintnet-train") + " --config " + config + " --max-steps 2 --timeout 10 --threads 1";
  auto foreign = run_command("bash -c '" + env + " QN_RUN_TOKEN=ours RANK=0 LOCAL_RANK=0 " + train +
                             " 2>/dev/null & sleep 1; " + env + " QN_RUN_TOKEN=theirs RANK=1 LOCAL_RANK=1 " + train +
                             "; B=$?; wait $!; A=$?; echo rc=$A,$B'");
  EXPECT_NE(foreign.err.find("rank 1: its QN_RUN_TOKEN is not the run's"), std::string::npos) << foreign.err;
  EXPECT_NE(foreign.out.find(",2"), std::string::npos) << foreign.out;  // the stray rank: exit 2
  EXPECT_EQ(foreign.out.find("rc=0"), std::string::npos) << foreign.out;  // rank 0 does not train alone

  auto two_nodes = run_command("env -u QN_RUN_TOKEN " + bin("quintnet-launch") + " --nproc 1 --nnodes 2 --node-rank 1 -- " + train);
  EXPECT_EQ(two_nodes.code, 2);
  EXPECT_NE(two_nodes.err.find("give every node the same --token"), std::string::npos) << two_nodes.err;
}
