#pragma once
// Python objects <-> nlohmann::json through Python's own json module: plans, summaries
// and trace metadata cross the boundary as the JSON the CLI reads and prints, so a dict
// from Python means exactly what the same JSON file means to `quintnet`.
#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>

namespace quintnet::python {

nlohmann::json to_json(const pybind11::handle& object);
pybind11::object from_json(const nlohmann::json& value);
pybind11::object from_json(const nlohmann::ordered_json& value);

}  // namespace quintnet::python
