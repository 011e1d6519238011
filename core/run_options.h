#pragma once
// The closed choices of a run, as types: the mesh's axes and the options a plan picks
// from a short list.  A config writes them as names ("bf16", "selective"); the loader
// (core/plan_keys.cpp) turns each name into its enum once, so no other code compares
// an option or an axis as a string.  Each enum's names live in one table
// (core/run_options.cpp), used for reading, writing and messages alike.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace quintnet::core {

// The parallel axes of a mesh: data, tensor and pipeline parallelism, and context
// parallelism (each sample's sequence split over the cp group, attention by a ring:
// exec/cp/ring_attention.h).  A default mesh has the first three.
enum class Axis { Dp, Tp, Pp, Cp };
// Where ranks compute.
enum class Device { Cpu, Cuda };
// fp32; bf16: forward passes under autocast (matrix products in bfloat16), weights,
// gradients and optimizer state in fp32 (exec/precision/autocast.h); bf16_weights: the
// model's weights themselves bfloat16, no autocast, gradients and optimizer state fp32
// with fp32 master weights in the optimizer (exec/dp/flat_parameters.h).
enum class Precision { Fp32, Bf16, Bf16Weights };
// Activation recomputation (Korthikanti et al.): none; selective (the attention core,
// QK^T / softmax / dropout / V, recomputed in the backward); full (each layer's input
// kept, its forward recomputed in the backward).
enum class Recompute { None, Selective, Full };
// How a run computes a layer's memory-bound parts (core/layer_kernels.h says what each
// set fuses): plain PyTorch ops, Megatron-LM's fused kernels, or FlashAttention.
enum class KernelSet { Unfused, Fused, Flash };

// Each enum's values with their names, in the order messages list them.
template <typename E>
const std::vector<std::pair<E, std::string>>& option_names();
template <> const std::vector<std::pair<Axis, std::string>>& option_names<Axis>();
template <> const std::vector<std::pair<Device, std::string>>& option_names<Device>();
template <> const std::vector<std::pair<Precision, std::string>>& option_names<Precision>();
template <> const std::vector<std::pair<Recompute, std::string>>& option_names<Recompute>();
template <> const std::vector<std::pair<KernelSet, std::string>>& option_names<KernelSet>();

template <typename E>
const std::string& name_of(E value) {
  for (const auto& [v, name] : option_names<E>())
    if (v == value) return name;
  return option_names<E>().front().second;  // unreachable: every value has a row
}

template <typename E>
std::optional<E> parse_option(const std::string& name) {
  for (const auto& [v, n] : option_names<E>())
    if (n == name) return v;
  return std::nullopt;
}

// "none, selective or full" (last_separator " or "), "dp, tp, pp" (", ").
template <typename E>
std::string option_list(const std::string& last_separator) {
  const auto& names = option_names<E>();
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? last_separator : ", ") + names[i].second;
  return out;
}

// The axes a default mesh lists, in its order (cp only where a plan names it).
inline const std::vector<Axis>& all_axes() {
  static const std::vector<Axis> axes = {Axis::Dp, Axis::Tp, Axis::Pp};
  return axes;
}

}  // namespace quintnet::core
