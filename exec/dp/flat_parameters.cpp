#include "exec/dp/flat_parameters.h"

namespace quintnet::exec {

FlatParameters::FlatParameters(torch::nn::Module& model, const std::map<std::string, int>& sharded) {
  auto named = model.named_parameters();
  int64_t total = 0;
  for (size_t i = named.size(); i-- > 0;) {
    torch::Tensor p = named[i].value();
    slots_.push_back(Slot{named[i].key(), p, total, p.numel()});
    total += p.numel();
  }
  const auto options = named.is_empty() ? torch::TensorOptions() : named[0].value().options();
  params_ = torch::empty({total}, options);
  grads_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    torch::Tensor view = params_.narrow(0, s.offset, s.numel).view(s.param.sizes());
    view.copy_(s.param);
    s.param.set_data(view);
    // A defined gradient is accumulated into in place by autograd: into our buffer.
    s.param.mutable_grad() = grads_.narrow(0, s.offset, s.numel).view(s.param.sizes());
    std::vector<FlatRange>& ranges = sharded.count(s.name) ? sharded_ranges_ : replicated_ranges_;
    if (!ranges.empty() && ranges.back().offset + ranges.back().numel == s.offset)
      ranges.back().numel += s.numel;
    else
      ranges.push_back({s.offset, s.numel});
  }
}

}  // namespace quintnet::exec
