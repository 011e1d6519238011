#include "sim/kernel_report.h"

#include <cstdio>
#include <map>

#include "sim/roofline.h"

namespace quintnet::sim {
namespace {

const char* pass_name(core::Pass pass) {
  switch (pass) {
    case core::Pass::BackwardInput: return "backward (inputs)";
    case core::Pass::BackwardWeight: return "backward (weights)";
    default: return "forward";
  }
}

}  // namespace

std::string kernel_report(const std::vector<core::Kernel>& kernels, const Platform& platform) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-52s %-18s %6s %10s %10s %10s  %s\n", "kernel", "pass", "count", "GFLOP", "MB",
                "ms (all)", "bound by");
  out += line;
  std::map<core::Pass, double> seconds, matrix_seconds;
  for (const auto& k : kernels) {
    const double t = kernel_seconds(k, platform) * k.count;
    seconds[k.pass] += t;
    const bool by_flops = k.matrix() && (!platform.has_roofline() || t > memory_seconds(k.bytes, platform) * k.count);
    if (by_flops) matrix_seconds[k.pass] += t;
    std::snprintf(line, sizeof(line), "%-52.52s %-18s %6.0f %10.3f %10.2f %10.4f  %s\n", k.name.c_str(),
                  pass_name(k.pass), k.count, k.flops / 1e9, k.bytes / 1e6, t * 1e3, by_flops ? "FLOPs" : "memory");
    out += line;
  }
  for (const auto pass : {core::Pass::Forward, core::Pass::BackwardInput, core::Pass::BackwardWeight}) {
    const double all = seconds[pass];
    std::snprintf(line, sizeof(line), "%-20s %10.4f ms, %5.1f%% of it bound by FLOPs\n", pass_name(pass), all * 1e3,
                  all > 0 ? 100 * matrix_seconds[pass] / all : 0.0);
    out += line;
  }
  return out;
}

}  // namespace quintnet::sim
