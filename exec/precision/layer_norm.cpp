#include "exec/precision/layer_norm.h"

namespace quintnet::exec {

torch::Tensor LayerNormImpl::forward(const torch::Tensor& input) {
  if (!input.is_cpu() || input.scalar_type() != torch::kBFloat16) return torch::nn::LayerNormImpl::forward(input);
  const auto wide = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  return torch::layer_norm(input.to(torch::kFloat32), options.normalized_shape(), wide(weight), wide(bias),
                           options.eps())
      .to(torch::kBFloat16);
}

}  // namespace quintnet::exec
