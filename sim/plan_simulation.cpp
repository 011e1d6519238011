#include "sim/plan_simulation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "sim/memory_estimate.h"
#include "core/trace.h"

namespace quintnet::sim {

std::string gib_text(double bytes) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return s;
}

StepCosts checked_step_costs(const core::RunLayout& layout, Platform& platform, const Calibration* calibration) {
  if (calibration) platform = calibrated_platform(*calibration, layout.world_size());
  StepCosts costs = make_step_costs(layout, platform, calibration);
  for (size_t r = 0; r < costs.memory_bytes.size(); ++r)
    if (platform.memory_bytes > 0 && costs.memory_bytes[r] > platform.memory_bytes)
      throw core::UserError("the plan does not fit: pipeline rank " + std::to_string(r) + " needs " +
                            gib_text(costs.memory_bytes[r]) + " per GPU (weights, gradients, optimizer state and " +
                            "activations), the platform's GPUs have " + gib_text(platform.memory_bytes) +
                            "; use more tp/pp, fewer microbatches in flight or a smaller micro-batch");
  return costs;
}

PlanSimulation simulate_plan(const StepCosts& costs, Platform& platform, const SimulateRequest& request) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (request.what_ifs) request.what_ifs(platform, costs.schedule.pp * costs.tp * costs.dp);
  if (!request.trace_path.empty()) {
    const bool reduced = !request.exact && why_not_reducible(costs, platform).empty();
    check_simulation_fits(costs, true, reduced ? static_cast<int>(simulated_replicas(costs, platform, false).simulated.size()) : 0);
  }
  PlanSimulation out;
  out.result = simulate_step(costs, platform, request.exact);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!request.trace_path.empty())
    core::write_trace(simulated_trace(out.result, platform, request.plan_json), request.trace_path);
  out.summary = simulation_summary(costs, platform, out.result, out.wall_s, request.measured_s);
  return out;
}

void choose_collective(Platform& platform, const std::string& name) {
  if (name != "ring" && name != "hierarchical")
    throw core::UserError("collective '" + name + "': expected ring or hierarchical");
  platform.hierarchical_collectives = name == "hierarchical";
}

core::Trace simulated_trace(const SimResult& r, const Platform& platform, nlohmann::json plan_json) {
  core::Trace t = r.trace;
  t.platform = platform_to_json(platform);
  t.plan = std::move(plan_json);
  t.summary = {{"step_time_us", r.step_time_s * 1e6}, {"bubble_fraction", r.bubble_fraction}};
  if (r.classes.simulated.size() < r.classes.class_of.size()) {  // the trace holds these replicas, standing for others
    nlohmann::json stand_ins = nlohmann::json::array();
    for (size_t j = 0; j < r.classes.simulated.size(); ++j)
      stand_ins.push_back({{"replica", r.classes.simulated[j]}, {"stands_for", r.classes.stands_for[j]}});
    t.summary["replicas"] = stand_ins;
  }
  return t;
}

nlohmann::ordered_json simulation_summary(const StepCosts& costs, const Platform& platform, const SimResult& r,
                                          double wall_s, double measured_s) {
  const int world = static_cast<int>(r.busy_s.size());
  double busy = 0, comm = 0, peak_memory = 0;
  for (int i = 0; i < world; ++i) busy += r.busy_s[i], comm += r.exposed_comm_s[i];
  for (double m : costs.memory_bytes) peak_memory = std::max(peak_memory, m);
  const double step = r.step_time_s;
  const double samples_s = step > 0 ? costs.samples_per_step / step : 0;
  nlohmann::ordered_json j;
  if (measured_s > 0) j["measured_step_time_s"] = measured_s;
  j["step_time_s"] = step;
  j["bubble_fraction"] = r.bubble_fraction;
  j["samples_per_s"] = samples_s;
  j["tokens_per_s"] = samples_s * costs.tokens_per_sample;
  j["mfu"] = step > 0 && costs.flops_per_step > 0 ? costs.flops_per_step / (world * platform.peak_flops * step) : 0.0;
  j["peak_memory_bytes"] = peak_memory;
  // The fullest pipeline rank's memory by what holds it (core::rank_memory).
  if (!costs.memory.empty()) {
    const auto fullest = std::max_element(costs.memory_bytes.begin(), costs.memory_bytes.end()) - costs.memory_bytes.begin();
    const core::MemorySplit& m = costs.memory[static_cast<size_t>(fullest)];
    j["peak_memory_split"] = {{"pipeline_rank", fullest}, {"weights", m.weights}, {"gradients", m.gradients},
                              {"optimizer", m.optimizer}, {"activations", m.activations}};
  }
  j["compute_fraction"] = world > 0 && step > 0 ? busy / (world * step) : 0.0;
  j["exposed_comm_fraction"] = world > 0 && step > 0 ? comm / (world * step) : 0.0;
  if (costs.cp > 1) {
    // The ring's hops beyond the attention they overlap, on the rank they held up most:
    // simulated (beside every other message), and the closed form's (no other traffic).
    double closed_form = 0;
    for (const CpRingCosts& c : costs.cp_ring) closed_form = std::max(closed_form, c.estimate_forward_s + c.estimate_backward_s);
    j["cp"] = costs.cp;
    j["cp_ring_exposed_s"] = *std::max_element(r.cp_ring_exposed_s.begin(), r.cp_ring_exposed_s.end());
    j["cp_ring_closed_form_s"] = closed_form * costs.schedule.microbatches;
  }
  j["ranks"] = world;
  j["events"] = r.events;  // of the whole step
  j["estimated_events"] = estimate_simulation(costs, false).events;
  // The most replicas one simulated replica stood for (1: every rank simulated), and how
  // many were simulated (sim/simulation.h, sim/replica_classes.h).
  j["replicas_simulated_once"] = *std::max_element(r.classes.stands_for.begin(), r.classes.stands_for.end());
  j["replicas_simulated"] = r.classes.simulated.size();
  const int simulated = r.reduced ? static_cast<int>(r.classes.simulated.size()) : 0;
  j["estimated_memory_bytes"] = estimate_simulation(costs, false, simulated).bytes;  // what the check assumed
  j["wall_s"] = wall_s;
  return j;
}

}  // namespace quintnet::sim
