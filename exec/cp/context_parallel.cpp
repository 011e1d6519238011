#include "exec/cp/context_parallel.h"

namespace quintnet::exec {

torch::Tensor local_sequence(const torch::Tensor& full, const CpContext& cp, int64_t dim) {
  if (cp.size() == 1) return full;
  const int64_t chunk = full.size(dim) / (2 * cp.size());
  TORCH_CHECK(chunk * 2 * cp.size() == full.size(dim), "local_sequence: ", full.size(dim),
              " tokens do not split into 2 x cp = ", 2 * cp.size(), " chunks");
  return torch::cat({full.narrow(dim, cp.chunk_of(cp.rank(), 0) * chunk, chunk),
                     full.narrow(dim, cp.chunk_of(cp.rank(), 1) * chunk, chunk)},
                    dim);
}

torch::Tensor local_positions(int64_t local_length, const CpContext& cp, const torch::Device& device) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  if (cp.size() == 1) return torch::arange(local_length, options);
  const int64_t chunk = local_length / 2;
  return torch::cat({torch::arange(cp.chunk_of(cp.rank(), 0) * chunk, (cp.chunk_of(cp.rank(), 0) + 1) * chunk, options),
                     torch::arange(cp.chunk_of(cp.rank(), 1) * chunk, (cp.chunk_of(cp.rank(), 1) + 1) * chunk, options)});
}

}  // namespace quintnet::exec
