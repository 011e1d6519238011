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

const std::vector<ModelDims>& presets() {
  static const std::vector<ModelDims> p = {
      gpt("gpt2-124m", 12, 768, 12, 1024),    gpt("gpt2-355m", 24, 1024, 16, 1024),
      gpt("gpt2-774m", 36, 1280, 20, 1024),   gpt("gpt2-1.5b", 48, 1600, 25, 1024),
      gpt("gpt3-1.3b", 24, 2048, 16, 2048),   gpt("gpt3-6.7b", 32, 4096, 32, 2048),
      gpt("gpt3-13b", 40, 5120, 40, 2048),    gpt("gpt3-175b", 96, 12288, 96, 2048),
  };
  return p;
}

double layer_parameters(const ModelDims& m) {
  return 4.0 * m.hidden * m.hidden + 2.0 * m.hidden * m.ffn + 9.0 * m.hidden;  // weights, biases, 2 LayerNorms
}

double embedding_parameters(const ModelDims& m) {
  return m.inputs == Inputs::ImagePatches ? static_cast<double>(m.patch_inputs) * m.hidden + (m.seq + 1.0) * m.hidden
                                         : (static_cast<double>(m.vocab) + m.seq) * m.hidden;
}

double head_parameters(const ModelDims& m) {
  // A tied head reuses the embedding's weights (no new parameters); a classifier has its own.
  return 2.0 * m.hidden + (m.head == Head::ClassTokenClassifier ? static_cast<double>(m.hidden) * m.vocab : 0.0);
}

}  // namespace

double ModelDims::parameters() const {
  return layers * layer_parameters(*this) + embedding_parameters(*this) + head_parameters(*this);
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
  return model_kind(c.kind).dims(c, seq_len);
}

MemoryOptions MemoryOptions::of(const Plan& plan) {
  return MemoryOptions{plan.recompute, plan.sequence_parallel, plan.zero_stage};
}

double pipeline_buffer_bytes(double boundary_bytes, int microbatches_in_flight, bool sends_activations,
                             bool sends_gradients) {
  const double outputs_and_gradient = sends_activations ? microbatches_in_flight + 1.0 : 0.0;
  const double gradients_sent = sends_gradients ? 2.0 : 0.0;
  return boundary_bytes * (outputs_and_gradient + gradients_sent);
}

MemorySplit rank_memory(double parameters, double activations, bool fp32, const MemoryOptions& o, int dp) {
  MemorySplit m;
  m.weights = parameters * (fp32 ? 4.0 : 2.0);
  m.gradients = parameters * (fp32 ? 4.0 : 2.0);
  m.optimizer = parameters * (fp32 ? 8.0 : 12.0) / (o.zero_stage >= 1 ? dp : 1);
  m.activations = activations;
  return m;
}

StageCost stage_cost(const ModelDims& m, int first, int end, int b, int tp, double bytes, const MemoryOptions& o) {
  StageCost c;
  const double h = m.hidden, s = m.seq, tokens = static_cast<double>(b) * s;
  const int layers = end - first;
  double fwd = layers * tokens * (8.0 * h * h + 4.0 * h * m.ffn + 4.0 * s * h);
  double params = layers * layer_parameters(m);
  if (first == 0) {
    params += embedding_parameters(m);
    if (m.inputs == Inputs::ImagePatches) fwd += 2.0 * b * (s - 1) * m.patch_inputs * h;
  }
  if (end == m.layers) {
    params += head_parameters(m);
    fwd += m.head == Head::ClassTokenClassifier ? 2.0 * b * h * m.vocab : 2.0 * tokens * h * m.vocab;
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
  const double sbh = s * b * h * (bytes / 2.0), scores = (m.dropout ? 5.0 : 2.0) * m.heads * s / (h * tp);
  const double whole = m.dropout ? 10.0 : 8.0;  // the tensor-parallel part: 24 either way
  const double linear = o.sequence_parallel ? (whole + 24.0) / tp : whole + 24.0 / tp;
  const double whole_layer = sbh * (linear + scores);
  if (o.recompute == Recompute::Full) {
    c.activation_bytes = layers * 2.0 * sbh / (o.sequence_parallel ? tp : 1);
    c.recompute_flops = layers * tokens * (8.0 * h * h + 4.0 * h * m.ffn + 4.0 * s * h) / tp;
  } else if (o.recompute == Recompute::Selective) {
    c.activation_bytes = layers * sbh * linear;
    c.recompute_flops = layers * tokens * 4.0 * s * h / tp;
  } else {
    c.activation_bytes = layers * whole_layer;
  }
  // sbh is half the bytes of s b h values: the two h-wide gradients and the MLP's 4h-wide
  // one (split over tp) are 2 sbh (2 + ffn / (h t)).  Sequence parallelism does not shrink
  // them: the backward re-gathers each tensor-parallel region's input whole.
  if (layers > 0)
    c.backward_working_bytes = 2.0 * sbh * (2.0 + static_cast<double>(m.ffn) / (h * tp)) +
                               (o.recompute == Recompute::Full ? whole_layer : 0.0);
  return c;
}

double training_flops_per_sample(const ModelDims& m) {
  return 3.0 * stage_cost(m, 0, m.layers, 1, 1).forward_flops;
}

}  // namespace quintnet::core
