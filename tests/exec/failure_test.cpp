// Bad input and failing ranks: one clear message, a non-zero exit, nothing left running.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
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

// Starts a long run of `nproc` ranks (extra quintnet-train options in `options`), waits
// for training to begin, sends `signal` to rank `victim` (the launcher's children are
// its ranks, in order) and times how long the launcher takes to give up.  Prints
// "rc=R seconds=S", then "no-leftover" when no process of the run remains.
namespace {
struct Disrupted {
  quintnet::testing_util::CommandResult result;
  int seconds = -1;
};
Disrupted signal_a_rank(const std::string& name, const std::string& mesh, int nproc, int victim,
                        const std::string& signal, const std::string& options) {
  const std::string tag = name + "_" + std::to_string(getpid());
  const std::string config = write_file(tag + ".yaml", plan("mesh_dim: " + mesh + "\n"));
  const std::string metrics = ::testing::TempDir() + "/" + tag + ".jsonl";
  std::remove(metrics.c_str());
  const std::string script =
      bin("quintnet-launch") + " --nproc " + std::to_string(nproc) + " -- " + bin("quintnet-train") + " --config " +
      config + " --max-steps 100000 --no-eval --quiet --threads 1 " + options + " --metrics " + metrics + " & L=$!; "
      "for i in $(seq 600); do [ -s " + metrics + " ] && break; sleep 0.1; done; "
      "V=$(pgrep -P $L | sort -n | sed -n " + std::to_string(victim + 1) + "p); kill -" + signal + " $V; S=$(date +%s); "
      "wait $L; RC=$?; echo \"rc=$RC seconds=$(( $(date +%s) - S ))\"; "
      "sleep 1; pgrep -f '" + config + "' || echo no-leftover\n";
  Disrupted d;
  d.result = run_command("bash " + write_file(tag + ".sh", script));
  const auto at = d.result.out.find("seconds=");
  if (at != std::string::npos) d.seconds = std::stoi(d.result.out.substr(at + 8));
  return d;
}
}  // namespace

TEST(Failures, KilledRankStopsTheJobWithinAMinuteNamingIt) {
  const auto [r, seconds] = signal_a_rank("killed", "[2, 1, 1]", 2, 1, "9", "");
  EXPECT_NE(r.out.find("rc=1 "), std::string::npos) << r.out << r.err;
  ASSERT_GE(seconds, 0) << r.out;
  EXPECT_LT(seconds, 60);
  EXPECT_NE(r.err.find("rank 1 failed (signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("no-leftover"), std::string::npos) << r.out;
}

// A rank that stops (SIGSTOP) without dying: its peers' next collective times out, and
// every rank is gone within the timeout + 10 s.  The message names the silent rank and
// the step, from the heartbeats (exec/comm/heartbeat.h).  Four ranks (dp 2 x pp 2), so
// the stalled rank is one among several, reached through p2p and collectives.
TEST(Failures, StalledRankIsNamedWithItsStepAndEveryRankExitsWithinTheTimeout) {
  const int timeout = 10;
  const auto [r, seconds] = signal_a_rank("stalled", "[2, 1, 2]", 4, 2, "STOP", "--timeout " + std::to_string(timeout));
  EXPECT_NE(r.out.find("rc=1 "), std::string::npos) << r.out << r.err;
  ASSERT_GE(seconds, 0) << r.out;
  EXPECT_LE(seconds, timeout + 10) << r.err;
  EXPECT_NE(r.err.find("no heartbeat for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 2 (last seen in step "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("failed on rank"), std::string::npos) << r.err;
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

// Three ways to start the same dp-2 run give the same losses: quintnet launch with its own
// spelling, with torchrun's (--nproc_per_node, no "--"), and OpenMPI's mpirun (ranks read
// OMPI_COMM_WORLD_*; openmpi-bin is installed by scripts/setup.sh).
TEST(Failures, MpirunAndTorchrunSpellingsGiveTheLaunchersLosses) {
  const std::string tag = std::to_string(getpid());
  const std::string config = write_file("spellings_" + tag + ".yaml", plan("mesh_dim: [2, 1, 1]\n"));
  const std::string dir = ::testing::TempDir() + "/spellings_" + tag;
  std::filesystem::create_directories(dir);
  const std::string train = bin("quintnet-train") + " --config " + config + " --max-steps 4 --no-eval --quiet --threads 1";
  auto read_losses = [](const std::string& path) {
    std::vector<double> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
    return out;
  };
  auto ours = run_command(bin("quintnet-launch") + " --nproc 2 -- " + train + " --metrics " + dir + "/ours.jsonl");
  ASSERT_EQ(ours.code, 0) << ours.err;
  const auto expected = read_losses(dir + "/ours.jsonl");
  ASSERT_EQ(expected.size(), 4u);

  auto torchrun = run_command(bin("quintnet-launch") + " --nproc_per_node=2 --master_addr 127.0.0.1 " + train +
                              " --metrics " + dir + "/torchrun.jsonl");
  ASSERT_EQ(torchrun.code, 0) << torchrun.err;
  EXPECT_EQ(read_losses(dir + "/torchrun.jsonl"), expected);

  if (run_command("command -v mpirun").code != 0) GTEST_SKIP() << "mpirun missing (bash scripts/setup.sh installs openmpi-bin)";
  auto mpi = run_command("mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_PORT=" +
                         std::to_string(29100 + getpid() % 800) + " " + train + " --metrics " + dir + "/mpirun.jsonl");
  ASSERT_EQ(mpi.code, 0) << mpi.out << mpi.err;
  EXPECT_EQ(read_losses(dir + "/mpirun.jsonl"), expected);
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
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("LISTEN ", 0) == 0) {
      EXPECT_EQ(line.substr(7, 9), "0100007F:") << sockets.out;
    }
  }

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
