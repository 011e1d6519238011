// Hugging Face's LlamaForCausalLM ↔ QuintNet's Llama: the same tensors in the same
// layout ([out, in] linears, q/k in the rotate_half feature order), only the names
// differ — "model.layers.3.self_attn.q_proj.weight" is our "layers3.self_attn.q_proj.weight".
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hugging_face_config.h"
#include "exec/models/llama.h"
#include "exec/models/safetensors.h"

namespace quintnet::exec {
namespace {

std::string hf_name(const std::string& ours) {
  if (ours == "lm_head.weight") return ours;
  if (ours.rfind("layers", 0) == 0) {  // "layers3.rest" -> "model.layers.3.rest"
    const size_t dot = ours.find('.');
    return "model.layers." + ours.substr(6, dot - 6) + ours.substr(dot);
  }
  return "model." + ours;  // embed_tokens, norm
}

// A config.json beside the weights must describe the plan's model: the shapes alone
// would not catch, say, another rope_theta or norm epsilon.
void check_hf_config(const std::string& safetensors_path, const core::ModelConfig& plan) {
  const auto path = std::filesystem::path(safetensors_path).parent_path() / "config.json";
  if (!std::filesystem::exists(path)) return;
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::string differ;  // a ConfigError (not JSON, values out of range) is a UserError already
  for (const std::string& d : core::model_differences(core::model_config_from_hugging_face(text, "llama", path.string()), plan))
    differ += (differ.empty() ? "" : ", ") + d;
  if (!differ.empty())
    throw core::UserError(path.string() + " describes another model than the plan's llama_config: " + differ);
}

}  // namespace

void load_hf_llama(Llama& model, const std::string& path) {
  check_hf_config(path, model->config());
  const SafetensorsFile file(path);
  const TpContext& tp = model->tp();
  const auto dims = tp_shard_dims(*model);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor param = item.value();
    std::string theirs = hf_name(name);
    if (name == "lm_head.weight" && !file.contains(theirs)) theirs = "model.embed_tokens.weight";  // tied in the file
    auto* vocab = dynamic_cast<VocabParallelEmbeddingImpl*>(
        model->named_modules()[name.substr(0, name.rfind('.'))].get());
    if (vocab) {  // this rank's rows of the vocabulary, padding rows zero
      const VocabShard& s = vocab->shard();
      param.zero_();
      if (s.valid > 0)
        param.narrow(0, 0, s.valid).copy_(file.read_slice(theirs, {vocab->vocab(), param.size(1)}, 0, s.first, s.valid));
      continue;
    }
    auto d = dims.find(name);
    if (d == dims.end()) {
      param.copy_(file.read(theirs, param.sizes().vec()));
      continue;
    }
    std::vector<int64_t> serial = param.sizes().vec();
    serial[d->second] *= tp.size();
    const int64_t rows = param.size(d->second);
    param.copy_(file.read_slice(theirs, serial, d->second, tp.rank() * rows, rows));
  }
}

SerialState to_hf_llama(const SerialState& serial, const core::LlamaConfig& c) {
  SerialState out;
  for (const auto& [name, t] : serial) {
    torch::Tensor value = t.detach().to(torch::kFloat32).contiguous();
    // Merged vocabulary shards may carry tp padding rows: keep the real vocabulary.
    if (name == "embed_tokens.weight" || name == "lm_head.weight") value = value.narrow(0, 0, c.vocab_size).contiguous();
    out[hf_name(name)] = value;
  }
  return out;
}

std::string hf_llama_config_json(const core::LlamaConfig& c) {
  const nlohmann::json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", c.rope_scaling.scales() ? nlohmann::json{{"rope_type", "llama3"},
                                                                 {"factor", c.rope_scaling.factor},
                                                                 {"low_freq_factor", c.rope_scaling.low_freq_factor},
                                                                 {"high_freq_factor", c.rope_scaling.high_freq_factor},
                                                                 {"original_max_position_embeddings",
                                                                  c.rope_scaling.original_max_position_embeddings}}
                                               : nlohmann::json()},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", "float32"},
  };
  return j.dump(2) + "\n";
}

}  // namespace quintnet::exec
