#include <pybind11/stl.h>

#include "bindings.h"
#include "core/error.h"
#include "json_bridge.h"
#include "plan_source.h"

namespace py = pybind11;

namespace quintnet::python {

core::Plan plan_from(const py::handle& source, std::optional<int> world_size) {
  if (py::isinstance<core::Plan>(source)) {
    core::Plan plan = source.cast<core::Plan>();
    core::validate_plan(plan, world_size);
    return plan;
  }
  core::LoadedPlan loaded;
  if (py::isinstance<py::dict>(source)) {
    loaded = core::parse_plan_json(to_json(source), "<dict>", world_size);
  } else if (py::isinstance<py::str>(source) || py::hasattr(source, "__fspath__")) {
    loaded = core::load_plan(py::module_::import("os").attr("fspath")(source).cast<std::string>(), world_size);
  } else {
    throw core::UserError("a plan is a quintnet.Plan, a dict of plan keys or the path of a YAML/JSON plan, not " +
                          py::repr(py::type::of(source)).cast<std::string>());
  }
  for (const std::string& warning : loaded.warnings)
    PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 2);
  return loaded.plan;
}

void bind_plan(py::module_& m) {
  py::class_<core::Plan>(m, "Plan", "A validated plan: model, mesh, schedule, batch (docs/CONFIG.md)")
      .def_property_readonly("world_size", &core::Plan::world_size)
      .def_property_readonly("dp", &core::Plan::dp)
      .def_property_readonly("tp", &core::Plan::tp)
      .def_property_readonly("pp", &core::Plan::pp)
      .def_property_readonly("microbatches", &core::Plan::microbatches)
      .def_property_readonly("micro_batch_size", &core::Plan::micro_batch_size)
      .def_property_readonly("schedule", [](const core::Plan& p) { return p.schedule; })
      .def_property_readonly("strategy", &core::Plan::strategy)
      .def_property_readonly("model", [](const core::Plan& p) { return p.model.kind(); })
      .def_property_readonly("mesh", [](const core::Plan& p) { return p.mesh().shape_string(); })
      .def("to_dict", [](const core::Plan& p) { return from_json(p.to_json()); },
           "every key with its value, loadable again by load_plan")
      .def("__repr__", [](const core::Plan& p) {
        return "<quintnet.Plan " + p.model.kind() + " on " + p.mesh().shape_string() + ", " + p.schedule + ">";
      });

  m.def("load_plan", [](const py::handle& source, std::optional<int> world_size) { return plan_from(source, world_size); },
        py::arg("source"), py::arg("world_size") = py::none(),
        "Load and validate a plan from a YAML/JSON file or a dict; raises quintnet.Error with the "
        "message `quintnet check-config` prints.  world_size: also check the mesh has that many ranks.");
}

}  // namespace quintnet::python
