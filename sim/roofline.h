#pragma once
// The roofline: how long one kernel of core/layer_kernels.h takes on one GPU.
//   matrix product   max(F / (peak × matrix_efficiency(F)), B / (bandwidth × memory_efficiency(B)))
//   memory-bound     B / (bandwidth × memory_efficiency(B))
// F the kernel's FLOPs (the table looks up its GFLOP), B its bytes (the table: MB).  A
// platform without a memory bandwidth (cpu-local, ideal, SimGrid XML files: the flat
// model) times a matrix product at F / (peak × efficiency) and memory-bound kernels at 0.
#include <vector>

#include "core/layer_kernels.h"
#include "sim/platform.h"

namespace quintnet::sim {

double kernel_seconds(const core::Kernel& kernel, const Platform& platform);
// All kernels of one pass, each `count` times.
double pass_seconds(const std::vector<core::Kernel>& kernels, core::Pass pass, const Platform& platform);
// One memory-bound kernel moving `bytes` (the optimizer step).
double memory_seconds(double bytes, const Platform& platform);

}  // namespace quintnet::sim
