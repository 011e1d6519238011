#include "json_bridge.h"

#include <string>

#include "core/error.h"

namespace py = pybind11;

namespace quintnet::python {

nlohmann::json to_json(const py::handle& object) {
  std::string text;
  try {
    text = py::module_::import("json").attr("dumps")(object).cast<std::string>();
  } catch (const py::error_already_set& e) {  // e.g. a set or an object json cannot write
    throw core::UserError(std::string("cannot turn the value into JSON: ") + e.what());
  }
  return nlohmann::json::parse(text);
}

py::object from_json(const nlohmann::json& value) { return py::module_::import("json").attr("loads")(value.dump()); }

py::object from_json(const nlohmann::ordered_json& value) {
  return py::module_::import("json").attr("loads")(value.dump());
}

}  // namespace quintnet::python
