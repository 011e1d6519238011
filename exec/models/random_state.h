#pragma once
// The state of the generator dropout draws from on a device (the CPU's default
// generator, or the GPU's): read it before a forward that is recomputed later, set it
// back for the recomputation so that the same masks come out, then restore it.
// The generator's lock is held around its state only: dropout takes it for every mask,
// so holding it across a forward would deadlock.
#include <torch/torch.h>

namespace quintnet::exec {

torch::Tensor random_state(const torch::Device& device);

// Sets `state`; returns the state it replaced.
torch::Tensor swap_random_state(const torch::Device& device, const torch::Tensor& state);

}  // namespace quintnet::exec
