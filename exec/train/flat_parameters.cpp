#include "exec/train/flat_parameters.h"

#include <cmath>

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
  sharded_mask_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    torch::Tensor view = params_.narrow(0, s.offset, s.numel).view(s.param.sizes());
    view.copy_(s.param);
    s.param.set_data(view);
    // A defined gradient is accumulated into in place by autograd: into our buffer.
    s.param.mutable_grad() = grads_.narrow(0, s.offset, s.numel).view(s.param.sizes());
    if (sharded.count(s.name)) sharded_mask_.narrow(0, s.offset, s.numel).fill_(1);
  }
}

FlatAdamW::FlatAdamW(FlatParameters& flat, double weight_decay, double beta1, double beta2, double eps)
    : flat_(flat), weight_decay_(weight_decay), beta1_(beta1), beta2_(beta2), eps_(eps),
      exp_avg_(torch::zeros_like(flat.params())), exp_avg_sq_(torch::zeros_like(flat.params())) {}

void FlatAdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  torch::Tensor& p = flat_.params();
  const torch::Tensor& g = flat_.grads();
  p.mul_(1.0 - lr * weight_decay_);
  exp_avg_.mul_(beta1_).add_(g, 1.0 - beta1_);
  exp_avg_sq_.mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
  const double bias1 = 1.0 - std::pow(beta1_, static_cast<double>(step_));
  const double bias2 = 1.0 - std::pow(beta2_, static_cast<double>(step_));
  torch::Tensor denom = (exp_avg_sq_.sqrt() / std::sqrt(bias2)).add_(eps_);
  p.addcdiv_(exp_avg_, denom, -lr / bias1);
}

}  // namespace quintnet::exec
