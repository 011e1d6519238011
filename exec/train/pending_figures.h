#pragma once
// PendingFigures — a step's figures (loss, gradient norm, counts) on their way to the host.
//
// Why: reading a number computed on a GPU makes the host wait until the GPU has run
// everything queued before it, and then the GPU idles while the host queues the next
// kernels.  So the trainer reads step k's figures one step late: the copy is queued
// behind step k's kernels into pinned host memory, and read() — called while step
// k+1 runs — waits for that copy alone (a CUDA event), not for the work queued since.
// On the CPU everything has already happened: read() just reads.
#include <torch/torch.h>

#include <c10/core/Event.h>

#include <memory>
#include <vector>

namespace quintnet::exec {

class PendingFigures {
 public:
  explicit PendingFigures(const torch::Tensor& figures);  // 1-D float64; starts the copy
  std::vector<double> read() const;                       // waits for the copy only

 private:
  torch::Tensor host_;
  std::unique_ptr<c10::Event> copied_;  // null on the CPU
};

}  // namespace quintnet::exec
