#pragma once
// safetensors files (Hugging Face's weight format): 8 bytes little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes.  The reader maps nothing into memory and reads
// only what is asked for: a rank loading its tensor-parallel shard reads just its slice.
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exec/models/safetensors_header.h"

namespace quintnet::exec {

class SafetensorsFile {
 public:
  // Reads and checks the header (every tensor inside the file, sizes consistent with
  // dtype and shape).  Throws core::UserError naming the file and the tensor.
  explicit SafetensorsFile(std::string path);

  using Entry = SafetensorsEntry;
  bool contains(const std::string& name) const { return header_.entries.count(name) > 0; }
  const std::map<std::string, Entry>& entries() const { return header_.entries; }
  const std::string& path() const { return path_; }

  // The tensor as float32 (F32, F16 and BF16 are read); checks the expected shape.
  torch::Tensor read(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  // Only [begin, begin + length) along `dim` (0 or 1 of a 1- or 2-D tensor): what one
  // tensor-parallel rank holds.  Reads just those bytes.
  torch::Tensor read_slice(const std::string& name, const std::vector<int64_t>& expected_shape, int dim,
                           int64_t begin, int64_t length) const;

 private:
  const Entry& entry(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  void read_bytes(std::uint64_t offset, void* out, std::uint64_t n) const;

  std::string path_;
  SafetensorsHeader header_;
};

// Writes float32 tensors (contiguous copies are taken) atomically (temporary + rename).
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace quintnet::exec
