#pragma once
// Each file of python/ registers one part of the module (module.cpp calls them in order).
#include <pybind11/pybind11.h>

namespace quintnet::python {

void bind_plan(pybind11::module_& m);      // load_plan, Plan
void bind_schedule(pybind11::module_& m);  // schedule, Schedule
void bind_trace(pybind11::module_& m);     // read_trace, Trace (write, SVG)
void bind_simulate(pybind11::module_& m);  // simulate, simulate_uniform, plan_layouts (where SimGrid is built)

}  // namespace quintnet::python
