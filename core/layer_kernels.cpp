#include "core/layer_kernels.h"

#include <algorithm>

#include "core/error.h"

namespace quintnet::core {

namespace {

// The sizes every formula uses, per tensor-parallel rank (see the header's notation).
struct Sizes {
  double e, b, s, T, h, d, f, t, S, mask;
  double kv;  // key (and value) width per rank: g d / t, or one head d where tp exceeds g
  double Tr;  // tokens of the LayerNorm / dropout regions: T, or T / t with sequence parallelism
  double keys;  // keys each query's scores span: s, more under context parallelism (KernelOptions::cp)
  double heads_per_rank;
  bool dropout, causal;
  bool gated, biases, rotary;  // SwiGLU; linear biases and LayerNorms (else RMSNorms); rotary positions
  KernelSet set;
};

Sizes sizes_of(const ModelDims& m, const KernelOptions& o) {
  Sizes z;
  z.e = o.bytes_per_value;
  z.b = o.micro_batch;
  z.s = m.seq;
  z.T = z.b * z.s;
  z.h = m.hidden;
  z.d = static_cast<double>(m.hidden) / m.heads;
  z.f = m.ffn;
  z.t = o.tp;
  z.kv = std::max(static_cast<double>(m.key_value_heads()) / o.tp, 1.0) * z.d;
  z.gated = m.gated_mlp, z.biases = m.biases, z.rotary = m.inputs == Inputs::TokensRotaryPositions;
  z.heads_per_rank = static_cast<double>(m.heads) / o.tp;
  z.keys = o.cp == 1 ? z.s : o.set == KernelSet::Flash ? z.s * o.cp : z.s * (2 * o.cp + 1) / 4.0;
  z.S = z.b * z.heads_per_rank * z.s * z.keys;
  z.dropout = m.dropout;
  z.mask = m.dropout ? 1.0 : 0.0;
  z.causal = m.causal;
  z.Tr = o.memory.sequence_parallel ? z.T / z.t : z.T;
  z.set = o.set;
  return z;
}

// Appends kernels of one pass, `count` launches each per microbatch.
class Builder {
 public:
  Builder(std::vector<Kernel>& out, double e, double count) : out_(out), e_(e), count_(count) {}

  // A matrix product C[M, N] = A[M, K] B[K, N], `batch` of them in one launch.
  void gemm(const std::string& name, Pass pass, double M, double N, double K, double batch = 1) {
    add(name, pass, 2 * M * N * K * batch, e_ * (M * K + K * N + M * N) * batch);
  }
  void memory(const std::string& name, Pass pass, double bytes) { add(name, pass, 0, bytes); }
  // A kernel timed as a matrix product that is not one GEMM (FlashAttention).
  void fused_matrix(const std::string& name, Pass pass, double flops, double bytes) { add(name, pass, flops, bytes); }
  std::string suffix;  // appended to every name: " (recompute)"

 private:
  void add(const std::string& name, Pass pass, double flops, double bytes) {
    if (flops <= 0 && bytes <= 0) return;
    out_.push_back({name + suffix, pass, flops, bytes, count_});
  }
  std::vector<Kernel>& out_;
  double e_, count_;
};

// Bias (+ dropout) + residual add after the projection and after fc2.
void residual_forward(Builder& k, const Sizes& z, Pass pass) {
  const double n = z.Tr * z.h;
  if (z.set == KernelSet::Unfused) {
    if (z.biases) k.memory("bias add", pass, 2 * z.e * n);
    if (z.dropout) k.memory("dropout", pass, (2 * z.e + z.mask) * n);
    k.memory("residual add", pass, 3 * z.e * n);
  } else {
    k.memory("bias-dropout-add", pass, (3 * z.e + z.mask) * n);
  }
}

// The attention core's forward: scores, softmax, dropout, attention over values.
void attention_core_forward(Builder& k, const Sizes& z, Pass pass) {
  const double heads = z.b * z.heads_per_rank;
  if (z.set == KernelSet::Flash) {
    // One kernel: reads Q, K, V and writes the output; the scores stay on chip.
    const double causal = z.causal ? 0.5 : 1.0;
    k.fused_matrix("flash attention", pass, causal * 4 * z.T * z.keys * z.h / z.t, 2 * z.e * z.T * (z.h / z.t + z.kv));
    return;
  }
  k.gemm("attention scores", pass, z.s, z.keys, z.d, heads);
  if (z.set == KernelSet::Fused) {
    k.memory("scale-mask-softmax", pass, 2 * z.e * z.S);
  } else {
    k.memory("scale", pass, 2 * z.e * z.S);
    if (z.causal) k.memory("causal mask", pass, 2 * z.e * z.S);
    k.memory("softmax", pass, 2 * z.e * z.S);
  }
  if (z.dropout) k.memory("attention dropout", pass, (2 * z.e + z.mask) * z.S);
  k.gemm("attention over values", pass, z.s, z.d, z.keys, heads);
  // Heads back into one [tokens, h/t] tensor for the projection.
  k.memory("context copy", pass, 2 * z.e * z.T * z.h / z.t);
}

// q, k and v of this rank's heads: one GEMM's output width.
double qkv_width(const Sizes& z) { return z.h / z.t + 2 * z.kv; }
// The MLP's first GEMM: fc1, or SwiGLU's gate and up together.
double mlp_in_width(const Sizes& z) { return (z.gated ? 2 : 1) * z.f / z.t; }
const char* norm_name(const Sizes& z) { return z.biases ? "layernorm" : "rmsnorm"; }

// The MLP's activation: bias and GeLU, or SwiGLU's SiLU of the gate times up.
void mlp_activation(Builder& k, const Sizes& z, Pass pass) {
  const double n = z.T * z.f / z.t;
  if (z.gated && z.set == KernelSet::Unfused) {
    k.memory("silu", pass, 2 * z.e * n);
    k.memory("gate multiply", pass, 3 * z.e * n);
  } else if (z.gated) {
    k.memory("swiglu", pass, 3 * z.e * n);
  } else if (z.set == KernelSet::Unfused) {
    k.memory("bias add", pass, 2 * z.e * n);
    k.memory("gelu", pass, 2 * z.e * n);
  } else {
    k.memory("bias-gelu", pass, 2 * z.e * n);
  }
}

// A layer's forward: in the forward pass, or again inside the backward (full recomputation).
void layer_forward(Builder& k, const Sizes& z, Pass pass) {
  k.memory(norm_name(z), pass, 2 * z.e * z.Tr * z.h);
  k.gemm("qkv", pass, z.T, qkv_width(z), z.h);
  // Rotary positions: q and k rotated (unfused: two products, the half rotation and a sum).
  if (z.rotary) k.memory("rotary embedding", pass, (z.set == KernelSet::Unfused ? 11 : 2) * z.e * z.T * (z.h / z.t + z.kv));
  attention_core_forward(k, z, pass);
  k.gemm("projection", pass, z.T, z.h, z.h / z.t);
  residual_forward(k, z, pass);
  k.memory(norm_name(z), pass, 2 * z.e * z.Tr * z.h);
  k.gemm("fc1", pass, z.T, mlp_in_width(z), z.h);
  mlp_activation(k, z, pass);
  k.gemm("fc2", pass, z.T, z.h, z.f / z.t);
  residual_forward(k, z, pass);
}

// The gradient of a residual block's output into its branch (dropout backward) and,
// at the block's input, the residual gradient added to the branch's.
void residual_backward(Builder& k, const Sizes& z) {
  const double n = z.Tr * z.h;
  if (z.dropout) k.memory("dropout backward", Pass::BackwardInput, (2 * z.e + z.mask) * n);
  k.memory("residual gradient add", Pass::BackwardInput, 3 * z.e * n);
}

void attention_core_backward(Builder& k, const Sizes& z) {
  const Pass bi = Pass::BackwardInput;
  const double heads = z.b * z.heads_per_rank;
  if (z.set == KernelSet::Flash) {
    // Recomputes the scores and computes dV, dP, dQ, dK: five products of the forward's
    // two; reads Q, K, V, the output and its gradient, writes dQ, dK, dV.
    const double causal = z.causal ? 0.5 : 1.0;
    k.fused_matrix("flash attention backward", bi, causal * 10 * z.T * z.keys * z.h / z.t, 8 * z.e * z.T * z.h / z.t);
    return;
  }
  k.memory("context copy backward", bi, 2 * z.e * z.T * z.h / z.t);
  k.gemm("attention over values: probabilities gradient", bi, z.s, z.keys, z.d, heads);
  k.gemm("attention over values: values gradient", bi, z.keys, z.d, z.s, heads);
  if (z.dropout) k.memory("attention dropout backward", bi, (2 * z.e + z.mask) * z.S);
  if (z.set == KernelSet::Fused) {
    k.memory("scale-mask-softmax backward", bi, 3 * z.e * z.S);
  } else {
    k.memory("softmax backward", bi, 3 * z.e * z.S);
    if (z.causal) k.memory("causal mask backward", bi, 2 * z.e * z.S);
    k.memory("scale backward", bi, 2 * z.e * z.S);
  }
  k.gemm("attention scores: queries gradient", bi, z.s, z.d, z.keys, heads);
  k.gemm("attention scores: keys gradient", bi, z.keys, z.d, z.s, heads);
}

// Adding this microbatch's weight gradients to the buffer that holds the sum over the
// step's microbatches (read both, write the sum) — for every microbatch but the first.
void accumulate_gradients(Builder& k, const Sizes& z, double parameters, int microbatches) {
  k.memory("gradient accumulation", Pass::BackwardWeight,
           3 * z.e * parameters * (microbatches - 1.0) / microbatches);
}

void layer_backward(Builder& k, const Sizes& z, const KernelOptions& o) {
  const Pass bi = Pass::BackwardInput, bw = Pass::BackwardWeight;
  const std::string norm = norm_name(z);
  // Activation gradients, last kernel first.
  residual_backward(k, z);
  k.gemm("fc2: input gradient", bi, z.T, z.f / z.t, z.h);
  // GeLU's: reads the gradient and its input, writes one; SwiGLU's reads the gradient,
  // gate and up and writes both of theirs.
  k.memory(z.gated ? "swiglu backward" : "gelu backward", bi, (z.gated ? 5 : 3) * z.e * z.T * z.f / z.t);
  k.gemm("fc1: input gradient", bi, z.T, z.h, mlp_in_width(z));
  k.memory(norm + " backward", bi, 3 * z.e * z.Tr * z.h);
  residual_backward(k, z);
  k.gemm("projection: input gradient", bi, z.T, z.h / z.t, z.h);
  attention_core_backward(k, z);
  if (z.rotary) k.memory("rotary embedding backward", bi, (z.set == KernelSet::Unfused ? 11 : 2) * z.e * z.T * qkv_width(z) * 2 / 3);
  k.gemm("qkv: input gradient", bi, z.T, z.h, qkv_width(z));
  k.memory(norm + " backward", bi, 3 * z.e * z.Tr * z.h);
  // Weight gradients: each linear's from its input and output gradient, the biases'
  // and norms' from reductions over the tokens.
  k.gemm("qkv: weight gradient", bw, z.h, qkv_width(z), z.T);
  k.gemm("projection: weight gradient", bw, z.h / z.t, z.h, z.T);
  k.gemm("fc1: weight gradient", bw, z.h, mlp_in_width(z), z.T);
  k.gemm("fc2: weight gradient", bw, z.f / z.t, z.h, z.T);
  const double biases = qkv_width(z) + mlp_in_width(z) + 2 * z.h;  // per rank (the output ones whole)
  if (z.biases) k.memory("bias gradients", bw, z.e * (z.T * (qkv_width(z) + mlp_in_width(z)) + 2 * z.Tr * z.h));
  const double norm_weights = z.biases ? 4 * z.h : 2 * z.h;
  k.memory(norm + " weight gradients", bw, norm_weights * z.e * z.Tr);
  const double parameters =
      (qkv_width(z) + mlp_in_width(z)) * z.h + z.h * z.h / z.t + z.h * z.f / z.t + (z.biases ? biases : 0) + norm_weights;
  accumulate_gradients(k, z, parameters, o.microbatches);
}

void embedding_kernels(Builder& k, const ModelDims& m, const Sizes& z, const KernelOptions& o) {
  const Pass f = Pass::Forward, bw = Pass::BackwardWeight;
  const double n = z.T * z.h;
  if (m.inputs == Inputs::ImagePatches) {
    const double patches = z.b * (z.s - 1);
    k.gemm("patch embedding", f, patches, z.h, m.patch_inputs);
    k.memory("class token and positions", f, 3 * z.e * n);
    k.gemm("patch embedding: weight gradient", bw, m.patch_inputs, z.h, patches);
    accumulate_gradients(k, z, static_cast<double>(m.patch_inputs) * z.h + (z.s + 1) * z.h, o.microbatches);
    return;
  }
  // Vocabulary-parallel lookup (each rank's rows), learnt positions added, dropout.
  k.memory("embedding lookup", f, 2 * z.e * n);
  if (!z.rotary) k.memory("position add", f, 3 * z.e * n);
  if (z.dropout) {
    k.memory("embedding dropout", f, (2 * z.e + z.mask) * n);
    k.memory("embedding dropout backward", Pass::BackwardInput, (2 * z.e + z.mask) * n);
  }
  // The gradient buffer of this rank's vocabulary rows zeroed, the tokens' rows added in.
  k.memory("embedding gradient", bw, z.e * m.vocab * z.h / z.t + 3 * z.e * n);
  accumulate_gradients(k, z, (m.vocab / z.t + (z.rotary ? 0 : z.s)) * z.h, o.microbatches);
}

// `own_copy`: a tied head on a stage without the embedding (pp > 1) uses a copy of its
// weights, with a gradient buffer of its own.
void head_kernels(Builder& k, const ModelDims& m, const Sizes& z, const KernelOptions& o, bool own_copy) {
  const Pass f = Pass::Forward, bi = Pass::BackwardInput, bw = Pass::BackwardWeight;
  if (m.head == Head::ClassTokenClassifier) {  // LayerNorm and classifier on the class token of each sample
    k.memory("final layernorm", f, 2 * z.e * z.b * z.h);
    k.gemm("classifier", f, z.b, m.vocab, z.h);
    k.gemm("classifier: input gradient", bi, z.b, z.h, m.vocab);
    k.gemm("classifier: weight gradient", bw, z.h, m.vocab, z.b);
    accumulate_gradients(k, z, z.h * m.vocab, o.microbatches);
    return;
  }
  const double logits = z.T * m.vocab / z.t;
  const std::string norm = std::string("final ") + norm_name(z);
  k.memory(norm, f, 2 * z.e * z.Tr * z.h);
  k.gemm("logits", f, z.T, m.vocab / z.t, z.h);
  // Vocabulary-parallel cross-entropy in fp32 (Megatron-LM's): the 16-bit logits cast
  // to fp32, their max, the shift, exp, sum and the softmax kept for the backward; the
  // backward scales it by the loss gradient and casts it back.
  const double cast = z.e < 4 ? z.e + 4 : 0;
  k.memory("cross-entropy", f, (cast + 4 + 8 + 8 + 4 + 8) * logits);
  k.memory("cross-entropy backward", bi, (8 + cast) * logits);
  k.gemm("logits: input gradient", bi, z.T, z.h, m.vocab / z.t);
  k.memory(norm + " backward", bi, 3 * z.e * z.Tr * z.h);
  k.gemm("logits: weight gradient", bw, m.vocab / z.t, z.h, z.T);  // the tied embedding's, or the head's own
  k.memory(norm + " weight gradients", bw, (z.biases ? 2 : 1) * z.e * z.Tr * z.h);
  if (m.head == Head::UntiedVocabulary || own_copy) accumulate_gradients(k, z, m.vocab / z.t * z.h, o.microbatches);
}

// `layers` identical layers: forward, backward and what recomputation adds.
void add_layers(std::vector<Kernel>& out, const Sizes& z, const KernelOptions& o, double layers) {
  Builder k(out, z.e, layers);
  layer_forward(k, z, Pass::Forward);
  layer_backward(k, z, o);
  Builder again(out, z.e, layers);
  again.suffix = " (recompute)";
  if (o.memory.recompute == Recompute::Full) {
    layer_forward(again, z, Pass::BackwardInput);
  } else if (o.memory.recompute == Recompute::Selective && z.set != KernelSet::Flash) {
    // Korthikanti et al.: the attention core only (FlashAttention's backward already
    // recomputes it).
    attention_core_forward(again, z, Pass::BackwardInput);
  }
}

}  // namespace

std::vector<Kernel> layer_kernels(const ModelDims& m, const KernelOptions& o) {
  std::vector<Kernel> out;
  add_layers(out, sizes_of(m, o), o, 1);
  return out;
}

std::vector<Kernel> stage_kernels(const ModelDims& m, int first, int end, const KernelOptions& o) {
  std::vector<Kernel> out;
  const Sizes z = sizes_of(m, o);
  if (end > first) add_layers(out, z, o, end - first);
  Builder once(out, z.e, 1);
  if (first == 0) embedding_kernels(once, m, z, o);
  if (end == m.layers) head_kernels(once, m, z, o, m.head == Head::TiedVocabulary && first > 0);
  return out;
}

double kernel_flops(const std::vector<Kernel>& kernels, Pass pass) {
  double total = 0;
  for (const auto& k : kernels)
    if (k.pass == pass) total += k.flops * k.count;
  return total;
}

double kernel_bytes(const std::vector<Kernel>& kernels, Pass pass) {
  double total = 0;
  for (const auto& k : kernels)
    if (k.pass == pass) total += k.bytes * k.count;
  return total;
}

double optimizer_bytes_per_parameter(double bytes_per_value) {
  const double adamw = 28, norm = 4;
  if (bytes_per_value >= 4) return adamw + norm;
  // 16-bit gradient read, fp32 copy written, unscaled in place, fp32 weights copied back.
  return bytes_per_value + 4 + 8 + norm + adamw + (4 + bytes_per_value);
}

}  // namespace quintnet::core
