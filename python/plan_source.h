#pragma once
// A plan given from Python: a quintnet.Plan, a dict (the keys of a YAML/JSON plan), or a
// path to a plan file (str or os.PathLike).
#include <pybind11/pybind11.h>

#include <optional>

#include "core/plan.h"

namespace quintnet::python {

// Loads and validates; the loader's warnings (unknown keys) become Python warnings.
core::Plan plan_from(const pybind11::handle& source, std::optional<int> world_size = std::nullopt);

}  // namespace quintnet::python
