#include "core/run_options.h"

namespace quintnet::core {

template <>
const std::vector<std::pair<Axis, std::string>>& option_names<Axis>() {
  static const std::vector<std::pair<Axis, std::string>> names = {{Axis::Dp, "dp"}, {Axis::Tp, "tp"}, {Axis::Pp, "pp"}, {Axis::Cp, "cp"}};
  return names;
}

template <>
const std::vector<std::pair<Device, std::string>>& option_names<Device>() {
  static const std::vector<std::pair<Device, std::string>> names = {{Device::Cpu, "cpu"}, {Device::Cuda, "cuda"}};
  return names;
}

template <>
const std::vector<std::pair<Precision, std::string>>& option_names<Precision>() {
  static const std::vector<std::pair<Precision, std::string>> names = {{Precision::Fp32, "fp32"},
                                                                       {Precision::Bf16, "bf16"},
                                                                       {Precision::Bf16Weights, "bf16_weights"}};
  return names;
}

template <>
const std::vector<std::pair<Recompute, std::string>>& option_names<Recompute>() {
  static const std::vector<std::pair<Recompute, std::string>> names = {
      {Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}};
  return names;
}

template <>
const std::vector<std::pair<KernelSet, std::string>>& option_names<KernelSet>() {
  static const std::vector<std::pair<KernelSet, std::string>> names = {
      {KernelSet::Unfused, "unfused"}, {KernelSet::Fused, "fused"}, {KernelSet::Flash, "flash"}};
  return names;
}

}  // namespace quintnet::core
