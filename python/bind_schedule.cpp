#include <pybind11/stl.h>

#include <optional>

#include "bindings.h"
#include "core/error.h"
#include "core/schedule_ascii.h"
#include "core/schedule_generators.h"
#include "core/schedule_trace.h"
#include "core/schedule_validator.h"

namespace py = pybind11;

namespace quintnet::python {
namespace {

// Op costs as `quintnet schedule --costs TF,TB,TW --p2p L` takes them (defaults 1, 1, 1, 0).
core::OpCosts op_costs(double forward, double backward_input, double backward_weight, double p2p) {
  if (forward < 0 || backward_input < 0 || backward_weight < 0 || p2p < 0)
    throw core::UserError("op costs must be >= 0");
  if (forward + backward_input + backward_weight <= 0) throw core::UserError("the op costs are all zero; give the ops a positive cost");
  core::OpCosts costs;
  costs.forward = forward;
  costs.backward_input = backward_input;
  costs.backward_weight = backward_weight;
  costs.p2p = p2p;
  return costs;
}

py::dict stats_dict(const core::ScheduleStats& s) {
  py::dict d;
  d["step_time"] = s.step_time;
  d["bubble_fraction"] = s.bubble_fraction;
  d["bubble_fraction_per_rank"] = s.bubble_per_rank;
  d["busy_per_rank"] = s.busy_per_rank;
  d["peak_activations"] = s.peak_activations;
  d["peak_pending_wgrad"] = s.peak_pending_wgrad;
  return d;
}

// The keyword arguments every cost-taking method has.
#define QN_COST_ARGS                                                                          \
  py::kw_only(), py::arg("forward") = 1.0, py::arg("backward_input") = 1.0, py::arg("backward_weight") = 1.0, \
      py::arg("p2p") = 0.0

}  // namespace

void bind_schedule(py::module_& m) {
  py::class_<core::Schedule>(m, "Schedule",
                             "A pipeline schedule: each pipeline rank's ordered actions (the IR exec and sim run)")
      .def_readonly("name", &core::Schedule::name)
      .def_readonly("pp", &core::Schedule::pp)
      .def_readonly("microbatches", &core::Schedule::microbatches)
      .def_readonly("chunks", &core::Schedule::chunks)
      .def_property_readonly("actions",
                             [](const core::Schedule& s) {
                               std::vector<std::vector<std::string>> out;
                               for (const auto& list : s.ranks) {
                                 out.emplace_back();
                                 for (const auto& a : list) out.back().push_back(core::to_string(a));
                               }
                               return out;
                             },
                             "per pipeline rank, its actions as `quintnet schedule` prints them (F3, SEND_ACT 3, ...)")
      .def_property_readonly("bubble_fraction",
                             [](const core::Schedule& s) { return core::simulate_schedule(s).bubble_fraction; },
                             "idle share of the pipeline at unit op costs (F = BI = BW = 1)")
      .def(
          "stats",
          [](const core::Schedule& s, double f, double bi, double bw, double p2p) {
            return stats_dict(core::simulate_schedule(s, op_costs(f, bi, bw, p2p)));
          },
          QN_COST_ARGS,
          "step time, bubble fraction (overall and per rank), busy time and peak in-flight activations per rank "
          "under the given op costs (B = backward_input + backward_weight)")
      .def(
          "ascii",
          [](const core::Schedule& s, bool color, double f, double bi, double bw, double p2p) {
            const core::OpCosts costs = op_costs(f, bi, bw, p2p);
            return core::render_ascii_timeline(s, core::simulate_schedule(s, costs), color);
          },
          py::arg("color") = false, QN_COST_ARGS, "the timeline `quintnet schedule` draws")
      .def(
          "trace",
          [](const core::Schedule& s, double f, double bi, double bw, double p2p) {
            const core::OpCosts costs = op_costs(f, bi, bw, p2p);
            return core::schedule_to_trace(s, core::simulate_schedule(s, costs), costs);
          },
          QN_COST_ARGS, "the schedule's symbolic timeline as a Trace (one cost unit = 1 ms)")
      .def("__repr__", [](const core::Schedule& s) {
        return "<quintnet.Schedule " + s.name + " pp=" + std::to_string(s.pp) + " microbatches=" +
               std::to_string(s.microbatches) + " chunks=" + std::to_string(s.chunks) + ">";
      });

  m.def(
      "schedule",
      [](const std::string& kind, int pp, int microbatches, std::optional<int> chunks) {
        const core::ScheduleKind k = core::parse_schedule_kind(kind);
        const int v = chunks.value_or(k == core::ScheduleKind::Interleaved ? 2 : 1);
        if (pp < 1 || microbatches < 1 || v < 1) throw core::UserError("pp, microbatches and chunks must be >= 1");
        core::Schedule s = core::make_schedule(k, pp, microbatches, v);
        core::validate_schedule(s);
        return s;
      },
      py::arg("kind"), py::arg("pp"), py::arg("microbatches"), py::arg("chunks") = py::none(),
      "Generate and validate a schedule: kind afab|gpipe, 1f1b, interleaved (chunks, default 2), zb-h1.");
}

}  // namespace quintnet::python
