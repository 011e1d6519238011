#include "exec/models/vit.h"

#include "core/error.h"
#include "exec/models/attention.h"
#include "exec/models/recompute.h"
#include "exec/models/registry.h"
#include "exec/models/serial_state.h"

namespace quintnet::exec {

AttentionImpl::AttentionImpl(int64_t dim, int64_t heads, const TpContext& tp)
    : local_heads_(heads / tp.size()), head_dim_(dim / heads) {
  // One GEMM for this rank's q, k and v (as GPT-2's c_attn), one copy of the input,
  // so its gradient is all-reduced once.
  qkv_ = register_module("qkv", QkvParallelLinear(dim, dim, tp));
  out_ = register_module("out", RowParallelLinear(dim, dim, tp, /*input_is_parallel=*/true));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const auto qkv = qkv_(x);
  // The whole sequence's tokens (x holds this rank's part of them under sequence parallelism).
  const int64_t b = qkv[0].size(0), t = qkv[0].size(1);
  // [B, T, local_heads * head_dim] -> [B, T, local_heads, head_dim]: views, no copies.
  auto heads = [&](const torch::Tensor& y) { return y.view({b, t, local_heads_, head_dim_}); };
  const torch::Tensor ctx = attention_core(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), /*causal=*/false);
  return out_(ctx.view({b, t, local_heads_ * head_dim_}));
}

MlpImpl::MlpImpl(int64_t dim, int64_t hidden, const TpContext& tp) {
  fc1_ = register_module("fc1", ColumnParallelLinear(dim, hidden, tp));
  fc2_ = register_module("fc2", RowParallelLinear(hidden, dim, tp, /*input_is_parallel=*/true));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return fc2_(torch::gelu(fc1_(x))); }

BlockImpl::BlockImpl(int64_t dim, int64_t heads, int64_t mlp_hidden, const TpContext& tp) {
  ln1_ = register_module("ln1", LayerNorm(torch::nn::LayerNormOptions({dim})));
  attn_ = register_module("attn", Attention(dim, heads, tp));
  ln2_ = register_module("ln2", LayerNorm(torch::nn::LayerNormOptions({dim})));
  mlp_ = register_module("mlp", Mlp(dim, mlp_hidden, tp));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = x + attn_(ln1_(x));
  return h + mlp_(ln2_(h));
}

ViTImpl::ViTImpl(const core::VitConfig& config, const TpContext& tp, StageRange range)
    : config_(config), tp_(tp), range_(range) {
  if (range_.end_block < 0) range_.end_block = config.depth;
  const int64_t d = config.hidden_dim, p = config.patch_size;
  const int64_t patches = (config.img_size / p) * (config.img_size / p);
  if (range_.has_embedding()) {
    patch_proj_ = register_module("patch_proj", torch::nn::Linear(config.in_channels * p * p, d));
    cls_token_ = register_parameter("cls_token", torch::randn({1, 1, d}) * 0.02);
    pos_embed_ = register_parameter("pos_embed", torch::randn({1, patches + 1, d}) * 0.02);
  }
  for (int i = range_.first_block; i < range_.end_block; ++i)
    blocks_.push_back(register_module("block" + std::to_string(i), Block(d, config.n_heads, 4 * d, tp)));
  if (has_head()) {
    ln_f_ = register_module("ln_f", LayerNorm(torch::nn::LayerNormOptions({d})));
    head_ = register_module("head", torch::nn::Linear(d, config.num_classes));
  }
}

torch::Tensor ViTImpl::forward(const torch::Tensor& input) {
  torch::Tensor x = input;
  if (range_.has_embedding()) {
    // [B, C, H, W] -> non-overlapping p×p patches [B, N, C·p·p] (a stride-p convolution).
    const int64_t b = x.size(0), c = x.size(1), p = config_.patch_size, g = config_.img_size / p;
    x = x.reshape({b, c, g, p, g, p}).permute({0, 2, 4, 1, 3, 5}).reshape({b, g * g, c * p * p});
    x = patch_proj_(x);
    x = torch::cat({cls_token_.expand({b, 1, x.size(2)}), x}, 1) + pos_embed_;
    if (tp_.sequence_parallel) x = scatter_sequence(x, tp_);  // this rank's part of the tokens
  }
  // Under full recomputation each block keeps only its input (exec/models/recompute.h).
  for (auto& block : blocks_) x = run_block(*block, [block](const torch::Tensor& in) mutable { return block->forward(in); }, x);
  if (has_head()) {
    // The whole sequence for the head, which every tp rank computes alike.
    if (tp_.sequence_parallel) x = gather_sequence(x, tp_, /*replicated_gradients=*/true);
    x = head_(ln_f_(x.select(1, 0)));
  }
  return x;
}

std::vector<torch::Tensor> ViTImpl::partial_gradient_parameters() {
  std::vector<torch::Tensor> out;
  if (!tp_.sequence_parallel) return out;  // else every tp rank computes them on the whole sequence
  for (auto& block : blocks_)
    for (const torch::Tensor& p : replicated_parameters(*block)) out.push_back(p);
  return out;
}

StageLoss ViTImpl::loss(const torch::Tensor& output, const torch::Tensor& labels) {
  const torch::Tensor logits = output.to(torch::kFloat32);  // fp32 under autocast too: ten classes cost nothing
  return {torch::nn::functional::cross_entropy(logits, labels), logits.argmax(1).eq(labels).sum(),
          static_cast<double>(labels.size(0))};
}

std::shared_ptr<StageModel> ViTImpl::make_stage(const TpContext& tp, StageRange range) const {
  return std::make_shared<ViTImpl>(config_, tp, range);
}

// How the trainer meets the ViT (exec/models/registry.h).
ModelEntry vit_model_entry() {
  ModelEntry vit;
  vit.kind = core::VitConfig::kName;
  vit.make_serial = [](const core::Plan& p) { return ViT(p.model.as<core::VitConfig>(), TpContext{}).ptr(); };
  vit.load_data = [](const core::Plan& p) {
    const core::VitConfig& c = p.model.as<core::VitConfig>();
    return load_image_data(p, {c.img_size, c.num_classes});
  };
  // One token per patch, and the class token.
  vit.tokens = [](const core::Plan& p) {
    const core::VitConfig& c = p.model.as<core::VitConfig>();
    const int side = c.img_size / c.patch_size;
    return static_cast<std::int64_t>(side * side + 1);
  };
  vit.has_dropout = [](const core::ModelConfig& m) { return m.as<core::VitConfig>().dropout > 0; };
  return vit;
}

}  // namespace quintnet::exec
