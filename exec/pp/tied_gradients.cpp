#include "exec/pp/tied_gradients.h"

#include <vector>

namespace quintnet::exec {

void TiedGradients::sum_over_pipeline(ParallelModel& model) {
  if (model.num_stages == 1 || pp_.size() == 1) return;  // one stage: the parameter is one tensor
  std::vector<torch::Tensor> held;
  for (int c = 0; c < static_cast<int>(model.chunks.size()); ++c)
    if (model.is_first(c) || model.is_last(c))
      for (const torch::Tensor& p : model.chunks[c].model->tied_parameters()) held.push_back(p);
  const torch::Device device = model.chunks.front().model->parameters().front().device();
  if (!checked_) {  // does the model tie anything? (every rank learns it from the end stages)
    torch::Tensor numel = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    for (const auto& p : held) numel[0] = static_cast<double>(p.numel());
    comm_.all_reduce_max(pp_, numel);
    numel_ = static_cast<int64_t>(numel[0].item<double>());
    checked_ = true;
  }
  if (numel_ == 0) return;
  torch::NoGradGuard no_grad;
  torch::Tensor sum = torch::zeros({numel_}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  for (const auto& p : held) sum += p.grad().reshape({-1});
  comm_.all_reduce_sum(pp_, sum);
  for (auto& p : held) p.grad().copy_(sum.view_as(p.grad()));
}

}  // namespace quintnet::exec
