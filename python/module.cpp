// _quintnet: the C++ half of the `quintnet` Python package (python/quintnet/__init__.py
// is the other).  core::UserError and its kinds become quintnet.Error (a ValueError)
// carrying the one-line message the CLI prints.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "core/error.h"

namespace py = pybind11;

PYBIND11_MODULE(_quintnet, m) {
  m.doc() = "QuintNet: plans, pipeline schedules, SimGrid simulation and traces";
  m.attr("__version__") = QN_VERSION;
  py::register_exception<quintnet::core::UserError>(m, "Error", PyExc_ValueError);
  quintnet::python::bind_plan(m);
  quintnet::python::bind_schedule(m);
  quintnet::python::bind_trace(m);
  quintnet::python::bind_simulate(m);
}
