// A calibration file (quintnet calibrate's output): it loads and gives a platform, or
// fails with core::UserError.
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "fuzz/fuzz_support.h"
#include "sim/calibration.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  const std::string path = quintnet::fuzz::scratch_dir() + "/calibration.json";
  quintnet::fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const quintnet::sim::Calibration c = quintnet::sim::read_calibration(path);
    for (int ranks : {1, 2, 8}) quintnet::sim::calibrated_platform(c, ranks);
  } catch (const quintnet::core::UserError&) {
  }
  return 0;
}
