#pragma once
// A plan simulated the way `quintnet simulate --config` does it — the CLI and the Python
// module (python/) both call this, so they report the same numbers.
#include <nlohmann/json.hpp>
#include <string>

#include "core/plan.h"
#include "core/trace.h"
#include "sim/calibration.h"
#include "sim/platform.h"
#include "sim/sim_plan.h"
#include "sim/simulation.h"

namespace quintnet::sim {

// The SimPlan of `plan` on `platform` (a calibration replaces the platform's machine);
// throws core::UserError when a pipeline rank needs more memory than the platform's GPUs
// have, naming the rank, both sizes and the fixes.
SimPlan checked_sim_plan(const core::Plan& plan, Platform& platform, const std::string& model_override = "",
                         int seq_len = 0, const Calibration* calibration = nullptr);

// What `quintnet simulate --json` prints: step time, bubble, throughput, MFU, peak
// memory, time shares, ranks, events; measured_step_time_s first when measured_s > 0.
nlohmann::ordered_json simulation_summary(const SimPlan& plan, const Platform& platform, const SimResult& result,
                                          double wall_s, double measured_s = 0);

// The simulated step as the trace `--trace` writes: the result's events with the
// platform, the plan (`plan_json`) and the summary in otherData; for a reduced
// simulation, replica 0's ranks and summary.replicas.
core::Trace simulated_trace(const SimResult& result, const Platform& platform, nlohmann::json plan_json);

// "1.50 GiB".
std::string gib_text(double bytes);

}  // namespace quintnet::sim
