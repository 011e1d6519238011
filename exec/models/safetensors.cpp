#include "exec/models/safetensors.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace quintnet::exec {
namespace {

using core::UserError;

torch::Tensor to_float(torch::Tensor raw, const std::string& dtype) {
  if (dtype == "F32") return raw;
  return raw.view(dtype == "F16" ? torch::kFloat16 : torch::kBFloat16).to(torch::kFloat32);
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path)
    : path_(std::move(path)), header_(read_safetensors_header(path_)) {}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name,
                                                     const std::vector<int64_t>& expected_shape) const {
  auto it = header_.entries.find(name);
  if (it == header_.entries.end()) throw UserError(path_ + ": no tensor '" + name + "' in the file");
  const Entry& e = it->second;
  if (!safetensors_element_bytes(e.dtype))
    throw UserError(path_ + ": tensor '" + name + "' has dtype " + e.dtype + "; expected F32, F16 or BF16");
  if (e.shape != expected_shape)
    throw UserError(path_ + ": tensor '" + name + "' has shape " + safetensors_shape_text(e.shape) + ", the model expects " +
                    safetensors_shape_text(expected_shape));
  return e;
}

void SafetensorsFile::read_bytes(std::uint64_t offset, void* out, std::uint64_t n) const {
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(header_.data_start + offset));
  if (!in.read(static_cast<char*>(out), static_cast<std::streamsize>(n)))
    throw UserError(path_ + ": reading " + std::to_string(n) + " bytes at " + std::to_string(header_.data_start + offset) +
                    " failed (the file changed or is truncated)");
}

torch::Tensor SafetensorsFile::read(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const Entry& e = entry(name, expected_shape);
  const auto raw_type = safetensors_element_bytes(e.dtype) == 4 ? torch::kFloat32 : torch::kInt16;
  torch::Tensor raw = torch::empty(e.shape, raw_type);
  read_bytes(e.begin, raw.data_ptr(), e.end - e.begin);
  return to_float(raw, e.dtype);
}

torch::Tensor SafetensorsFile::read_slice(const std::string& name, const std::vector<int64_t>& expected_shape, int dim,
                                          int64_t begin, int64_t length) const {
  const Entry& e = entry(name, expected_shape);
  TORCH_CHECK(dim >= 0 && dim < static_cast<int>(e.shape.size()) && e.shape.size() <= 2, "read_slice: dim ", dim);
  TORCH_CHECK(begin >= 0 && begin + length <= e.shape[dim], "read_slice: range beyond the tensor");
  const int b = safetensors_element_bytes(e.dtype);
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
