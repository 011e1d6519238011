#include "exec/precision/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace quintnet::exec {
namespace {

// LibTorch 2.4 made the autocast switches take the device type and deprecated the
// per-device names this machine's 1.13 has; the GPU check builds against a current wheel.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool enabled(bool cuda) { return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU); }
void set_enabled(bool cuda, bool on) { at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, on); }
at::ScalarType dtype(bool cuda) { return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU); }
void set_dtype(bool cuda, at::ScalarType t) { at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, t); }
#else
bool enabled(bool cuda) { return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled(); }
void set_enabled(bool cuda, bool on) { cuda ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on); }
at::ScalarType dtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_dtype(bool cuda, at::ScalarType t) {
  cuda ? at::autocast::set_autocast_gpu_dtype(t) : at::autocast::set_autocast_cpu_dtype(t);
}
#endif

}  // namespace

bool autocast_active(const torch::Device& device) { return enabled(device.is_cuda()); }

AutocastScope::AutocastScope(bool on, const torch::Device& device) : enabled_(on), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  was_enabled_ = enabled(cuda_);
  previous_dtype_ = dtype(cuda_);
  set_dtype(cuda_, at::kBFloat16);
  set_enabled(cuda_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  // Leaving the outermost scope frees the bfloat16 copies of the weights autocast cached
  // for this forward pass.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(cuda_, was_enabled_);
  set_dtype(cuda_, previous_dtype_);
}

double cpu_bf16_matmul_error() {
  static const double error = [] {
    torch::NoGradGuard no_grad;
    const torch::Generator generator = at::detail::createCPUGenerator(37);
    const torch::Tensor a = at::randn({64, 1024}, generator, torch::kFloat32).to(torch::kBFloat16);
    const torch::Tensor b = at::randn({1024, 64}, generator, torch::kFloat32).to(torch::kBFloat16);
    const torch::Tensor exact = torch::mm(a.to(torch::kFloat32), b.to(torch::kFloat32));
    const torch::Tensor product = torch::mm(a, b).to(torch::kFloat32);
    return ((product - exact).abs().max() / exact.abs().max()).item<double>();
  }();
  return error;
}

bool cpu_bf16_matmul_accumulates_in_bf16() {
  return cpu_bf16_matmul_error() > 0.01;
}

}  // namespace quintnet::exec
