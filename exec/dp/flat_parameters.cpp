#include "exec/dp/flat_parameters.h"

#include <stdexcept>

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
  separate_ = weight_dtype != params_.scalar_type();
  weights_ = separate_ ? params_.to(weight_dtype) : params_;
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

torch::Tensor& FlatParameters::params() {
  if (!holds_masters())
    throw std::logic_error("FlatParameters: the master weights were handed over to the optimizer (ZeRO-1)");
  return params_;
}

void FlatParameters::refresh_weights() {
  if (!separate_) return;
  torch::NoGradGuard no_grad;
  weights_.copy_(params());
}

void FlatParameters::hand_over_masters() {
  if (!separate_) throw std::logic_error("FlatParameters: the masters are the weights; nothing to hand over");
  params_ = torch::Tensor();
}

void FlatParameters::load_masters(const torch::Tensor& whole) {
  torch::NoGradGuard no_grad;
  if (holds_masters()) {
    params_.copy_(whole);
    refresh_weights();
  } else {
    weights_.copy_(whole);  // one cast, as refresh_weights()
  }
}

std::map<std::string, torch::Tensor> FlatParameters::slot_views(const torch::Tensor& buffer) const {
  std::map<std::string, torch::Tensor> out;
  for (const Slot& s : slots_) out[s.name] = buffer.narrow(0, s.offset, s.numel).view(s.param.sizes());
  return out;
}

}  // namespace quintnet::exec
