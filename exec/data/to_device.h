#pragma once
// A batch built on the host, onto the device it trains on.  On a GPU the copy goes
// through pinned memory and is queued (non_blocking) rather than waited for: the host,
// which runs a step ahead of the GPU (exec/train/pending_figures.h), goes on preparing
// the next step while the copy waits its turn behind the current one.
#include <torch/torch.h>

namespace quintnet::exec {

inline torch::Tensor to_device(const torch::Tensor& host, torch::Device device) {
  if (!device.is_cuda()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace quintnet::exec
