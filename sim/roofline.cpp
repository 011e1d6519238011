#include "sim/roofline.h"

#include <algorithm>

namespace quintnet::sim {

double memory_seconds(double bytes, const Platform& p) {
  if (!p.has_roofline() || bytes <= 0) return 0;
  return bytes / (p.memory_bandwidth * p.memory_efficiency.at(bytes / 1e6));
}

double kernel_seconds(const core::Kernel& k, const Platform& p) {
  if (!k.matrix()) return memory_seconds(k.bytes, p);
  const double efficiency = p.matrix_efficiency.empty() ? p.efficiency : p.matrix_efficiency.at(k.flops / 1e9);
  return std::max(k.flops / (p.peak_flops * efficiency), memory_seconds(k.bytes, p));
}

double pass_seconds(const std::vector<core::Kernel>& kernels, core::Pass pass, const Platform& p) {
  double total = 0;
  for (const auto& k : kernels)
    if (k.pass == pass) total += k.count * kernel_seconds(k, p);
  return total;
}

}  // namespace quintnet::sim
