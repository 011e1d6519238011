#pragma once
// The layout planner: every (dp, tp, pp, micro-batch, schedule, chunks) that can run a
// model on a cluster, with the recomputation, sequence parallelism and ZeRO stage that
// make it fastest within the GPUs' memory, why the others cannot, an analytic step time for each (core's
// schedule simulation with the slowest stage's op times plus ring-collective times),
// and the best few simulated with SimGrid.
#include <string>
#include <vector>

#include "sim/platform.h"
#include "sim/step_costs.h"

namespace quintnet::sim {

struct PlanQuery {
  std::string model = "gpt3-175b";
  int gpus = 1024;
  int global_batch = 1536;
  int seq = 2048;
  std::vector<int> micro_batches = {1, 2, 4};
  std::vector<core::ScheduleKind> schedules = {core::ScheduleKind::OneFOneB, core::ScheduleKind::Interleaved,
                                               core::ScheduleKind::ZbH1, core::ScheduleKind::Afab};
  // Memory options tried for each layout (sequence parallelism only with tp > 1, ZeRO-1
  // only with dp > 1); the layout keeps its fastest set that fits, the least memory of
  // equally fast ones.
  std::vector<core::Recompute> recompute = {core::Recompute::None, core::Recompute::Selective, core::Recompute::Full};
  std::vector<bool> sequence_parallel = {false, true};
  std::vector<int> zero_stage = {0, 1};
};

struct Candidate {
  int dp = 1, tp = 1, pp = 1, cp = 1, micro_batch = 1, microbatches = 1, chunks = 1;
  core::ScheduleKind schedule = core::ScheduleKind::OneFOneB;
  core::Recompute recompute = core::Recompute::None;
  bool sequence_parallel = false;
  int zero_stage = 0;
  double memory_bytes = 0;     // the fullest rank
  double analytic_step_s = 0;  // from core's schedule simulation
  double simulated_step_s = 0;  // SimGrid, for the best few (0: not simulated)
  std::string rejected;         // why it cannot run ("" when it can)
  std::string layout() const;
};

// Every candidate, feasible ones first in order of analytic step time.
std::vector<Candidate> enumerate_layouts(const PlanQuery& q, const Platform& platform);

// The StepCosts of a candidate (for simulating it).
StepCosts candidate_step_costs(const PlanQuery& q, const Candidate& c, const Platform& platform);

// The platform `name` with enough nodes for `gpus` (`nodes` > 0: exactly that many).
Platform planner_platform(const std::string& name, int nodes, int gpus);

// SimGrid's step time of `plan`, simulated in a child process (one engine per process,
// so a planner or a Python session can simulate many); -1 when the simulation fails.
double simulate_in_child(const StepCosts& plan, const Platform& platform);

}  // namespace quintnet::sim
