#pragma once
// LayerNorm for the models: LibTorch's, except that on the CPU a bfloat16 input (plan
// `precision: bf16_weights`) is normalised in fp32 on upcast copies of it and of the
// weights, and the result rounded to bfloat16.  Why: LibTorch 1.13's CPU LayerNorm has
// no vectorised path for bf16 weights — 16 ms of a 65 ms ViT step, against 1.4 ms for
// the fp32 one (measured here, --profile) — and fp32 is what a GPU's kernel accumulates
// in anyway.  fp32 inputs (fp32 runs, autocast's fp32 residual stream) and GPUs take
// LibTorch's own kernel unchanged.  Parameters keep LibTorch's names (weight, bias).
#include <torch/torch.h>

namespace quintnet::exec {

class LayerNormImpl : public torch::nn::LayerNormImpl {
 public:
  using torch::nn::LayerNormImpl::LayerNormImpl;
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(LayerNorm);

}  // namespace quintnet::exec
