#include "exec/train/pending_figures.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>
#include <thread>

namespace quintnet::exec {

PendingFigures::PendingFigures(const torch::Tensor& figures) {
  const torch::Tensor flat = figures.detach().reshape({-1});
  if (!flat.is_cuda()) {
    host_ = flat.to(torch::kFloat64).clone();
    return;
  }
  // Pinned memory, so that the copy is asynchronous; LibTorch's caching host allocator
  // hands the same few blocks back step after step.
  host_ = torch::empty({flat.numel()}, torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(true));
  host_.copy_(flat, /*non_blocking=*/true);
  const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  copied_ = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
  copied_->record(cuda.getStream(flat.device()));
}

std::vector<double> PendingFigures::read() const {
  // c10::Event has no blocking wait in LibTorch 1.13; the copy is long done by the
  // time a step later asks, so polling costs nothing.
  if (copied_)
    while (!copied_->query()) std::this_thread::sleep_for(std::chrono::microseconds(20));
  const double* v = host_.data_ptr<double>();
  return std::vector<double>(v, v + host_.numel());
}

}  // namespace quintnet::exec
