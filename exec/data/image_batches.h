#pragma once
// ImageDataset samples -> normalised float tensors.
#include <torch/torch.h>

#include <vector>

#include "exec/data/idx_dataset.h"

namespace quintnet::exec {

struct Normalisation {
  double mean = 0.0, std = 1.0;
};

// Mean and standard deviation of the pixel values (0..1) over the whole set.
Normalisation pixel_statistics(const ImageDataset& data);

// images [n, 1, rows, cols] (float, normalised), labels [n] (int64), on `device`.
std::pair<torch::Tensor, torch::Tensor> make_batch(const ImageDataset& data, const std::vector<int64_t>& indices,
                                                   const Normalisation& norm, torch::Device device = torch::kCPU);

}  // namespace quintnet::exec
