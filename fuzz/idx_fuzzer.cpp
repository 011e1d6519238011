// MNIST-format files, images and labels from one input: its first byte says how long
// the images file is, in 64-byte units, the rest after it is the labels file (IDX
// headers start with zero bytes, so a NUL cannot separate them).  They load or fail
// with core::UserError; a header that claims more than its file holds must not make
// the reader allocate it.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "exec/data/idx_dataset.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t images = std::min(rest.size(), static_cast<size_t>(data[0]) * 64);
  const std::string& dir = quintnet::fuzz::scratch_dir();
  quintnet::fuzz::write_bytes(dir + "/train-images-idx3-ubyte", rest.substr(0, images));
  quintnet::fuzz::write_bytes(dir + "/train-labels-idx1-ubyte", rest.substr(images));
  try {
    quintnet::exec::load_idx_dataset(dir, "train");
  } catch (const quintnet::core::UserError&) {
  }
  return 0;
}
