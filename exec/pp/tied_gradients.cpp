#include "exec/pp/tied_gradients.h"

#include <vector>

namespace quintnet::exec {

void TiedGradients::sum_copies(ParallelModel& model) {
  if (model.num_stages == 1) return;  // one stage: the parameter is one tensor
  std::vector<torch::Tensor> held;    // the copies this rank's first and last stages hold
  for (int c = 0; c < static_cast<int>(model.chunks.size()); ++c)
    if (model.is_first(c) || model.is_last(c))
      for (const torch::Tensor& p : model.chunks[c].model->tied_parameters()) held.push_back(p);
  if (held.empty()) return;  // a middle stage, or a model that ties nothing
  torch::NoGradGuard no_grad;
  torch::Tensor sum = held.front().grad().reshape({-1}).clone();
  for (size_t i = 1; i < held.size(); ++i) sum += held[i].grad().reshape({-1});
  // The other copy is on the pipeline's other end unless this rank holds both.
  if (held.size() == 1) comm_.all_reduce_sum(comm_.pipeline_ends(), sum);
  for (auto& p : held) p.grad().copy_(sum.view_as(p.grad()));
}

}  // namespace quintnet::exec
