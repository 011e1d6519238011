#include "exec/models/random_state.h"

#include <mutex>

namespace quintnet::exec {
namespace {

at::Generator default_generator(const torch::Device& device) {
  return at::globalContext().defaultGenerator(device.type());
}

}  // namespace

torch::Tensor random_state(const torch::Device& device) {
  at::Generator generator = default_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

torch::Tensor swap_random_state(const torch::Device& device, const torch::Tensor& state) {
  at::Generator generator = default_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  torch::Tensor before = generator.get_state();
  generator.set_state(state);
  return before;
}

}  // namespace quintnet::exec
