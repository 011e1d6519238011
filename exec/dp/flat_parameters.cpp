#include "exec/dp/flat_parameters.h"

namespace quintnet::exec {

FlatParameters::FlatParameters(torch::nn::Module& model, const std::map<std::string, int>& sharded,
                               torch::ScalarType weight_dtype) {
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
  for (Slot& s : slots_) params_.narrow(0, s.offset, s.numel).view(s.param.sizes()).copy_(s.param);
  weights_ = weight_dtype == params_.scalar_type() ? params_ : params_.to(weight_dtype);
  for (Slot& s : slots_) {
    s.param.set_data(weights_.narrow(0, s.offset, s.numel).view(s.param.sizes()));
    // A defined gradient is accumulated into in place by autograd: into our buffer (an
    // fp32 one under bf16 weights too: the in-place addition widens each bf16 gradient).
    s.param.mutable_grad() = grads_.narrow(0, s.offset, s.numel).view(s.param.sizes());
    std::vector<FlatRange>& ranges = sharded.count(s.name) ? sharded_ranges_ : replicated_ranges_;
    if (!ranges.empty() && ranges.back().offset + ranges.back().numel == s.offset)
      ranges.back().numel += s.numel;
    else
      ranges.push_back({s.offset, s.numel});
  }
}

void FlatParameters::refresh_weights() {
  if (!separate_weights()) return;
  torch::NoGradGuard no_grad;
  weights_.copy_(params_);
}

std::map<std::string, torch::Tensor> FlatParameters::masters() {
  std::map<std::string, torch::Tensor> out;
  for (const Slot& s : slots_) out[s.name] = params_.narrow(0, s.offset, s.numel).view(s.param.sizes());
  return out;
}

}  // namespace quintnet::exec
