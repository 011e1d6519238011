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

void add_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) {
    k.original = false;  // QuintNet's own: the original configs knew ViT and GPT-2
    keys.push_back(std::move(k));
  };
  const std::string who = "llama";
  add(integer("llama_config.vocab_size", kSection, who, 1, 1 << 24, QN_KEY_FIELD(model.vocab_size), "vocabulary size"));
  add(integer("llama_config.max_position_embeddings", kSection, who, 1, 1 << 24, QN_KEY_FIELD(model.n_positions),
              "longest sequence (rotary positions have no table; sequences beyond it are refused)"));
  add(integer("llama_config.hidden_size", kSection, who, 1, 1 << 20, QN_KEY_FIELD(model.n_embd), "hidden size"));
  add(integer("llama_config.num_hidden_layers", kSection, who, 1, 1 << 16, QN_KEY_FIELD(model.n_layer),
              "decoder layers"));
  add(integer("llama_config.num_attention_heads", kSection, who, 1, 1 << 16, QN_KEY_FIELD(model.n_head),
              "query heads"));
  PlanKey kv = integer("llama_config.num_key_value_heads", kSection, who, 1, 1 << 16, QN_KEY_FIELD(model.n_kv_head),
                       "key/value heads (grouped-query attention: each serves num_attention_heads / this many)");
  kv.read = [](ConfigReader& r, Plan& p) {  // defaults to one per query head, read after them
    p.model.n_kv_head = static_cast<int>(r.get_int("num_key_value_heads", p.model.n_head, 1, 1 << 16));
  };
  add(with_default(kv, "num_attention_heads"));
  PlanKey inner = integer("llama_config.intermediate_size", kSection, who, 1, 1 << 22, QN_KEY_FIELD(model.n_inner),
                          "SwiGLU width (gate and up projections)");
  inner.read = [](ConfigReader& r, Plan& p) {
    p.model.n_inner = static_cast<int>(r.get_int("intermediate_size", default_intermediate(p.model.n_embd), 1, 1 << 22));
  };
  add(with_default(inner, "8/3 × hidden_size, rounded up to a multiple of 256"));
  add(number("llama_config.rms_norm_eps", kSection, who, 1e-12, 1.0, QN_KEY_FIELD(model.layer_norm_epsilon),
             "RMSNorm's epsilon"));
  add(number("llama_config.rope_theta", kSection, who, 1.0, 1e12, QN_KEY_FIELD(model.rope_theta),
             "base of the rotary embedding's frequencies (500,000 in Llama 3)"));
}

std::vector<Divisibility> rules(const ModelConfig& c, int tp) {
  std::vector<Divisibility> out = {
      {"llama_config.intermediate_size", c.n_inner, "tp", tp, "pick tp dividing " + std::to_string(c.n_inner)},
      {"llama_config.num_attention_heads", c.n_head, "llama_config.num_key_value_heads", c.n_kv_head,
       "pick key/value heads dividing the query heads"},
  };
  // Rotary positions rotate pairs of a head's features.
  if (c.n_head > 0 && c.n_embd % c.n_head == 0)
    out.push_back({"llama_config.hidden_size / num_attention_heads", c.n_embd / c.n_head, "2", 2,
                   "pick an even head width"});
  // tp splits the key/value heads, or where it exceeds them gives each rank one of them
  // (held by tp / num_key_value_heads ranks).
  if (c.n_kv_head >= tp)
    out.push_back({"llama_config.num_key_value_heads", c.n_kv_head, "tp", tp, "pick tp dividing the key/value heads"});
  else
    out.push_back({"tp", tp, "llama_config.num_key_value_heads", c.n_kv_head,
                   "pick tp a multiple of the key/value heads"});
  return out;
}

}  // namespace

ModelKind llama_model_kind() {
  ModelKind k;
  k.name = "llama";
  k.title = "a Llama";
  k.key_block = "llama_config";
  k.layers_key = "llama_config.num_hidden_layers", k.heads_key = "llama_config.num_attention_heads";
  k.hidden_key = "llama_config.hidden_size";
  k.key_section = kSection;
  k.add_keys = add_keys;
  k.dims = [](const ModelConfig& c, int seq_len) {
    ModelDims d;
    d.name = "llama (plan)";
    d.inputs = Inputs::TokensRotaryPositions, d.head = Head::UntiedVocabulary;
    d.layers = c.n_layer, d.hidden = c.n_embd, d.heads = c.n_head, d.kv_heads = c.n_kv_head, d.ffn = c.n_inner;
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
