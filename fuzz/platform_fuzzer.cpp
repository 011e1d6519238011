// A platform description in JSON (quintnet simulate --platform FILE.json): it loads, or
// fails with core::UserError; a syntax error is nlohmann's to report.
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sim/platform.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  try {
    quintnet::sim::platform_to_json(quintnet::sim::platform_from_json(doc, "fuzz.json"));
  } catch (const quintnet::core::UserError&) {
  }
  return 0;
}
