#include "exec/models/llama.h"

#include <cmath>

#include "core/error.h"
#include "exec/cp/ring_attention.h"
#include "exec/models/attention.h"
#include "exec/models/recompute.h"
#include "exec/models/registry.h"

namespace quintnet::exec {

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const torch::Tensor xf = x.to(torch::kFloat32);
  const torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

torch::Tensor rotary_frequencies(int64_t d, double theta, const core::RopeScaling& scaling, torch::Device device) {
  // In fp32, op for op as Hugging Face computes them (Python's `a / tensor` is
  // tensor.reciprocal() * a): theta^(-2i/d), i < d/2.
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const torch::Tensor inv_freq =
      torch::pow(theta, torch::arange(0, d, 2, f32.dtype(torch::kLong)).to(torch::kFloat32) / static_cast<double>(d))
          .reciprocal();
  if (!scaling.scales()) return inv_freq;
  // Llama 3.1 (transformers' _compute_llama3_parameters): long wavelengths slowed by
  // `factor`, short ones kept, the band between blended.
  const double old_context = scaling.original_max_position_embeddings;
  const double low_wavelength = old_context / scaling.low_freq_factor;
  const double high_wavelength = old_context / scaling.high_freq_factor;
  const torch::Tensor wavelength = inv_freq.reciprocal() * (2 * M_PI);
  torch::Tensor scaled = torch::where(wavelength > low_wavelength, inv_freq / scaling.factor, inv_freq);
  const torch::Tensor smooth =
      (wavelength.reciprocal() * old_context - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
  const torch::Tensor smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled;
  const torch::Tensor medium = (wavelength >= high_wavelength).logical_and(wavelength <= low_wavelength);
  return torch::where(medium, smoothed, scaled);
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& inv_freq, int64_t first_position) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(x.device());
  return apply_rotary(x, inv_freq, torch::arange(first_position, first_position + x.size(1), f32));
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& inv_freq, const torch::Tensor& positions) {
  const int64_t t = x.size(1), d = x.size(3);
  const torch::Tensor angles = torch::outer(positions, inv_freq);  // [T, d/2]
  const torch::Tensor both = torch::cat({angles, angles}, -1).view({1, t, 1, d});
  const torch::Tensor cos = both.cos().to(x.scalar_type()), sin = both.sin().to(x.scalar_type());
  // rotate_half: (x1, x2) -> (-x2, x1) over the two halves of each head's features.
  const torch::Tensor rotated = torch::cat({-x.narrow(3, d / 2, d / 2), x.narrow(3, 0, d / 2)}, 3);
  return x * cos + rotated * sin;
}

LlamaAttentionImpl::LlamaAttentionImpl(const core::LlamaConfig& c, const TpContext& tp)
    : local_heads_(c.num_attention_heads / tp.size()),
      head_dim_(c.hidden_size / c.num_attention_heads),
      rope_theta_(c.rope_theta),
      rope_scaling_(c.rope_scaling) {
  if (c.num_attention_heads % tp.size() != 0)
    throw core::UserError("Llama: num_attention_heads " + std::to_string(c.num_attention_heads) + " is not divisible by tp " +
                          std::to_string(tp.size()));
  if (c.num_attention_heads % c.num_key_value_heads != 0 || (c.num_key_value_heads % tp.size() != 0 && tp.size() % c.num_key_value_heads != 0))
    throw core::UserError("Llama: num_key_value_heads " + std::to_string(c.num_key_value_heads) +
                          " must divide num_attention_heads and divide or be divided by tp");
  q_ = register_module("q_proj", ColumnParallelLinear(c.hidden_size, c.num_attention_heads * head_dim_, tp, false, /*with_bias=*/false));
  k_ = register_module("k_proj", KeyValueParallelLinear(c.hidden_size, c.num_key_value_heads, head_dim_, tp));
  v_ = register_module("v_proj", KeyValueParallelLinear(c.hidden_size, c.num_key_value_heads, head_dim_, tp));
  o_ = register_module("o_proj", RowParallelLinear(c.num_attention_heads * head_dim_, c.hidden_size, tp, true, /*with_bias=*/false));
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x) {
  const torch::Tensor q_all = q_(x);  // the whole sequence (x may be this rank's part of it)
  const int64_t b = q_all.size(0), t = q_all.size(1), kv_heads = k_->local_heads();
  // Under context parallelism this rank's tokens are two chunks from far apart.
  const torch::Tensor positions = local_positions(t, cp_, x.device());
  const torch::Tensor freq = rotary_frequencies(head_dim_, rope_theta_, rope_scaling_, x.device());
  const torch::Tensor q = apply_rotary(q_all.view({b, t, local_heads_, head_dim_}), freq, positions);
  const torch::Tensor k = apply_rotary(k_(x).view({b, t, kv_heads, head_dim_}), freq, positions);
  const torch::Tensor v = v_(x).view({b, t, kv_heads, head_dim_});
  const torch::Tensor ctx = cp_.size() > 1 ? ring_attention(q, k, v, cp_)
                                           : attention_core(q, repeat_for_queries(k), repeat_for_queries(v).contiguous(), /*causal=*/true);
  return o_(ctx.view({b, t, local_heads_ * head_dim_}));
}

// Each key/value head serves local_heads / kv_heads consecutive query heads (Hugging
// Face's repeat_kv): repeated so the attention sees one per query head.
torch::Tensor LlamaAttentionImpl::repeat_for_queries(const torch::Tensor& kv) const {
  const int64_t kv_heads = kv.size(2);
  return kv_heads == local_heads_ ? kv : kv.repeat_interleave(local_heads_ / kv_heads, 2);
}

torch::Tensor LlamaAttentionImpl::forward_cached(const torch::Tensor& x, KvCache& cache, int layer) {
  const int64_t b = x.size(0), t = x.size(1), kv_heads = k_->local_heads(), start = cache.length();
  const torch::Tensor freq = rotary_frequencies(head_dim_, rope_theta_, rope_scaling_, x.device());
  const torch::Tensor q = apply_rotary(q_(x).view({b, t, local_heads_, head_dim_}), freq, start);
  const torch::Tensor k_new = apply_rotary(k_(x).view({b, t, kv_heads, head_dim_}), freq, start);
  const auto [k, v] = cache.append(layer, k_new, v_(x).view({b, t, kv_heads, head_dim_}));
  const torch::Tensor ctx = cached_attention(q, repeat_for_queries(k), repeat_for_queries(v), start);
  return o_(ctx.view({b, t, local_heads_ * head_dim_}));
}

std::vector<torch::Tensor> LlamaAttentionImpl::partial_gradient_parameters() {
  if (k_->sharded()) return {};
  return {k_->weight, v_->weight};
}

LlamaMlpImpl::LlamaMlpImpl(const core::LlamaConfig& c, const TpContext& tp) {
  gate_ = register_module("gate_proj", ColumnParallelLinear(c.hidden_size, c.intermediate_size, tp, false, /*with_bias=*/false));
  up_ = register_module("up_proj", ColumnParallelLinear(c.hidden_size, c.intermediate_size, tp, false, /*with_bias=*/false));
  down_ = register_module("down_proj", RowParallelLinear(c.intermediate_size, c.hidden_size, tp, true, /*with_bias=*/false));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) { return down_(torch::silu(gate_(x)) * up_(x)); }

LlamaLayerImpl::LlamaLayerImpl(const core::LlamaConfig& c, const TpContext& tp) {
  input_norm_ = register_module("input_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps));
  attn_ = register_module("self_attn", LlamaAttention(c, tp));
  post_attention_norm_ = register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps));
  mlp_ = register_module("mlp", LlamaMlp(c, tp));
}

torch::Tensor LlamaLayerImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = x + attn_(input_norm_(x));
  return h + mlp_(post_attention_norm_(h));
}

torch::Tensor LlamaLayerImpl::forward_cached(const torch::Tensor& x, KvCache& cache, int layer) {
  const torch::Tensor h = x + attn_->forward_cached(input_norm_(x), cache, layer);
  return h + mlp_(post_attention_norm_(h));
}

LlamaImpl::LlamaImpl(const core::LlamaConfig& config, const TpContext& tp, StageRange range)
    : LanguageModel(config.vocab_size, config.num_hidden_layers, tp, range), config_(config) {
  // Hugging Face's initialisation: N(0, 0.02) for the embedding and the head.
  auto vocabulary = [&](const std::string& name) {
    VocabParallelEmbedding v = register_module(name, VocabParallelEmbedding(config.vocab_size, config.hidden_size, tp_));
    torch::NoGradGuard no_grad;
    v->weight.normal_(0.0, 0.02);
    const VocabShard& s = v->shard();
    if (s.rows > s.valid) v->weight.narrow(0, s.valid, s.rows - s.valid).zero_();  // padding rows stay zero
    return v;
  };
  // Tied: the stage with the head holds the embedding too (as GPT-2's), and the trainer
  // sums its gradient over the pipeline (tied_parameters).
  if (has_embedding() || (has_head() && config.tie_word_embeddings)) embed_ = vocabulary("embed_tokens");
  for (int i = range_.first_block; i < range_.end_block; ++i)
    layers_.push_back(register_module("layers" + std::to_string(i), LlamaLayer(config, tp_)));
  if (has_head()) {
    norm_ = register_module("norm", RmsNorm(config.hidden_size, config.rms_norm_eps));
    head_ = config.tie_word_embeddings ? embed_ : vocabulary("lm_head");  // tied: the same module
  }
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& input) {
  torch::Tensor x = input;
  if (has_embedding()) {
    if (x.size(1) > config_.max_position_embeddings)
      throw core::UserError("Llama: a sequence of " + std::to_string(x.size(1)) +
                            " tokens is longer than max_position_embeddings " + std::to_string(config_.max_position_embeddings));
    x = embed_(x);
    if (tp_.sequence_parallel) x = scatter_sequence(x, tp_);  // this rank's part of the tokens
  }
  // Under full recomputation each layer keeps only its input (exec/models/recompute.h).
  for (auto& layer : layers_) x = run_block(*layer, [layer](const torch::Tensor& in) mutable { return layer->forward(in); }, x);
  if (has_head()) {
    // The whole sequence into the final norm, which every tp rank computes alike.
    if (tp_.sequence_parallel) x = gather_sequence(x, tp_, /*replicated_gradients=*/true);
    x = head_->logits(norm_(x));
  }
  return x;
}

std::vector<torch::Tensor> LlamaImpl::tied_parameters() {
  if (!config_.tie_word_embeddings || !embed_) return {};
  return {embed_->weight};
}

std::vector<torch::Tensor> LlamaImpl::partial_gradient_parameters() {
  std::vector<torch::Tensor> out;
  for (auto& layer : layers_) {
    // Under sequence parallelism every replicated parameter of a layer (its norms, and
    // k and v where held whole) sees only this rank's tokens; otherwise k and v only.
    const std::vector<torch::Tensor> mine =
        tp_.sequence_parallel ? replicated_parameters(*layer) : layer->attention()->partial_gradient_parameters();
    out.insert(out.end(), mine.begin(), mine.end());
  }
  return out;
}

void LlamaImpl::use_context_parallel(const CpContext& cp) {
  for (auto& layer : layers_) layer->attention()->use_context_parallel(cp);
}

std::shared_ptr<StageModel> LlamaImpl::make_stage(const TpContext& tp, StageRange range) const {
  return std::make_shared<LlamaImpl>(config_, tp, range);
}

torch::Tensor LlamaImpl::forward_cached(const torch::Tensor& ids, KvCache& cache) {
  TORCH_CHECK(has_embedding() && has_head(), "forward_cached needs the whole model");
  const int64_t t = ids.size(1);
  torch::Tensor x = embed_(ids);
  for (size_t i = 0; i < layers_.size(); ++i) x = layers_[i]->forward_cached(x, cache, static_cast<int>(i));
  cache.advance(t);
  // Only the last token's logits: the next token's distribution.
  return full_logits(head_->logits(norm_(x.narrow(1, t - 1, 1)))).squeeze(1);
}

// How the trainer meets the Llama (exec/models/registry.h).
ModelEntry llama_model_entry() {
  ModelEntry llama;
  llama.kind = core::LlamaConfig::kName;
  llama.make_serial = [](const core::Plan& p) {
    Llama model(p.model.as<core::LlamaConfig>(), TpContext{});
    if (!p.checkpoint_path.empty()) load_hf_llama(model, p.checkpoint_path);  // from released weights
    return model.ptr();
  };
  llama.load_data = [](const core::Plan& p) {
    const core::LlamaConfig& c = p.model.as<core::LlamaConfig>();
    return load_text_data(p, {c.vocab_size, c.max_position_embeddings, "max_position_embeddings"});
  };
  llama.tokens = [](const core::Plan& p) { return static_cast<std::int64_t>(p.max_seq_length); };
  llama.has_dropout = [](const core::ModelConfig&) { return false; };
  llama.language_model = true;
  llama.to_hugging_face = [](const SerialState& serial, const core::ModelConfig& m) {
    return to_hf_llama(serial, m.as<core::LlamaConfig>());
  };
  llama.hugging_face_config = [](const core::ModelConfig& m) { return hf_llama_config_json(m.as<core::LlamaConfig>()); };
  return llama;
}

}  // namespace quintnet::exec
