// safetensors headers (Hugging Face's weight files): the input is the whole file.  It
// is read or refused with core::UserError; what is read must keep the promises the
// tensor reader relies on (exec/models/safetensors.cpp reads entries without further
// checks): every entry's bytes inside the file, and exactly dtype × shape bytes for the
// float types.  A broken promise aborts, so the fuzzer reports it.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "exec/models/safetensors_header.h"
#include "fuzz/fuzz_support.h"

namespace {

void check_promises(const quintnet::exec::SafetensorsHeader& header, size_t file_size) {
  if (header.data_start < 8 || header.data_start > file_size) std::abort();
  for (const auto& [name, e] : header.entries) {
    if (e.begin > e.end || e.end > file_size - header.data_start) std::abort();
    const int b = quintnet::exec::safetensors_element_bytes(e.dtype);
    if (!b) continue;
    unsigned __int128 bytes = b;  // wide enough that the check itself cannot wrap
    for (int64_t d : e.shape) {
      if (d < 0) std::abort();
      bytes *= static_cast<std::uint64_t>(d);
      if (bytes > file_size) break;
    }
    if (bytes != e.end - e.begin) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  const std::string path = quintnet::fuzz::scratch_dir() + "/model.safetensors";
  quintnet::fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    check_promises(quintnet::exec::read_safetensors_header(path), size);
  } catch (const quintnet::core::UserError&) {
  }
  return 0;
}
