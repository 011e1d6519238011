#pragma once
// A plan simulated the way `quintnet simulate --config` does it — the CLI and the Python
// module (python/) both call this, so they report the same numbers.
#include <nlohmann/json.hpp>
#include <functional>
#include <string>

#include "core/plan.h"
#include "core/trace.h"
#include "sim/calibration.h"
#include "sim/platform.h"
#include "sim/step_costs.h"
#include "sim/simulation.h"

namespace quintnet::sim {

// The StepCosts of `plan` on `platform` (a calibration replaces the platform's machine);
// throws core::UserError when a pipeline rank needs more memory than the platform's GPUs
// have, naming the rank, both sizes and the fixes.
StepCosts checked_step_costs(const core::RunLayout& layout, Platform& platform, const Calibration* calibration = nullptr);

// What `quintnet simulate --json` prints: step time, bubble, throughput, MFU, peak
// memory, time shares, ranks, events; measured_step_time_s first when measured_s > 0.
nlohmann::ordered_json simulation_summary(const StepCosts& costs, const Platform& platform, const SimResult& result,
                                          double wall_s, double measured_s = 0);

// The simulated step as the trace `--trace` writes: the result's events with the
// platform, the plan (`plan_json`) and the summary in otherData; for a reduced
// simulation, the simulated replicas' ranks and summary.replicas (each simulated
// replica and the replicas it stands for).
core::Trace simulated_trace(const SimResult& result, const Platform& platform, nlohmann::json plan_json);

// How a step is simulated, beyond the plan: what `quintnet simulate` and Python's
// quintnet.simulate ask for.
struct SimulateRequest {
  bool exact = false;          // every data-parallel replica, not one for all (sim/simulation.h)
  std::string trace_path;      // the simulated trace is written there when given
  nlohmann::json plan_json;    // the plan, into the trace (so `quintnet bubble` reads its schedule)
  double measured_s = 0;       // an executor trace's step time, for the summary's error (0: none)
  // What-ifs (stragglers, NIC faults, jitter) applied to the platform once the world
  // size is known; none when empty.
  std::function<void(Platform&, int world)> what_ifs;
};

struct PlanSimulation {
  SimResult result;
  nlohmann::ordered_json summary;  // simulation_summary's
  double wall_s = 0;
};

// The simulate use case, shared by the CLI (sim/simulate_main.cpp) and Python
// (python/bind_simulate.cpp): the what-ifs applied, the step simulated (refused up front
// when it would not fit in memory), its trace written, its summary made.
PlanSimulation simulate_plan(const StepCosts& costs, Platform& platform, const SimulateRequest& request);

// "ring" or "hierarchical": the collective algorithm of the data-parallel all-reduces
// (--collective, Python's collective=); throws core::UserError naming the two.
void choose_collective(Platform& platform, const std::string& name);

// "1.50 GiB".
std::string gib_text(double bytes);

}  // namespace quintnet::sim
