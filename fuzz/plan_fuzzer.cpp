// The plan reader, YAML and JSON: any input loads, or fails with core::UserError (one
// line for the user).  Anything else — another exception, a crash, a sanitizer report —
// is a finding.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* origin : {"fuzz.yaml", "fuzz.json"}) {
    try {
      quintnet::core::parse_plan_text(text, origin);
    } catch (const quintnet::core::UserError&) {
    }
  }
  return 0;
}
