#include "exec/models/safetensors.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace quintnet::exec {
namespace {

using core::UserError;

int bytes_per_element(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;  // not a float type we read
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

torch::Tensor to_float(torch::Tensor raw, const std::string& dtype) {
  if (dtype == "F32") return raw;
  return raw.view(dtype == "F16" ? torch::kFloat16 : torch::kBFloat16).to(torch::kFloat32);
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary | std::ios::ate);
  if (!in) throw UserError(path_ + ": cannot open the weights file (" + std::strerror(errno) + ")");
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    throw UserError(path_ + ": not a safetensors file (shorter than its 8-byte header length)");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8)
    throw UserError(path_ + ": truncated or not a safetensors file (header of " + std::to_string(header_len) +
                    " bytes, file of " + std::to_string(file_size) + ")");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  data_start_ = 8 + header_len;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path_ + ": the safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw UserError(path_ + ": the safetensors header is not a JSON object");
  const std::uint64_t data_size = file_size - data_start_;
  for (const auto& [name, e] : doc.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path_ + ": tensor '" + name + "'";
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      throw UserError(where + ": expected {dtype, shape, data_offsets: [begin, end]}");
    Entry entry;
    entry.dtype = e["dtype"].get<std::string>();
    std::uint64_t elements = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) throw UserError(where + ": shape entries must be whole numbers >= 0");
      entry.shape.push_back(d.get<int64_t>());
      elements *= d.get<std::uint64_t>();
    }
    if (!e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
      throw UserError(where + ": data_offsets must be whole numbers >= 0");
    entry.begin = e["data_offsets"][0].get<std::uint64_t>();
    entry.end = e["data_offsets"][1].get<std::uint64_t>();
    if (entry.begin > entry.end || entry.end > data_size)
      throw UserError(where + ": its bytes [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                      ") lie beyond the file's " + std::to_string(data_size) + " data bytes (a truncated file?)");
    if (const int b = bytes_per_element(entry.dtype); b && elements * b != entry.end - entry.begin)
      throw UserError(where + ": " + std::to_string(entry.end - entry.begin) + " bytes do not hold " +
                      entry.dtype + " " + shape_text(entry.shape));
    entries_.emplace(name, std::move(entry));
  }
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name,
                                                     const std::vector<int64_t>& expected_shape) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw UserError(path_ + ": no tensor '" + name + "' in the file");
  const Entry& e = it->second;
  if (!bytes_per_element(e.dtype))
    throw UserError(path_ + ": tensor '" + name + "' has dtype " + e.dtype + "; expected F32, F16 or BF16");
  if (e.shape != expected_shape)
    throw UserError(path_ + ": tensor '" + name + "' has shape " + shape_text(e.shape) + ", the model expects " +
                    shape_text(expected_shape));
  return e;
}

void SafetensorsFile::read_bytes(std::uint64_t offset, void* out, std::uint64_t n) const {
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + offset));
  if (!in.read(static_cast<char*>(out), static_cast<std::streamsize>(n)))
    throw UserError(path_ + ": reading " + std::to_string(n) + " bytes at " + std::to_string(data_start_ + offset) +
                    " failed (the file changed or is truncated)");
}

torch::Tensor SafetensorsFile::read(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const Entry& e = entry(name, expected_shape);
  const auto raw_type = bytes_per_element(e.dtype) == 4 ? torch::kFloat32 : torch::kInt16;
  torch::Tensor raw = torch::empty(e.shape, raw_type);
  read_bytes(e.begin, raw.data_ptr(), e.end - e.begin);
  return to_float(raw, e.dtype);
}

torch::Tensor SafetensorsFile::read_slice(const std::string& name, const std::vector<int64_t>& expected_shape, int dim,
                                          int64_t begin, int64_t length) const {
  const Entry& e = entry(name, expected_shape);
  TORCH_CHECK(dim >= 0 && dim < static_cast<int>(e.shape.size()) && e.shape.size() <= 2, "read_slice: dim ", dim);
  TORCH_CHECK(begin >= 0 && begin + length <= e.shape[dim], "read_slice: range beyond the tensor");
  const int b = bytes_per_element(e.dtype);
  const auto raw_type = b == 4 ? torch::kFloat32 : torch::kInt16;
  std::vector<int64_t> shape = e.shape;
  shape[dim] = length;
  torch::Tensor raw = torch::empty(shape, raw_type);
  auto* out = static_cast<char*>(raw.data_ptr());
  if (dim == 0) {  // contiguous rows
    const std::uint64_t row = (e.shape.size() == 2 ? e.shape[1] : 1) * b;
    read_bytes(e.begin + begin * row, out, length * row);
  } else {  // a column block: one read per row
    const std::uint64_t row = e.shape[1] * b, part = length * b;
    for (int64_t r = 0; r < e.shape[0]; ++r) read_bytes(e.begin + r * row + begin * b, out + r * part, part);
  }
  return to_float(raw, e.dtype);
}

void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted names, as Hugging Face writes them
    torch::Tensor c = t.detach().to(torch::kFloat32).contiguous().cpu();
    const std::uint64_t n = c.numel() * 4;
    header[name] = {{"dtype", "F32"}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format pads the header to 8 bytes
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
  bytes += text;
  for (const auto& c : data) bytes.append(static_cast<const char*>(c.data_ptr()), c.numel() * 4);
  core::write_file_atomically(path, bytes);
}

}  // namespace quintnet::exec
