#include "core/cost_model.h"

#include "core/error.h"
#include "core/model_kind.h"

namespace quintnet::core {
namespace {

ModelDims gpt(const std::string& name, int layers, int hidden, int heads, int seq) {
  ModelDims d;
  d.name = name;
  d.layers = layers, d.hidden = hidden, d.heads = heads, d.ffn = 4 * hidden, d.vocab = 50257, d.seq = seq;
  return d;
}

// The Llama 3 herd (Llama Team, "The Llama 3 Herd of Models", 2024, Table 3, and the
// models' config.json): grouped-query attention with 8 key/value heads, SwiGLU, RMSNorm,
// no biases, rotary positions, an untied head over a 128,256-token vocabulary; 8,192
// tokens of context in pre-training.  Llama 3.2's 1B and 3B (their config.json) tie the
// head to the embedding.
ModelDims llama3(const std::string& name, int layers, int hidden, int heads, int ffn, bool tied = false) {
  ModelDims d;
  d.name = name;
  d.inputs = Inputs::TokensRotaryPositions, d.head = tied ? Head::TiedVocabulary : Head::UntiedVocabulary;
  d.layers = layers, d.hidden = hidden, d.heads = heads, d.ffn = ffn, d.kv_heads = 8, d.vocab = 128256, d.seq = 8192;
  d.gated_mlp = true, d.biases = false, d.dropout = false;
  return d;
}

const std::vector<ModelDims>& presets() {
  static const std::vector<ModelDims> p = {
      gpt("gpt2-124m", 12, 768, 12, 1024),    gpt("gpt2-355m", 24, 1024, 16, 1024),
      gpt("gpt2-774m", 36, 1280, 20, 1024),   gpt("gpt2-1.5b", 48, 1600, 25, 1024),
      gpt("gpt3-1.3b", 24, 2048, 16, 2048),   gpt("gpt3-6.7b", 32, 4096, 32, 2048),
      gpt("gpt3-13b", 40, 5120, 40, 2048),    gpt("gpt3-175b", 96, 12288, 96, 2048),
      llama3("llama3-8b", 32, 4096, 32, 14336), llama3("llama3-70b", 80, 8192, 64, 28672),
      llama3("llama3-405b", 126, 16384, 128, 53248),
      llama3("llama3.2-1b", 16, 2048, 32, 8192, /*tied=*/true), llama3("llama3.2-3b", 28, 3072, 24, 8192, /*tied=*/true),
  };
  return p;
}

double embedding_parameters(const ModelDims& m) {
  switch (m.inputs) {
    case Inputs::ImagePatches: return static_cast<double>(m.patch_inputs) * m.hidden + (m.seq + 1.0) * m.hidden;
    case Inputs::Tokens: return (static_cast<double>(m.vocab) + m.seq) * m.hidden;
    case Inputs::TokensRotaryPositions: break;
  }
  return static_cast<double>(m.vocab) * m.hidden;  // rotary positions have no weights
}

// A tied head on the last stage of a pipeline (pp > 1) uses its own copy of the
// embedding's vocabulary rows, kept equal by summing the two copies' gradients after the
// backward (exec/pp/tied_gradients.h; Megatron-LM does the same between its end stages).
double tied_copy_parameters(const ModelDims& m, int first_layer) {
  return m.head == Head::TiedVocabulary && first_layer > 0 ? static_cast<double>(m.vocab) * m.hidden : 0.0;
}

double head_parameters(const ModelDims& m) {
  // The final norm; a tied head reuses the embedding's weights (no new parameters), an
  // untied one or a classifier has its own.
  const double norm = m.biases ? 2.0 * m.hidden : m.hidden;
  return norm + (m.head == Head::TiedVocabulary ? 0.0 : static_cast<double>(m.hidden) * m.vocab);
}

}  // namespace

double ModelDims::layer_parameters() const {
  const double h = hidden, f = ffn, kv = static_cast<double>(key_value_heads()) * hidden / heads;
  const double weights = 2.0 * h * h + 2.0 * h * kv + (gated_mlp ? 3.0 : 2.0) * h * f;
  // Biases of q, k, v, the output, the MLP's input and output layers; two LayerNorms
  // (weight and bias) or two RMSNorms (weight only).
  const double biases_and_norms = biases ? (h + 2.0 * kv + h + (gated_mlp ? 2.0 : 1.0) * f + h) + 4.0 * h : 2.0 * h;
  return weights + biases_and_norms;
}

double ModelDims::layer_forward_flops_per_token() const {
  const double h = hidden, kv = static_cast<double>(key_value_heads()) * hidden / heads;
  return 2.0 * (2.0 * h * h + 2.0 * h * kv) + 2.0 * (gated_mlp ? 3.0 : 2.0) * h * ffn + 4.0 * seq * h;
}

double ModelDims::parameters() const {
  return layers * layer_parameters() + embedding_parameters(*this) + head_parameters(*this);
}

std::vector<std::string> known_models() {
  std::vector<std::string> names;
  for (const auto& m : presets()) names.push_back(m.name);
  return names;
}

ModelDims model_dims(const std::string& name) {
  for (const auto& m : presets())
    if (m.name == name) return m;
  std::string list;
  for (const auto& n : known_models()) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError("model '" + name + "' is not known to the cost model; known: " + list +
                    " (or give a plan with the model's dimensions)");
}

ModelDims model_dims(const ModelConfig& c, int seq_len) {
  return model_kind(c.kind()).dims(c, seq_len);
}

MemoryOptions MemoryOptions::of(const Plan& plan) {
  return MemoryOptions{plan.recompute, plan.sequence_parallel, plan.zero_stage,
                       plan.precision == Precision::Bf16Weights};
}

double pipeline_buffer_bytes(double boundary_bytes, int microbatches_in_flight, bool sends_activations,
                             bool sends_gradients) {
  const double outputs_and_gradient = sends_activations ? microbatches_in_flight + 1.0 : 0.0;
  const double gradients_sent = sends_gradients ? 2.0 : 0.0;
  return boundary_bytes * (outputs_and_gradient + gradients_sent);
}

double gradient_bytes_per_parameter(double bytes_per_value, const MemoryOptions& o) {
  return o.bf16_weights ? 4.0 : bytes_per_value;
}

double weight_bytes_per_parameter(double bytes_per_value, const MemoryOptions& o) {
  return o.bf16_weights ? 2.0 : bytes_per_value;
}

MemorySplit rank_memory(double parameters, double activations, bool fp32, const MemoryOptions& o, int dp) {
  MemorySplit m;
  const bool fp32_state = fp32 && !o.bf16_weights;  // weights are their own masters
  m.weights = parameters * weight_bytes_per_parameter(fp32 ? 4.0 : 2.0, o);
  m.gradients = parameters * gradient_bytes_per_parameter(fp32 ? 4.0 : 2.0, o);
  m.optimizer = parameters * (fp32_state ? 8.0 : 12.0) / (o.zero_stage >= 1 ? dp : 1);
  m.activations = activations;
  return m;
}

StageCost stage_cost(const ModelDims& m, int first, int end, int b, int tp, double bytes, const MemoryOptions& o) {
  StageCost c;
  const double h = m.hidden, s = m.seq, tokens = static_cast<double>(b) * s;
  const int layers = end - first;
  double fwd = layers * tokens * m.layer_forward_flops_per_token();
  double params = layers * m.layer_parameters();
  if (first == 0) {
    params += embedding_parameters(m);
    if (m.inputs == Inputs::ImagePatches) fwd += 2.0 * b * (s - 1) * m.patch_inputs * h;
  }
  if (end == m.layers) {
    params += head_parameters(m);
    c.tied_copy_parameters = tied_copy_parameters(m, first) / tp;
    params += tied_copy_parameters(m, first);
    fwd += (m.head == Head::ClassTokenClassifier ? static_cast<double>(b) : tokens) * 2.0 * h * m.vocab;
  }
  c.forward_flops = fwd / tp;
  c.backward_flops = 2.0 * c.forward_flops;
  c.parameters = params / tp;
  c.boundary_bytes = tokens * h * bytes;
  c.tp_allreduce_bytes = tokens * h * bytes;
  c.tp_allreduces_forward = tp > 1 ? 2 * layers : 0;
  // Korthikanti et al.: s b h (34 + 5 a s / h) bytes per layer with 16-bit values, the
  // tensor-parallel parts divided by tp (without sequence parallelism 10 of 34 stay whole).
  // Without dropout, their count less the masks (sbh after attention and after the MLP,
  // a s² b on the attention weights) and the dropped-out weights (2 a s² b): 32 + 2 a s / h,
  // of which 8 stay whole — 16 sbh + a s² b values, what LibTorch's autograd keeps here.
  // The tensor-parallel 24 are q and k (4), v (2), the projection's input (2) and the
  // MLP's 16 = 4 f / h; with g of a heads for keys and values and a gated MLP (its gate,
  // its activation, up and their product: 8 f / h) that is 4 + 4 g / a + 8 f / h.
  const double sbh = s * b * h * (bytes / 2.0), scores = (m.dropout ? 5.0 : 2.0) * m.heads * s / (h * tp);
  const double whole = m.dropout ? 10.0 : 8.0;
  const double kv_share = static_cast<double>(m.key_value_heads()) / m.heads;
  const double parallel = 4.0 + 4.0 * kv_share + (m.gated_mlp ? 8.0 : 4.0) * m.ffn / h;
  const double linear = o.sequence_parallel ? (whole + parallel) / tp : whole + parallel / tp;
  const double whole_layer = sbh * (linear + scores);
  if (o.recompute == Recompute::Full) {
    c.activation_bytes = layers * 2.0 * sbh / (o.sequence_parallel ? tp : 1);
    c.recompute_flops = layers * tokens * m.layer_forward_flops_per_token() / tp;
  } else if (o.recompute == Recompute::Selective) {
    c.activation_bytes = layers * sbh * linear;
    c.recompute_flops = layers * tokens * 4.0 * s * h / tp;
  } else {
    c.activation_bytes = layers * whole_layer;
  }
  // sbh is half the bytes of s b h values: the two h-wide gradients and the MLP's 4h-wide
  // one (split over tp) are 2 sbh (2 + ffn / (h t)) — two f-wide ones when gated.  Sequence parallelism does not shrink
  // them: the backward re-gathers each tensor-parallel region's input whole.
  if (layers > 0)
    c.backward_working_bytes = 2.0 * sbh * (2.0 + (m.gated_mlp ? 2.0 : 1.0) * m.ffn / (h * tp)) +
                               (o.recompute == Recompute::Full ? whole_layer : 0.0);
  return c;
}

double training_flops_per_sample(const ModelDims& m) {
  return 3.0 * stage_cost(m, 0, m.layers, 1, 1).forward_flops;
}

}  // namespace quintnet::core
