#include "exec/models/gpt2.h"

#include "core/error.h"
#include "exec/cp/ring_attention.h"
#include "exec/models/attention.h"
#include "exec/models/recompute.h"
#include "exec/models/registry.h"
#include "exec/models/serial_state.h"
#include "exec/models/safetensors.h"

namespace quintnet::exec {

Gpt2AttentionImpl::Gpt2AttentionImpl(int64_t dim, int64_t heads, double attn_pdrop, const TpContext& tp)
    : local_heads_(heads / tp.size()), head_dim_(dim / heads), attn_pdrop_(attn_pdrop) {
  if (heads % tp.size() != 0)
    throw core::UserError("GPT-2: n_head " + std::to_string(heads) + " is not divisible by tp " +
                          std::to_string(tp.size()));
  qkv_ = register_module("qkv", QkvParallelLinear(dim, dim, tp));
  proj_ = register_module("proj", RowParallelLinear(dim, dim, tp, /*input_is_parallel=*/true));
}

torch::Tensor Gpt2AttentionImpl::forward(const torch::Tensor& x) {
  const auto qkv = qkv_(x);
  // The whole sequence's tokens (x holds this rank's part of them under sequence parallelism).
  const int64_t b = qkv[0].size(0), t = qkv[0].size(1);
  auto heads = [&](const torch::Tensor& y) { return y.view({b, t, local_heads_, head_dim_}); };
  // Under context parallelism the keys beyond this rank's chunks come round the ring (the
  // plan's validation keeps attn_pdrop 0 there: the ring draws no dropout).
  const torch::Tensor ctx =
      cp_.size() > 1 ? ring_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), cp_)
                     : attention_core(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), /*causal=*/true, attn_pdrop_,
                                      is_training());
  return proj_(ctx.view({b, t, local_heads_ * head_dim_}));
}

torch::Tensor Gpt2AttentionImpl::forward_cached(const torch::Tensor& x, KvCache& cache, int layer) {
  const auto qkv = qkv_(x);
  const int64_t b = x.size(0), t = x.size(1);
  auto heads = [&](const torch::Tensor& y) { return y.view({b, t, local_heads_, head_dim_}); };
  const auto [k, v] = cache.append(layer, heads(qkv[1]), heads(qkv[2]));
  return proj_(cached_attention(heads(qkv[0]), k, v, cache.length()).view({b, t, local_heads_ * head_dim_}));
}

Gpt2BlockImpl::Gpt2BlockImpl(const core::Gpt2Config& c, const TpContext& tp) : resid_pdrop_(c.resid_pdrop) {
  auto ln = [&] { return LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_epsilon)); };
  ln1_ = register_module("ln_1", ln());
  attn_ = register_module("attn", Gpt2Attention(c.n_embd, c.n_head, c.attn_pdrop, tp));
  ln2_ = register_module("ln_2", ln());
  fc_ = register_module("fc", ColumnParallelLinear(c.n_embd, c.n_inner, tp));
  proj_ = register_module("proj", RowParallelLinear(c.n_inner, c.n_embd, tp, /*input_is_parallel=*/true));
}

torch::Tensor Gpt2BlockImpl::mlp(const torch::Tensor& h) { return proj_(torch::gelu(fc_(ln2_(h)), "tanh")); }

torch::Tensor Gpt2BlockImpl::forward(const torch::Tensor& x) {
  auto drop = [&](const torch::Tensor& y) { return torch::dropout(y, resid_pdrop_, is_training()); };
  torch::Tensor h = x + drop(attn_(ln1_(x)));
  return h + drop(mlp(h));
}

torch::Tensor Gpt2BlockImpl::forward_cached(const torch::Tensor& x, KvCache& cache, int layer) {
  const torch::Tensor h = x + attn_->forward_cached(ln1_(x), cache, layer);
  return h + mlp(h);
}

Gpt2Impl::Gpt2Impl(const core::Gpt2Config& config, const TpContext& tp, StageRange range)
    : LanguageModel(config.vocab_size, config.n_layer, tp, range), config_(config) {
  if (has_embedding() || has_head()) wte_ = register_module("wte", VocabParallelEmbedding(config.vocab_size, config.n_embd, tp_));
  if (has_embedding()) {
    wpe_ = register_module("wpe", torch::nn::Embedding(config.n_positions, config.n_embd));
    torch::NoGradGuard no_grad;
    wpe_->weight.normal_(0.0, 0.01);
  }
  for (int i = range_.first_block; i < range_.end_block; ++i)
    blocks_.push_back(register_module("h" + std::to_string(i), Gpt2Block(config, tp_)));
  if (has_head())
    ln_f_ = register_module("ln_f", LayerNorm(torch::nn::LayerNormOptions({config.n_embd})
                                                             .eps(config.layer_norm_epsilon)));
}

torch::Tensor Gpt2Impl::forward(const torch::Tensor& input) {
  torch::Tensor x = input;
  if (has_embedding()) {
    const int64_t t = x.size(1);
    if (t > config_.n_positions)
      throw core::UserError("GPT-2: a sequence of " + std::to_string(t) + " tokens is longer than n_positions " +
                            std::to_string(config_.n_positions));
    // Learned positions: under context parallelism, the rows of this rank's two chunks.
    x = wte_(x) + wpe_(local_positions(t, cp_, x.device()).to(torch::kLong));
    x = torch::dropout(x, config_.embd_pdrop, is_training());
    if (tp_.sequence_parallel) x = scatter_sequence(x, tp_);  // this rank's part of the tokens
  }
  // Under full recomputation each block keeps only its input (exec/models/recompute.h).
  for (auto& block : blocks_) x = run_block(*block, [block](const torch::Tensor& in) mutable { return block->forward(in); }, x);
  if (has_head()) {
    // The whole sequence into the final LayerNorm, which every tp rank computes alike.
    if (tp_.sequence_parallel) x = gather_sequence(x, tp_, /*replicated_gradients=*/true);
    x = wte_->logits(ln_f_(x));
  }
  return x;
}

std::vector<torch::Tensor> Gpt2Impl::partial_gradient_parameters() {
  std::vector<torch::Tensor> out;
  if (!tp_.sequence_parallel) return out;  // else every tp rank computes them on the whole sequence
  for (auto& block : blocks_)
    for (const torch::Tensor& p : replicated_parameters(*block)) out.push_back(p);
  return out;
}

std::shared_ptr<StageModel> Gpt2Impl::make_stage(const TpContext& tp, StageRange range) const {
  return std::make_shared<Gpt2Impl>(config_, tp, range);
}

void Gpt2Impl::use_context_parallel(const CpContext& cp) {
  cp_ = cp;
  for (auto& block : blocks_) block->attention()->use_context_parallel(cp);
}

std::vector<torch::Tensor> Gpt2Impl::tied_parameters() {
  if (!wte_) return {};
  return {wte_->weight};
}

torch::Tensor Gpt2Impl::forward_cached(const torch::Tensor& ids, KvCache& cache) {
  TORCH_CHECK(has_embedding() && has_head(), "forward_cached needs the whole model");
  const int64_t start = cache.length(), t = ids.size(1);
  const auto positions = torch::arange(start, start + t, torch::TensorOptions().dtype(torch::kLong).device(ids.device()));
  torch::Tensor x = wte_(ids) + wpe_(positions);
  for (size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->forward_cached(x, cache, static_cast<int>(i));
  cache.advance(t);
  // Only the last token's logits: the next token's distribution.
  return full_logits(wte_->logits(ln_f_(x.narrow(1, t - 1, 1)))).squeeze(1);
}

namespace {

std::string hf_prefix(const SafetensorsFile& f) {
  if (f.contains("wte.weight")) return "";
  if (f.contains("transformer.wte.weight")) return "transformer.";
  throw core::UserError(f.path() + ": no tensor 'wte.weight' (nor 'transformer.wte.weight'): not a GPT-2 checkpoint");
}

}  // namespace

void load_hf_gpt2(Gpt2& model, const std::string& path) {
  const SafetensorsFile file(path);
  const std::string pre = hf_prefix(file);
  const core::Gpt2Config& c = model->config();
  const TpContext& tp = model->tp();
  const int64_t d = c.n_embd, inner = c.n_inner, local_d = d / tp.size(), local_inner = inner / tp.size();
  const int64_t r = tp.rank();
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor param = item.value();
    auto whole = [&](const std::string& hf, std::vector<int64_t> shape) { param.copy_(file.read(pre + hf, shape)); };
    if (name == "wte.weight") {
      const VocabShard& s = model->wte()->shard();
      param.zero_();
      if (s.valid > 0)
        param.narrow(0, 0, s.valid).copy_(file.read_slice(pre + "wte.weight", {c.vocab_size, d}, 0, s.first, s.valid));
      continue;
    }
    if (name == "wpe.weight") { whole("wpe.weight", {c.n_positions, d}); continue; }
    if (name.rfind("ln_f.", 0) == 0) { whole(name, {d}); continue; }
    // Block parameters: "h3.<ours>" -> "h.3.<theirs>".
    const size_t dot = name.find('.');
    const std::string block = "h." + name.substr(1, dot - 1) + ".", rest = name.substr(dot + 1);
    if (rest.rfind("ln_", 0) == 0) { whole(block + rest, {d}); continue; }
    if (rest == "attn.qkv.weight") {  // Conv1D [d, 3d]: q | k | v columns; ours [3, d/tp, d]
      for (int64_t j = 0; j < 3; ++j)
        param[j].copy_(file.read_slice(pre + block + "attn.c_attn.weight", {d, 3 * d}, 1, j * d + r * local_d, local_d).t());
    } else if (rest == "attn.qkv.bias") {
      for (int64_t j = 0; j < 3; ++j)
        param[j].copy_(file.read_slice(pre + block + "attn.c_attn.bias", {3 * d}, 0, j * d + r * local_d, local_d));
    } else if (rest == "attn.proj.weight") {  // row-parallel: Conv1D rows = our input columns
      param.copy_(file.read_slice(pre + block + "attn.c_proj.weight", {d, d}, 0, r * local_d, local_d).t());
    } else if (rest == "attn.proj.bias") {
      whole(block + "attn.c_proj.bias", {d});
    } else if (rest == "fc.weight") {
      param.copy_(file.read_slice(pre + block + "mlp.c_fc.weight", {d, inner}, 1, r * local_inner, local_inner).t());
    } else if (rest == "fc.bias") {
      param.copy_(file.read_slice(pre + block + "mlp.c_fc.bias", {inner}, 0, r * local_inner, local_inner));
    } else if (rest == "proj.weight") {
      param.copy_(file.read_slice(pre + block + "mlp.c_proj.weight", {inner, d}, 0, r * local_inner, local_inner).t());
    } else if (rest == "proj.bias") {
      whole(block + "mlp.c_proj.bias", {d});
    } else {
      throw core::UserError("GPT-2: parameter '" + name + "' has no Hugging Face counterpart");
    }
  }
}

SerialState to_hf_gpt2(const SerialState& serial, const core::Gpt2Config& c) {
  SerialState out;
  auto get = [&](const std::string& name) {
    auto it = serial.find(name);
    if (it == serial.end()) throw core::UserError("GPT-2 export: tensor '" + name + "' is missing");
    return it->second.detach().to(torch::kFloat32).contiguous();
  };
  out["wte.weight"] = get("wte.weight");
  out["wpe.weight"] = get("wpe.weight");
  out["ln_f.weight"] = get("ln_f.weight");
  out["ln_f.bias"] = get("ln_f.bias");
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string ours = "h" + std::to_string(i) + ".", theirs = "h." + std::to_string(i) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      out[theirs + ln + ".weight"] = get(ours + ln + ".weight");
      out[theirs + ln + ".bias"] = get(ours + ln + ".bias");
    }
    // [3, d, d] (q/k/v, out, in) -> Conv1D [d, 3d]
    out[theirs + "attn.c_attn.weight"] = get(ours + "attn.qkv.weight").reshape({3 * c.n_embd, c.n_embd}).t().contiguous();
    out[theirs + "attn.c_attn.bias"] = get(ours + "attn.qkv.bias").reshape({3 * c.n_embd});
    out[theirs + "attn.c_proj.weight"] = get(ours + "attn.proj.weight").t().contiguous();
    out[theirs + "attn.c_proj.bias"] = get(ours + "attn.proj.bias");
    out[theirs + "mlp.c_fc.weight"] = get(ours + "fc.weight").t().contiguous();
    out[theirs + "mlp.c_fc.bias"] = get(ours + "fc.bias");
    out[theirs + "mlp.c_proj.weight"] = get(ours + "proj.weight").t().contiguous();
    out[theirs + "mlp.c_proj.bias"] = get(ours + "proj.bias");
  }
  return out;
}

// How the trainer meets GPT-2 (exec/models/registry.h).
ModelEntry gpt2_model_entry() {
  ModelEntry gpt2;
  gpt2.kind = core::Gpt2Config::kName;
  gpt2.make_serial = [](const core::Plan& p) {
    Gpt2 gpt(p.model.as<core::Gpt2Config>(), TpContext{});
    if (!p.checkpoint_path.empty()) load_hf_gpt2(gpt, p.checkpoint_path);  // fine-tuning from released weights
    return gpt.ptr();
  };
  gpt2.load_data = [](const core::Plan& p) {
    const core::Gpt2Config& c = p.model.as<core::Gpt2Config>();
    return load_text_data(p, {c.vocab_size, c.n_positions, "n_positions"});
  };
  gpt2.tokens = [](const core::Plan& p) { return static_cast<std::int64_t>(p.max_seq_length); };
  gpt2.has_dropout = [](const core::ModelConfig& m) {
    const core::Gpt2Config& c = m.as<core::Gpt2Config>();
    return c.attn_pdrop + c.embd_pdrop + c.resid_pdrop > 0;
  };
  gpt2.language_model = true;
  gpt2.to_hugging_face = [](const SerialState& serial, const core::ModelConfig& m) {
    const core::Gpt2Config& c = m.as<core::Gpt2Config>();
    SerialState state = serial;
    // Merged vocabulary shards carry the tp padding rows: keep the real vocabulary.
    state["wte.weight"] = state.at("wte.weight").narrow(0, 0, c.vocab_size);
    return to_hf_gpt2(state, c);
  };
  return gpt2;
}

}  // namespace quintnet::exec
