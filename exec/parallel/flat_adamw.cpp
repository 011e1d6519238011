#include "exec/parallel/flat_adamw.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include <torch/version.h>

#include "exec/dp/zero_shards.h"

namespace quintnet::exec {

bool FlatAdamW::fused_available() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return true;
#else
  return false;
#endif
}

FlatAdamW::FlatAdamW(FlatParameters& flat, double weight_decay, std::shared_ptr<ZeroShards> shards, Kernel kernel,
                     double beta1, double beta2, double eps)
    : flat_(flat), weight_decay_(weight_decay), beta1_(beta1), beta2_(beta2), eps_(eps), shards_(std::move(shards)) {
  const torch::TensorOptions options = flat.params().options();
  if (kernel == Kernel::Fused && !fused_available())
    throw std::invalid_argument("FlatAdamW: the fused kernel needs LibTorch 2.4 or later");
  fused_ = kernel == Kernel::Fused || (kernel == Kernel::Automatic && fused_available() && options.device().is_cuda());
  const int64_t held = shards_ ? shards_->numel() : flat.params().numel();
  exp_avg_ = torch::zeros({held}, options);
  exp_avg_sq_ = torch::zeros({held}, options);
  if (fused_) device_steps_ = torch::zeros({}, options.dtype(torch::kFloat32));
  if (shards_ && flat.separate_weights()) {
    master_pieces_ = shards_->take(flat.params());
    flat.hand_over_masters();
  }
}

long FlatAdamW::steps() const { return fused_ ? std::lround(device_steps_.item<double>()) : step_; }

void FlatAdamW::set_steps(long steps) {
  step_ = steps;
  if (fused_) device_steps_.fill_(static_cast<double>(steps));
}

void FlatAdamW::step(double lr, const torch::Tensor& skip) {
  torch::NoGradGuard no_grad;
  if (!fused_) {
    if (skip.defined() && skip.item<bool>()) return;
    ++step_;
  }
  if (!shards_) {
    update(flat_.params(), flat_.grads(), lr, skip);
    // Under bf16 weights the model computes with a bf16 copy of the masters (a skipped
    // step leaves the masters, so the copy too, as they were).
    flat_.refresh_weights();
    return;
  }
  torch::Tensor p = master_pieces_.defined() ? master_pieces_ : shards_->take(flat_.params());
  update(p, shards_->take(flat_.grads()), lr, skip);
  gather_pieces(p);  // a skipped step gathers the weights as they were
}

void FlatAdamW::gather_pieces(const torch::Tensor& pieces) {
  if (master_pieces_.defined()) {
    // What the next forward needs is the bf16 copy: each rank casts its pieces and the
    // ranks gather them (half the bytes of fp32 masters).
    torch::Tensor weights = flat_.weights();
    shards_->gather_into(pieces.to(weights.scalar_type()), weights);
    return;
  }
  shards_->gather_into(pieces, flat_.params());
  flat_.refresh_weights();
}

torch::Tensor FlatAdamW::whole_masters() {
  if (!master_pieces_.defined()) return flat_.params();
  torch::Tensor whole = torch::empty_like(flat_.grads());  // fp32, shaped like the buffer
  shards_->gather_into(master_pieces_, whole);
  return whole;
}

void FlatAdamW::update(torch::Tensor& p, const torch::Tensor& g, double lr, const torch::Tensor& skip) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (fused_) {
    // As torch.optim.AdamW(fused=True) drives it: the count goes up before the kernel
    // (which reads it for the bias corrections) and back down where the step was skipped.
    device_steps_.add_(1);
    std::optional<torch::Tensor> found_inf;
    if (skip.defined()) found_inf = skip.to(torch::kFloat32).reshape({});
    at::_fused_adamw_({p}, {g}, {exp_avg_}, {exp_avg_sq_}, {}, {device_steps_}, lr, beta1_, beta2_, weight_decay_, eps_,
                      /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found_inf);
    if (found_inf) device_steps_.sub_(*found_inf);
    return;
  }
#else
  (void)skip;
#endif
  p.mul_(1.0 - lr * weight_decay_);
  exp_avg_.mul_(beta1_).add_(g, 1.0 - beta1_);
  exp_avg_sq_.mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
  const double bias1 = 1.0 - std::pow(beta1_, static_cast<double>(step_));
  const double bias2 = 1.0 - std::pow(beta2_, static_cast<double>(step_));
  torch::Tensor denom = (exp_avg_sq_.sqrt() / std::sqrt(bias2)).add_(eps_);
  p.addcdiv_(exp_avg_, denom, -lr / bias1);
}

std::vector<FlatAdamW::StatePiece> FlatAdamW::state_pieces() const {
  std::vector<StatePiece> out;
  std::int64_t at = 0;  // into this rank's moments, which hold its pieces one after another
  for (const ZeroShards::Range& r : pieces()) {
    const torch::Tensor masters = master_pieces_.defined() ? master_pieces_.narrow(0, at, r.numel)
                                                           : flat_.params().narrow(0, r.offset, r.numel);
    out.push_back({r.offset, masters, exp_avg_.narrow(0, at, r.numel), exp_avg_sq_.narrow(0, at, r.numel)});
    at += r.numel;
  }
  return out;
}

void FlatAdamW::load_state(const torch::Tensor& masters, const torch::Tensor& exp_avg,
                           const torch::Tensor& exp_avg_sq) {
  torch::NoGradGuard no_grad;
  if (!shards_) {
    flat_.load_masters(masters);
    exp_avg_.copy_(exp_avg);
    exp_avg_sq_.copy_(exp_avg_sq);
    return;
  }
  torch::Tensor mine = shards_->take(masters).to(flat_.grads().device());
  exp_avg_.copy_(shards_->take(exp_avg));
  exp_avg_sq_.copy_(shards_->take(exp_avg_sq));
  if (master_pieces_.defined()) mine = master_pieces_.copy_(mine);
  gather_pieces(mine);
}

std::vector<ZeroShards::Range> FlatAdamW::pieces() const {
  if (!shards_) return {{0, flat_.grads().numel()}};
  return shards_->pieces();
}

std::int64_t FlatAdamW::state_bytes() const {
  std::int64_t elements = exp_avg_.numel() + exp_avg_sq_.numel();
  if (master_pieces_.defined()) elements += master_pieces_.numel();
  else if (flat_.separate_weights()) elements += flat_.params().numel();  // the whole masters, in FlatParameters
  return elements * static_cast<std::int64_t>(exp_avg_.element_size());
}

}  // namespace quintnet::exec
