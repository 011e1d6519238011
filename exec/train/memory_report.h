#pragma once
// The peak memory of each rank, split as the simulator predicts it (core::MemorySplit):
// parameters, gradients and optimizer state (the bytes of the flat buffers, and AdamW's
// moments with, under bf16 weights, the fp32 masters), and activations — the most the tensors alive during one step's forward and
// backward passes exceeded what was alive before it: what autograd keeps for the
// backward, the stage buffers in flight, the backward's temporaries.  CPU runs count
// with exec/train/cpu_allocator.h, CUDA runs read the CUDA caching allocator's
// statistics of allocated bytes (its current and peak, the peak reset at each step).
// experiments/exec/memory_vs_sim.sh compares it with the simulator's.
#include <cstddef>
#include <string>

#include <torch/torch.h>

#include "exec/checkpoint/checkpoint.h"
#include "exec/comm/communicator.h"
#include "exec/parallel/strategy.h"

namespace quintnet::exec {

// Measures one step's activations on `device`: construct before the step's forward, read
// after its backward.
class ActivationPeak {
 public:
  explicit ActivationPeak(const torch::Device& device);
  std::size_t bytes() const;  // the peak since construction less what was alive then

 private:
  torch::Device device_;
  std::size_t alive_before_;
};

// Collective.  Rank 0 gets the line for the rank whose total is largest, e.g.
// "memory: fullest rank 0 (dp 0, tp 0, pp 0): 36.4 MiB = parameters 1.6 + gradients 1.6 +
// optimizer state 3.2 + activations 30.0 (CPU tensors; activations: the peak of a step)";
// the other ranks get "".
std::string memory_report(Communicator& comm, ParallelModel& pm, const Optimizers& optimizers,
                          std::size_t activation_bytes, const torch::Device& device);

}  // namespace quintnet::exec
