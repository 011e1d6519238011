#include "exec/models/safetensors_header.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace quintnet::exec {
namespace {

using core::UserError;

// One tensor's description, checked against the `data_size` bytes after the header.
SafetensorsEntry read_entry(const nlohmann::json& e, const std::string& where, std::uint64_t data_size) {
  if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
      !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
      e["data_offsets"].size() != 2)
    throw UserError(where + ": expected {dtype, shape, data_offsets: [begin, end]}");
  SafetensorsEntry entry;
  entry.dtype = e["dtype"].get<std::string>();
  // Sizes are checked as they multiply: a shape such as [2^32, 2^32] must not wrap
  // around to a product that matches a tiny byte range.
  std::uint64_t elements = 1;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) throw UserError(where + ": shape entries must be whole numbers >= 0");
    const auto size = d.get<std::uint64_t>();
    if (size > static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(elements, size, &elements))
      throw UserError(where + ": its shape holds more elements than any file can");
    entry.shape.push_back(static_cast<int64_t>(size));
  }
  if (!e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
    throw UserError(where + ": data_offsets must be whole numbers >= 0");
  entry.begin = e["data_offsets"][0].get<std::uint64_t>();
  entry.end = e["data_offsets"][1].get<std::uint64_t>();
  if (entry.begin > entry.end || entry.end > data_size)
    throw UserError(where + ": its bytes [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                    ") lie beyond the file's " + std::to_string(data_size) + " data bytes (a truncated file?)");
  std::uint64_t bytes = 0;
  if (const int b = safetensors_element_bytes(entry.dtype);
      b && (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(b), &bytes) || bytes != entry.end - entry.begin))
    throw UserError(where + ": " + std::to_string(entry.end - entry.begin) + " bytes do not hold " + entry.dtype + " " +
                    safetensors_shape_text(entry.shape));
  return entry;
}

}  // namespace

int safetensors_element_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

std::string safetensors_shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw UserError(path + ": cannot open the weights file (" + std::strerror(errno) + ")");
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    throw UserError(path + ": not a safetensors file (shorter than its 8-byte header length)");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8)
    throw UserError(path + ": truncated or not a safetensors file (header of " + std::to_string(header_len) +
                    " bytes, file of " + std::to_string(file_size) + ")");
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": the safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw UserError(path + ": the safetensors header is not a JSON object");
  SafetensorsHeader header;
  header.data_start = 8 + header_len;
  for (const auto& [name, e] : doc.items()) {
    if (name == "__metadata__") continue;
    header.entries.emplace(name, read_entry(e, path + ": tensor '" + name + "'", file_size - header.data_start));
  }
  return header;
}

}  // namespace quintnet::exec
