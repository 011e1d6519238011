// The trace reader: the fast scanner and the checked document path accept the same
// inputs with the same Trace, and refuse the rest with core::UserError.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace.h"

using quintnet::core::Trace;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<Trace> fast, checked;
  try {
    fast = quintnet::core::parse_trace_text(text, "fuzz.json");
  } catch (const quintnet::core::UserError&) {
  }
  try {
    checked = quintnet::core::trace_from_json(nlohmann::json::parse(text), "fuzz.json");
  } catch (const quintnet::core::UserError&) {
  } catch (const nlohmann::json::exception&) {  // not JSON at all
  }
  if (fast.has_value() != checked.has_value()) std::abort();
  if (fast && (fast->events != checked->events || fast->flows != checked->flows || fast->ranks != checked->ranks ||
               fast->source != checked->source))
    std::abort();
  return 0;
}
