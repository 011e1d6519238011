#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "core/error.h"

#ifdef QN_WITH_SIM
#include "core/schedule.h"
#include "json_bridge.h"
#include "plan_source.h"
#include "sim/calibration.h"
#include "sim/child_process.h"
#include "sim/plan_simulation.h"
#include "sim/planner.h"
#endif

namespace py = pybind11;

namespace quintnet::python {

#ifdef QN_WITH_SIM
namespace {

// Every SimGrid run happens in a child process (SimGrid has one engine per process, as
// for the CLI's planner), with the GIL released: a notebook can simulate many plans, and
// its other threads run meanwhile.
nlohmann::ordered_json in_child(const std::function<std::string()>& body) {
  std::string text;
  {
    py::gil_scoped_release release;
    text = sim::run_in_child("the simulation", body);
  }
  return nlohmann::ordered_json::parse(text);
}

py::object simulate(const py::handle& plan_source, const std::string& platform_name, int nodes, const std::string& model,
                    int seq, std::optional<std::string> calibration_path, std::optional<std::string> collective,
                    std::optional<std::string> trace_path, bool exact) {
  const core::Plan plan = plan_from(plan_source);
  const nlohmann::ordered_json summary = in_child([&] {
    std::optional<sim::Calibration> calibration;
    if (calibration_path) calibration = sim::read_calibration(*calibration_path);
    sim::Platform platform = calibration ? sim::calibrated_platform(*calibration, 1) : sim::load_platform(platform_name, nodes);
    if (collective) sim::choose_collective(platform, *collective);
    const sim::StepCosts costs =
        sim::checked_step_costs(sim::simulated_layout(plan, model, seq), platform, calibration ? &*calibration : nullptr);
    sim::SimulateRequest request;
    request.exact = exact;
    request.trace_path = trace_path.value_or("");
    request.plan_json = plan.to_json();
    return sim::simulate_plan(costs, platform, request).summary.dump();
  });
  return from_json(summary);
}

py::object simulate_uniform(const std::string& kind_name, int pp, int microbatches, double forward, double backward_input,
                            double backward_weight, std::optional<int> chunks, double p2p_bytes,
                            const std::string& platform_name) {
  const core::ScheduleKind kind = core::parse_schedule_kind(kind_name);
  const int v = chunks.value_or(kind == core::ScheduleKind::Interleaved ? 2 : 1);
  if (pp < 1 || microbatches < 1 || v < 1) throw core::UserError("pp, microbatches and chunks must be >= 1");
  if (forward < 0 || backward_input < 0 || backward_weight < 0) throw core::UserError("op times must be >= 0");
  const nlohmann::ordered_json summary = in_child([&] {
    sim::Platform platform = sim::load_platform(platform_name, 0);
    if (pp > platform.gpus())
      throw core::UserError("pp " + std::to_string(pp) + ": the platform has " + std::to_string(platform.gpus()) + " GPUs");
    const sim::StepCosts costs = sim::uniform_step_costs(kind, pp, microbatches, v, forward, backward_input, backward_weight, p2p_bytes);
    return sim::simulate_plan(costs, platform, sim::SimulateRequest{}).summary.dump();
  });
  return from_json(summary);
}

py::list plan_layouts(const std::string& model, int gpus, const std::string& platform_name, int nodes, int global_batch,
                      int seq, const std::vector<int>& micro_batches, int to_simulate) {
  sim::PlanQuery q;
  q.model = model;
  q.gpus = gpus;
  q.global_batch = global_batch;
  q.seq = seq;
  q.micro_batches = micro_batches;
  const sim::Platform platform = sim::planner_platform(platform_name, nodes, gpus);
  std::vector<sim::Candidate> all;
  {
    py::gil_scoped_release release;
    all = sim::enumerate_layouts(q, platform);
    int simulated = 0;
    for (auto& c : all)
      if (c.rejected.empty() && simulated++ < to_simulate)
        c.simulated_step_s = sim::simulate_in_child(sim::candidate_step_costs(q, c, platform), platform);
  }
  py::list out;
  for (const auto& c : all) {
    py::dict d;
    d["layout"] = c.layout();
    d["dp"] = c.dp, d["tp"] = c.tp, d["pp"] = c.pp;
    d["micro_batch"] = c.micro_batch, d["microbatches"] = c.microbatches, d["chunks"] = c.chunks;
    d["schedule"] = core::schedule_kind_name(c.schedule);
    d["memory_bytes"] = c.memory_bytes;
    d["analytic_step_s"] = c.analytic_step_s;
    d["simulated_step_s"] = c.simulated_step_s > 0 ? py::object(py::float_(c.simulated_step_s)) : py::none();
    d["rejected"] = c.rejected.empty() ? py::none() : py::object(py::str(c.rejected));
    out.append(d);
  }
  return out;
}

}  // namespace
#endif

void bind_simulate(py::module_& m) {
#ifdef QN_WITH_SIM
  m.attr("HAVE_SIMULATOR") = true;
  m.def("simulate", &simulate, py::arg("plan"), py::arg("platform") = "dgx-a100", py::arg("nodes") = 0,
        py::arg("model") = "", py::arg("seq") = 0, py::arg("calibration") = py::none(),
        py::arg("collective") = py::none(), py::arg("trace") = py::none(), py::arg("exact") = false,
        "Simulate one training step of a plan with SimGrid; returns what `quintnet simulate --json` prints. "
        "platform: a preset (dgx-a100, dgx-h100, h200, cpu-local, ideal), a JSON description or a SimGrid .xml; "
        "trace: also write the simulated step there; exact: simulate every data-parallel replica even when "
        "they are provably identical (as --exact).");
  m.def("simulate_uniform", &simulate_uniform, py::arg("schedule"), py::arg("pp"), py::arg("microbatches"),
        py::arg("forward"), py::arg("backward_input"), py::arg("backward_weight") = 0.0, py::arg("chunks") = py::none(),
        py::arg("p2p_bytes") = 0.0, py::arg("platform") = "ideal",
        "Simulate a pipeline of uniform op times (seconds), as `quintnet simulate --uniform TF,TB,TW`.");
  m.def("plan_layouts", &plan_layouts, py::arg("model"), py::arg("gpus"), py::arg("platform") = "dgx-a100",
        py::arg("nodes") = 0, py::arg("global_batch") = 1536, py::arg("seq") = 2048,
        py::arg("micro_batches") = std::vector<int>{1, 2, 4}, py::arg("simulate") = 3,
        "Every layout of a model on `gpus` GPUs as `quintnet plan` finds them: feasible ones first, best first, "
        "the best `simulate` of them simulated with SimGrid; the others say why they cannot run (rejected).");
#else
  m.attr("HAVE_SIMULATOR") = false;
#endif
}

}  // namespace quintnet::python
