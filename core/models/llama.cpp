// A Llama-3-style decoder as core knows it: its `llama_config` block (the names of
// Hugging Face's LlamaConfig), text from the executor's data/ folder (as GPT-2's).  Its
// sizes and layer parts for the cost model — grouped-query attention, SwiGLU, RMSNorm,
// no biases, rotary positions, an untied head — its shape rules and its plan keys.  The
// executor's side is exec/models/llama.cpp.
#include "core/model_kind.h"
#include "core/plan_key_builders.h"

namespace quintnet::core {
namespace {

using namespace key_builders;
const std::string kSection = "Model: Llama (the `llama_config` block, Hugging Face's LlamaConfig names)";

// Llama's MLP width when none is given: 8h/3 rounded up to a multiple of 256 (11,008 for
// hidden 4,096, as in Llama 2 7B and LlamaConfig's defaults).
int default_intermediate(int hidden) { return (8 * hidden / 3 + 255) / 256 * 256; }

// `rope_scaling`, as Hugging Face's config.json writes it: {rope_type: llama3, factor,
// low_freq_factor, high_freq_factor, original_max_position_embeddings}; rope_type
// default (or no block) is none.  Other scalings (linear, dynamic, yarn) are refused.
PlanKey rope_scaling_key() {
  PlanKey k = declare("llama_config.rope_scaling", kSection, "object",
                      "rope_type llama3: factor, low_freq_factor, high_freq_factor, original_max_position_embeddings",
                      "Llama 3.1's rotary scaling for long contexts (Hugging Face's rope_scaling)");
  k.model = LlamaConfig::kName;
  k.original = false;
  k.read = [](ConfigReader& r, Plan& p) {
    if (!r.has("rope_scaling")) return;
    ConfigReader block = r.child("rope_scaling");
    const std::string type = block.get_string("rope_type", block.get_string("type", "default"));
    RopeScaling& s = p.model.as<LlamaConfig>().rope_scaling;
    if (type == "default") {
      s = RopeScaling();
      return;
    }
    if (type != "llama3") r.fail("rope_scaling", "rope_type '" + type + "' is not implemented; choose llama3 or default");
    s.factor = block.get_double("factor", s.factor, 1.0, 1e6);
    s.low_freq_factor = block.get_double("low_freq_factor", s.low_freq_factor, 1e-6, 1e6);
    s.high_freq_factor = block.get_double("high_freq_factor", s.high_freq_factor, 1e-6, 1e6);
    s.original_max_position_embeddings = static_cast<int>(
        block.get_int("original_max_position_embeddings", s.original_max_position_embeddings, 1, 1 << 24));
    if (s.high_freq_factor <= s.low_freq_factor)
      r.fail("rope_scaling", "high_freq_factor must exceed low_freq_factor (Llama 3.1: 4 and 1)");
  };
  k.value = [](const Plan& p) {
    if (!p.model.is<LlamaConfig>() || !p.model.as<LlamaConfig>().rope_scaling.scales()) return nlohmann::json();
    const RopeScaling& s = p.model.as<LlamaConfig>().rope_scaling;
    return nlohmann::json{{"rope_type", "llama3"}, {"factor", s.factor}, {"low_freq_factor", s.low_freq_factor},
                          {"high_freq_factor", s.high_freq_factor},
                          {"original_max_position_embeddings", s.original_max_position_embeddings}};
  };
  return k;
}

void add_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) {
    k.original = false;  // QuintNet's own: the original configs knew ViT and GPT-2
    keys.push_back(std::move(k));
  };
  const std::string who = LlamaConfig::kName;
  add(integer("llama_config.vocab_size", kSection, who, 1, 1 << 24, QN_MODEL_FIELD(LlamaConfig, vocab_size), "vocabulary size"));
  add(integer("llama_config.max_position_embeddings", kSection, who, 1, 1 << 24, QN_MODEL_FIELD(LlamaConfig, max_position_embeddings),
              "longest sequence (rotary positions have no table; sequences beyond it are refused)"));
  add(integer("llama_config.hidden_size", kSection, who, 1, 1 << 20, QN_MODEL_FIELD(LlamaConfig, hidden_size), "hidden size"));
  add(integer("llama_config.num_hidden_layers", kSection, who, 1, 1 << 16, QN_MODEL_FIELD(LlamaConfig, num_hidden_layers),
              "decoder layers"));
  add(integer("llama_config.num_attention_heads", kSection, who, 1, 1 << 16, QN_MODEL_FIELD(LlamaConfig, num_attention_heads),
              "query heads"));
  PlanKey kv = integer("llama_config.num_key_value_heads", kSection, who, 1, 1 << 16, QN_MODEL_FIELD(LlamaConfig, num_key_value_heads),
                       "key/value heads (grouped-query attention: each serves num_attention_heads / this many)");
  kv.read = [](ConfigReader& r, Plan& p) {  // defaults to one per query head, read after them
    LlamaConfig& c = p.model.as<LlamaConfig>();
    c.num_key_value_heads = static_cast<int>(r.get_int("num_key_value_heads", c.num_attention_heads, 1, 1 << 16));
  };
  add(with_default(kv, "num_attention_heads"));
  PlanKey inner = integer("llama_config.intermediate_size", kSection, who, 1, 1 << 22, QN_MODEL_FIELD(LlamaConfig, intermediate_size),
                          "SwiGLU width (gate and up projections)");
  inner.read = [](ConfigReader& r, Plan& p) {
    LlamaConfig& c = p.model.as<LlamaConfig>();
    c.intermediate_size = static_cast<int>(r.get_int("intermediate_size", default_intermediate(c.hidden_size), 1, 1 << 22));
  };
  add(with_default(inner, "8/3 × hidden_size, rounded up to a multiple of 256"));
  add(number("llama_config.rms_norm_eps", kSection, who, 1e-12, 1.0, QN_MODEL_FIELD(LlamaConfig, rms_norm_eps),
             "RMSNorm's epsilon"));
  add(number("llama_config.rope_theta", kSection, who, 1.0, 1e12, QN_MODEL_FIELD(LlamaConfig, rope_theta),
             "base of the rotary embedding's frequencies (500,000 in Llama 3)"));
  add(rope_scaling_key());
  add(boolean("llama_config.tie_word_embeddings", kSection, QN_MODEL_FIELD(LlamaConfig, tie_word_embeddings),
              "the head's logits use the embedding's weights (Llama 3.2 1B/3B); false: lm_head of its own", who));
}

std::vector<Divisibility> rules(const ModelConfig& m, int tp) {
  const LlamaConfig& c = m.as<LlamaConfig>();
  std::vector<Divisibility> out = {
      {"llama_config.intermediate_size", c.intermediate_size, "tp", tp, "pick tp dividing " + std::to_string(c.intermediate_size)},
      {"llama_config.num_attention_heads", c.num_attention_heads, "llama_config.num_key_value_heads", c.num_key_value_heads,
       "pick key/value heads dividing the query heads"},
  };
  // Rotary positions rotate pairs of a head's features.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0)
    out.push_back({"llama_config.hidden_size / num_attention_heads", c.hidden_size / c.num_attention_heads, "2", 2,
                   "pick an even head width"});
  // tp splits the key/value heads, or where it exceeds them gives each rank one of them
  // (held by tp / num_key_value_heads ranks).
  if (c.num_key_value_heads >= tp)
    out.push_back({"llama_config.num_key_value_heads", c.num_key_value_heads, "tp", tp, "pick tp dividing the key/value heads"});
  else
    out.push_back({"tp", tp, "llama_config.num_key_value_heads", c.num_key_value_heads,
                   "pick tp a multiple of the key/value heads"});
  return out;
}

}  // namespace

ModelKind llama_model_kind() {
  ModelKind k;
  k.name = LlamaConfig::kName;
  k.title = "a Llama";
  k.key_block = "llama_config";
  k.layers_key = "llama_config.num_hidden_layers", k.heads_key = "llama_config.num_attention_heads";
  k.hidden_key = "llama_config.hidden_size";
  k.key_section = kSection;
  k.add_keys = add_keys;
  k.defaults = LlamaConfig{};
  k.dims = [](const ModelConfig& m, int seq_len) {
    const LlamaConfig& c = m.as<LlamaConfig>();
    ModelDims d;
    d.name = "llama (plan)";
    d.inputs = Inputs::TokensRotaryPositions;
    d.head = c.tie_word_embeddings ? Head::TiedVocabulary : Head::UntiedVocabulary;
    d.layers = c.num_hidden_layers, d.hidden = c.hidden_size, d.heads = c.num_attention_heads;
    d.kv_heads = c.num_key_value_heads, d.ffn = c.intermediate_size;
    d.vocab = c.vocab_size, d.seq = seq_len;
    d.gated_mlp = true, d.biases = false, d.dropout = false;  // the executor's Llama draws no dropout
    return d;
  };
  k.rules = rules;
  k.context_parallel = true;
  return k;
}

}  // namespace quintnet::core

#undef QN_KEY_FIELD
#undef QN_MODEL_FIELD
