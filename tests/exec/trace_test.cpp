// quintnet-train --trace: one merged trace for all ranks, every action on its lane,
// each send paired with its receive, the ranks on one clock, an op-shape probe at the end.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/trace.h"
#include "core/trace_analysis.h"
#include "common/run_command.h"

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

TEST(Trace, PipelineRunWritesOneMergedTraceWithFlows) {
  const std::string config = write_file("trace_dp2pp2.yaml",
                                        "batch_size: 32\ngrad_acc_steps: 4\ndepth: 4\nhidden_dim: 32\nn_heads: 2\n"
                                        "mesh_dim: [2, 1, 2]\nschedule: 1f1b\n");
  const std::string path = ::testing::TempDir() + "/trace_dp2pp2.json";
  auto r = run_command(bin("quintnet-launch") + " --nproc 4 -- " + bin("quintnet-train") + " --config " + config +
                       " --max-steps 4 --trace-steps 2 --no-eval --quiet --threads 1 --trace " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const quintnet::core::Trace t = quintnet::core::read_trace(path);
  EXPECT_EQ(t.source, "exec");
  ASSERT_EQ(t.num_ranks(), 4);
  std::set<int> steps;
  int forwards = 0, sends = 0, dp_allreduces = 0;
  for (const auto& e : t.events) {
    steps.insert(e.step);
    if (e.kind == "forward") ++forwards;
    if (e.kind == "send") ++sends;
    if (e.kind == "allreduce" && e.lane == quintnet::core::Lane::DpCollective) ++dp_allreduces;
  }
  EXPECT_EQ(steps, (std::set<int>{1, 2}));           // the second and third step
  EXPECT_EQ(forwards, 2 * 4 * 4);                     // steps x ranks x microbatches
  EXPECT_EQ(sends, 2 * 2 * (4 + 4));                  // steps x dp replicas x (activations + gradients)
  EXPECT_EQ(static_cast<int>(t.flows.size()), sends);  // every send found its receive
  EXPECT_GT(dp_allreduces, 0);
  for (const auto& f : t.flows) EXPECT_GE(f.to_ts_us, f.from_ts_us);
  const double bubble = quintnet::core::measured_bubble_fraction(t);
  EXPECT_GT(bubble, 0.0);
  EXPECT_LT(bubble, 1.0);
  EXPECT_EQ(t.ranks[3].dp, 1);
  EXPECT_EQ(t.ranks[3].pp, 1);
  // `quintnet bubble` reads the schedule from the trace's plan and reports the figures
  // the trainer printed at the end of the run.
  const auto report = run_command(bin("quintnet") + " bubble " + path + " --json");
  ASSERT_EQ(report.code, 0) << report.err;
  const auto figures = nlohmann::json::parse(report.out);
  char measured[128];
  std::snprintf(measured, sizeof measured, "measured %.4f, predicted from median op costs %.4f",
                figures.at("measured").get<double>(), figures.at("predicted").get<double>());
  EXPECT_NE(r.out.find(measured), std::string::npos) << measured << "\n" << r.out;
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(Trace, RanksShareOneClockAndTheRunEndsWithAnOpProbeThatChangesNothing) {
  const std::string config = write_file("trace_tp2.yaml",
                                        "batch_size: 16\ndepth: 2\nhidden_dim: 32\nn_heads: 2\nmesh_dim: [1, 2, 1]\n");
  const std::string path = ::testing::TempDir() + "/trace_tp2.json";
  const std::string traced_params = ::testing::TempDir() + "/tp2_traced.pt", plain_params = ::testing::TempDir() + "/tp2_plain.pt";
  const std::string run = bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-train") + " --config " + config +
                          " --max-steps 3 --no-eval --quiet --threads 1 --save-params ";
  auto r = run_command(run + traced_params + " --trace-steps 2 --trace " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_command(run + plain_params);
  ASSERT_EQ(r.code, 0) << r.err;
  // The probe runs after training and discards its gradients: the same final weights.
  EXPECT_FALSE(file_bytes(traced_params).empty());
  EXPECT_EQ(file_bytes(traced_params), file_bytes(plain_params));

  const quintnet::core::Trace t = quintnet::core::read_trace(path);
  // Both ranks' clocks are one (same machine): no tensor-parallel all-reduce ends on a
  // rank before its partner has started it.
  std::map<int, std::vector<const quintnet::core::TraceEvent*>> allreduces;
  for (const auto& e : t.events)
    if (e.lane == quintnet::core::Lane::TpCollective && e.bytes > 0) allreduces[e.rank].push_back(&e);
  ASSERT_EQ(allreduces.size(), 2u);
  ASSERT_EQ(allreduces[0].size(), allreduces[1].size());
  ASSERT_GT(allreduces[0].size(), 0u);
  for (size_t k = 0; k < allreduces[0].size(); ++k) {
    EXPECT_GE(allreduces[0][k]->end_us(), allreduces[1][k]->ts_us) << "all-reduce " << k;
    EXPECT_GE(allreduces[1][k]->end_us(), allreduces[0][k]->ts_us) << "all-reduce " << k;
  }
  // The op-shape probe: every rank's ops at micro-batch 16, 8 and 4, sharded and unsharded;
  // four times the samples take longer.
  const nlohmann::json& probe = t.platform.at("op_probe");
  ASSERT_EQ(probe.size(), 2u);
  for (const auto& entry : probe) {
    EXPECT_EQ(entry.at("micro_batch"), nlohmann::json({16, 8, 4}));
    for (const nlohmann::json* part : {&entry, &entry.at("tp1")})
      for (const char* field : {"forward_s", "backward_s"}) {
        const auto& times = part->at(field);
        ASSERT_EQ(times.size(), 3u);
        EXPECT_GT(times[2].get<double>(), 0.0);
        EXPECT_GT(times[0].get<double>(), times[2].get<double>()) << entry.dump();
      }
  }
}
