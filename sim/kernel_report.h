#pragma once
// What `quintnet simulate --kernels` prints: a pipeline rank's kernels for one microbatch,
// each with its FLOPs, bytes, the roofline's time and what bounds it, and the totals per
// pass — the cost model made visible (docs/SIMULATOR.md, "Cost model").
#include <string>
#include <vector>

#include "core/layer_kernels.h"
#include "sim/platform.h"

namespace quintnet::sim {

std::string kernel_report(const std::vector<core::Kernel>& kernels, const Platform& platform);

}  // namespace quintnet::sim
