#include "exec/data/image_batches.h"

#include <cmath>
#include <cstring>

#include "exec/data/to_device.h"

namespace quintnet::exec {

Normalisation pixel_statistics(const ImageDataset& data) {
  double sum = 0, sq = 0;
  for (std::uint8_t p : data.pixels) {
    const double v = p / 255.0;
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(data.pixels.size());
  const double mean = sum / n;
  return {mean, std::sqrt(std::max(1e-12, sq / n - mean * mean))};
}

std::pair<torch::Tensor, torch::Tensor> make_batch(const ImageDataset& data, const std::vector<int64_t>& indices,
                                                   const Normalisation& norm, torch::Device device) {
  const int64_t n = static_cast<int64_t>(indices.size()), pixels = int64_t{data.rows} * data.cols;
  torch::Tensor raw = torch::empty({n, 1, data.rows, data.cols}, torch::kUInt8);
  torch::Tensor labels = torch::empty({n}, torch::kInt64);
  auto* dst = raw.data_ptr<std::uint8_t>();
  auto* lab = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * pixels, data.pixels.data() + indices[i] * pixels, static_cast<size_t>(pixels));
    lab[i] = data.labels[static_cast<size_t>(indices[i])];
  }
  torch::Tensor images = (to_device(raw, device).to(torch::kFloat32).div_(255.0).sub_(norm.mean)).div_(norm.std);
  return {images, to_device(labels, device)};
}

}  // namespace quintnet::exec
