// GPT-2 as core knows it: the original's `model_config` block, text from the executor's
// data/ folder.  Its sizes and layer shapes for the cost model, its shape rules and its
// plan keys.  The executor's side is exec/models/gpt2.cpp.
#include "core/model_kind.h"
#include "core/plan_key_builders.h"

#include <sstream>

namespace quintnet::core {
namespace {

using namespace key_builders;
const std::string kSection = "Model: GPT-2 (the `model_config` block)";

void add_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };
  add(integer("model_config.vocab_size", kSection, Gpt2Config::kName, 1, 1 << 24, QN_MODEL_FIELD(Gpt2Config, vocab_size), "vocabulary size"));
  add(integer("model_config.n_positions", kSection, Gpt2Config::kName, 1, 1 << 20, QN_MODEL_FIELD(Gpt2Config, n_positions),
              "positions the model embeds (longest sequence)"));
  add(integer("model_config.n_embd", kSection, Gpt2Config::kName, 1, 1 << 20, QN_MODEL_FIELD(Gpt2Config, n_embd), "hidden size"));
  add(integer("model_config.n_layer", kSection, Gpt2Config::kName, 1, 1 << 16, QN_MODEL_FIELD(Gpt2Config, n_layer), "transformer blocks"));
  add(integer("model_config.n_head", kSection, Gpt2Config::kName, 1, 1 << 16, QN_MODEL_FIELD(Gpt2Config, n_head), "attention heads"));
  PlanKey inner = integer("model_config.n_inner", kSection, Gpt2Config::kName, 1, 1 << 22, QN_MODEL_FIELD(Gpt2Config, n_inner), "MLP width");
  inner.read = [](ConfigReader& r, Plan& p) {  // defaults to 4 x n_embd, read above it
    Gpt2Config& c = p.model.as<Gpt2Config>();
    c.n_inner = static_cast<int>(r.get_int("n_inner", 4 * c.n_embd, 1, 1 << 22));
  };
  add(with_default(inner, "4 × n_embd"));
  add(number("model_config.attn_pdrop", kSection, Gpt2Config::kName, 0.0, 0.99, QN_MODEL_FIELD(Gpt2Config, attn_pdrop),
             "dropout on the attention weights"));
  add(number("model_config.embd_pdrop", kSection, Gpt2Config::kName, 0.0, 0.99, QN_MODEL_FIELD(Gpt2Config, embd_pdrop),
             "dropout on the embeddings"));
  add(number("model_config.resid_pdrop", kSection, Gpt2Config::kName, 0.0, 0.99, QN_MODEL_FIELD(Gpt2Config, resid_pdrop),
             "dropout on each residual branch"));
  add(number("model_config.layer_norm_epsilon", kSection, Gpt2Config::kName, 1e-12, 1.0, QN_MODEL_FIELD(Gpt2Config, layer_norm_epsilon),
             "LayerNorm's epsilon"));
}

}  // namespace

ModelKind gpt2_model_kind() {
  ModelKind k;
  k.name = Gpt2Config::kName;
  k.title = "GPT-2";
  k.key_block = "model_config";
  k.layers_key = "model_config.n_layer", k.heads_key = "model_config.n_head", k.hidden_key = "model_config.n_embd";
  k.key_section = kSection;
  k.add_keys = add_keys;
  k.defaults = Gpt2Config{};
  k.dims = [](const ModelConfig& m, int seq_len) {
    const Gpt2Config& c = m.as<Gpt2Config>();
    ModelDims d;  // token inputs, a tied head, causal attention: ModelDims' defaults
    d.name = "gpt2 (plan)";
    d.layers = c.n_layer, d.hidden = c.n_embd, d.heads = c.n_head, d.ffn = c.n_inner, d.vocab = c.vocab_size;
    d.seq = seq_len;
    d.dropout = c.attn_pdrop + c.resid_pdrop + c.embd_pdrop > 0;
    return d;
  };
  // Context parallelism: learned positions are looked up per chunk; the ring attention
  // draws no dropout on the attention weights.
  k.context_parallel = true;
  k.context_parallel_requirements = [](const ModelConfig& m) {
    const double p = m.as<Gpt2Config>().attn_pdrop;
    std::ostringstream value;
    value << p;
    return std::vector<Requirement>{{"model_config.attn_pdrop", p == 0,
                                     value.str() + " with cp > 1: ring attention draws no dropout on the "
                                     "attention weights; set attn_pdrop: 0.0 (embd_pdrop and resid_pdrop may stay)"}};
  };
  k.rules = [](const ModelConfig& m, int tp) {
    const Gpt2Config& c = m.as<Gpt2Config>();
    return std::vector<Divisibility>{
        {"model_config.n_inner", c.n_inner, "tp", tp, "pick tp dividing " + std::to_string(c.n_inner)}};
  };
  return k;
}

}  // namespace quintnet::core

#undef QN_KEY_FIELD
#undef QN_MODEL_FIELD
