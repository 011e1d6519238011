#include "exec/train/memory_report.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "exec/train/cpu_allocator.h"

#ifdef QN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace quintnet::exec {
namespace {

// Bytes the device's allocator has handed out and not taken back: now, and the most
// since the last reset_peak.
struct Allocated {
  std::size_t current = 0, peak = 0;
};

Allocated allocated(const torch::Device& device) {
  if (device.is_cpu()) {
    const auto stats = caching_cpu_allocator_stats();
    return {stats.live_bytes, stats.peak_live_bytes};
  }
#ifdef QN_WITH_CUDA
  // allocated_bytes[0]: StatType::AGGREGATE, every pool (its namespace moved between versions).
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return {static_cast<std::size_t>(stats.allocated_bytes[0].current),
          static_cast<std::size_t>(stats.allocated_bytes[0].peak)};
#else
  return {};
#endif
}

void reset_peak(const torch::Device& device) {
  if (device.is_cpu()) return reset_cpu_peak_bytes();
#ifdef QN_WITH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

}  // namespace

ActivationPeak::ActivationPeak(const torch::Device& device) : device_(device), alive_before_(allocated(device).current) {
  reset_peak(device);
}

std::size_t ActivationPeak::bytes() const {
  const std::size_t peak = allocated(device_).peak;
  return peak > alive_before_ ? peak - alive_before_ : 0;
}

std::string memory_report(Communicator& comm, ParallelModel& pm, const Optimizers& optimizers,
                          std::size_t activation_bytes, const torch::Device& device) {
  double parameters = 0, gradients = 0, optimizer = 0;
  for (auto& chunk : pm.chunks) {
    // What the model computes with; under bf16 weights the fp32 masters count as
    // optimizer state (FlatAdamW::state_bytes), as the simulator's split counts them.
    parameters += static_cast<double>(chunk.flat->weights().nbytes());
    gradients += static_cast<double>(chunk.flat->grads().nbytes());
  }
  for (const auto& opt : optimizers) optimizer += static_cast<double>(opt->state_bytes());
  const nlohmann::json mine = {{"rank", comm.rank()},
                               {"parameters", parameters},
                               {"gradients", gradients},
                               {"optimizer", optimizer},
                               {"activations", static_cast<double>(activation_bytes)}};
  const std::vector<std::string> all = comm.gather_strings(mine.dump());
  if (all.empty()) return "";
  nlohmann::json fullest;
  double most = -1;
  for (const std::string& s : all) {
    const auto j = nlohmann::json::parse(s);
    const double total = j["parameters"].get<double>() + j["gradients"].get<double>() +
                         j["optimizer"].get<double>() + j["activations"].get<double>();
    if (total > most) most = total, fullest = j;
  }
  const int rank = fullest["rank"];
  const core::Mesh& mesh = comm.mesh();
  auto mib = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", bytes / (1024.0 * 1024.0));
    return std::string(text);
  };
  return "memory: fullest rank " + std::to_string(rank) + " (dp " + std::to_string(mesh.coord(rank, core::Axis::Dp)) + ", tp " +
         std::to_string(mesh.coord(rank, core::Axis::Tp)) + ", pp " + std::to_string(mesh.coord(rank, core::Axis::Pp)) +
         (mesh.size(core::Axis::Cp) > 1 ? ", cp " + std::to_string(mesh.coord(rank, core::Axis::Cp)) : std::string()) + "): " + mib(most) +
         " MiB = parameters " + mib(fullest["parameters"]) + " + gradients " + mib(fullest["gradients"]) +
         " + optimizer state " + mib(fullest["optimizer"]) + " + activations " + mib(fullest["activations"]) +
         (device.is_cpu() ? " (CPU tensors" : " (CUDA caching allocator") +
         "; activations: the peak over a step's forward and backward)";
}

}  // namespace quintnet::exec
