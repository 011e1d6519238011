#pragma once
// Mixed precision (plan key `precision: bf16`).  Forward passes run inside an
// AutocastScope: LibTorch's autocast computes the matrix products in bfloat16 (on CPU
// also LayerNorm, GELU and softmax), while the weights, their gradients, the DP buckets
// and the optimizer state stay fp32.  Backward passes run outside the scope: autograd
// replays the recorded casts, so weight gradients arrive in fp32.  bfloat16 keeps fp32's
// exponent range, so no loss scaling is needed (fp16 would need it).
//
// The autocast switches are renamed across LibTorch versions (1.13: set_cpu_enabled;
// 2.x: set_autocast_enabled(device_type)); they live in autocast.cpp only.
#include <torch/torch.h>

namespace quintnet::exec {

// Whether a forward on `device` runs under autocast now (a recomputation re-enters it).
bool autocast_active(const torch::Device& device);

// How far LibTorch's bf16 matrix product on this CPU strays from fp32: the largest error,
// relative to the largest value, of a [64, 1024] · [1024, 64] product of bf16-exact
// inputs against the same product in fp32 (measured once).  With fp32 accumulation
// (oneDNN on AVX-512 CPUs, LibTorch 2.x) ~0.3%, the output's own rounding to bf16;
// LibTorch 1.13 on CPUs without AVX-512 accumulates in bf16: ~7% at this length
// (docs/PERFORMANCE.md, session 37), and bf16 runs there follow fp32 less closely.
double cpu_bf16_matmul_error();
// cpu_bf16_matmul_error() above 1%: the products accumulate in bf16.
bool cpu_bf16_matmul_accumulates_in_bf16();

class AutocastScope {
 public:
  // on false: does nothing (fp32 runs pay no cost).
  AutocastScope(bool on, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  bool cuda_;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace quintnet::exec
