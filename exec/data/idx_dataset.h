#pragma once
// MNIST-format (IDX) image classification data: MNIST and Fashion-MNIST ship as
// train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz), t10k-... files.
// Plain and gzip-compressed files are both read (through zlib).
#include <cstdint>
#include <string>
#include <vector>

namespace quintnet::exec {

struct ImageDataset {
  int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count × rows × cols, row-major
  std::vector<std::uint8_t> labels;  // count
  int num_classes = 0;               // max label + 1
};

// split: "train" or "t10k".  Throws core::UserError naming the folder, the files it
// looked for and how to get them (scripts/setup.sh installs Fashion-MNIST).
ImageDataset load_idx_dataset(const std::string& folder, const std::string& split);

}  // namespace quintnet::exec
