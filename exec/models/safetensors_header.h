#pragma once
// The header of a safetensors file, read without LibTorch: which tensors the file holds
// and where each one's bytes lie.  Separate from SafetensorsFile (safetensors.h) so the
// part that trusts the file's bytes can be fuzzed in the sanitizer build, which has no
// LibTorch (fuzz/safetensors_fuzzer.cpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace quintnet::exec {

struct SafetensorsEntry {
  std::string dtype;  // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets after the header
};

struct SafetensorsHeader {
  std::uint64_t data_start = 0;  // 8 + the header's length: where tensor bytes begin
  std::map<std::string, SafetensorsEntry> entries;
};

// Reads and checks the header of `path`: every tensor's bytes inside the file, and for
// the float types (F32, F16, BF16) exactly as many bytes as its dtype and shape need.
// Throws core::UserError naming the file and the tensor.
SafetensorsHeader read_safetensors_header(const std::string& path);

// Bytes per element of the float types this project reads; 0 for any other dtype.
int safetensors_element_bytes(const std::string& dtype);

// "[768, 2304]", for messages.
std::string safetensors_shape_text(const std::vector<int64_t>& shape);

}  // namespace quintnet::exec
