// The kernels of a layer (core/layer_kernels.h) against formulas written out here from
// the layer's algorithm: the matrix FLOPs against Narayanan et al.'s per-layer count, the
// memory-bound bytes kernel by kernel for each kernel set, what sequence parallelism and
// recomputation change, the stage's embedding and head.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/layer_kernels.h"

namespace {

namespace core = quintnet::core;
using core::Pass;

// GPT-3 6.7B's layer: h 4096, a 32, s 2048, f 4h, dropout; micro-batch 2 on tp 4, 16-bit.
core::ModelDims gpt() { return core::model_dims("gpt3-6.7b"); }
core::KernelOptions options(core::KernelSet set) {
  core::KernelOptions o;
  o.micro_batch = 2, o.tp = 4, o.bytes_per_value = 2, o.set = set;
  return o;
}

double memory_bytes(const std::vector<core::Kernel>& kernels, Pass pass) {
  double total = 0;
  for (const auto& k : kernels)
    if (k.pass == pass && !k.matrix()) total += k.bytes * k.count;
  return total;
}

double named_bytes(const std::vector<core::Kernel>& kernels, const std::string& name) {
  double total = 0;
  for (const auto& k : kernels)
    if (k.name == name) total += k.bytes * k.count;
  return total;
}

}  // namespace

TEST(LayerKernels, MatrixFlopsAreNarayanansPerLayerCount) {
  const double b = 2, s = 2048, h = 4096, t = 4;
  const double forward = (24 * b * s * h * h + 4 * b * s * s * h) / t;  // Narayanan et al., appendix
  for (auto set : {core::KernelSet::Unfused, core::KernelSet::Fused}) {
    const auto k = core::layer_kernels(gpt(), options(set));
    EXPECT_DOUBLE_EQ(core::kernel_flops(k, Pass::Forward), forward) << core::name_of(set);
    // The backward: input and weight gradients, each one forward's FLOPs (the attention
    // core's four products all input gradients).
    EXPECT_DOUBLE_EQ(core::kernel_flops(k, Pass::BackwardInput) + core::kernel_flops(k, Pass::BackwardWeight),
                     2 * forward);
    EXPECT_DOUBLE_EQ(core::kernel_flops(k, Pass::BackwardWeight), 24 * b * s * h * h / t);
  }
  // FlashAttention skips the causal mask's upper blocks: half the attention products, and
  // its backward recomputes the scores (five products of the forward's two).
  const auto flash = core::layer_kernels(gpt(), options(core::KernelSet::Flash));
  EXPECT_DOUBLE_EQ(core::kernel_flops(flash, Pass::Forward), (24 * b * s * h * h + 2 * b * s * s * h) / t);
  EXPECT_DOUBLE_EQ(core::kernel_flops(flash, Pass::BackwardInput), (24 * b * s * h * h + 5 * b * s * s * h) / t);
}

TEST(LayerKernels, MemoryBoundBytesAddUpKernelByKernel) {
  const double e = 2, b = 2, s = 2048, h = 4096, a = 32, f = 4 * h, t = 4, T = b * s, S = b * a * s * s / t;
  // Fused (Megatron-LM 2021): two LayerNorms (read + write), two bias-dropout-adds (input,
  // residual, output, one-byte mask), bias-GeLU (read + write of the f/t-wide
  // activation), scale-mask-softmax (read + write of the scores), attention dropout (read,
  // write, mask), the context copied back into one tensor.
  const double fused_forward = 2 * (2 * e * T * h) + 2 * ((3 * e + 1) * T * h) + 2 * e * T * f / t + 2 * e * S +
                               (2 * e + 1) * S + 2 * e * T * h / t;
  const auto fused = core::layer_kernels(gpt(), options(core::KernelSet::Fused));
  EXPECT_DOUBLE_EQ(memory_bytes(fused, Pass::Forward), fused_forward);
  // Unfused: bias add, dropout and residual add separately; bias add and GeLU; scale,
  // causal mask and softmax.
  const double unfused_forward = 2 * (2 * e * T * h) + 2 * ((2 * e + (2 * e + 1) + 3 * e) * T * h) +
                                 2 * (2 * e * T * f / t) + 3 * (2 * e * S) + (2 * e + 1) * S + 2 * e * T * h / t;
  const auto unfused = core::layer_kernels(gpt(), options(core::KernelSet::Unfused));
  EXPECT_DOUBLE_EQ(memory_bytes(unfused, Pass::Forward), unfused_forward);
  // The backward's activation gradients (fused): two dropout backwards and residual
  // gradient adds, GeLU backward (input, gradient in; gradient out), two LayerNorm
  // backwards, the context copy's, attention dropout's and softmax's backward.
  const double fused_backward = 2 * ((2 * e + 1) * T * h + 3 * e * T * h) + 3 * e * T * f / t + 2 * (3 * e * T * h) +
                                2 * e * T * h / t + (2 * e + 1) * S + 3 * e * S;
  EXPECT_DOUBLE_EQ(memory_bytes(fused, Pass::BackwardInput), fused_backward);
  // FlashAttention: no s² traffic at all.
  const auto flash = core::layer_kernels(gpt(), options(core::KernelSet::Flash));
  for (const auto& k : flash) EXPECT_EQ(k.name.find("softmax"), std::string::npos) << k.name;
  EXPECT_DOUBLE_EQ(named_bytes(flash, "flash attention"), 4 * e * T * h / t);  // Q, K, V in; output out
  // A GEMM moves its two inputs and its output once: the QKV projection's.
  EXPECT_DOUBLE_EQ(named_bytes(fused, "qkv"), e * (T * h + h * 3 * h / t + T * 3 * h / t));
}

TEST(LayerKernels, SequenceParallelismDividesTheLayerNormAndDropoutRegionsByTp) {
  const double e = 2, b = 2, s = 2048, h = 4096, t = 4, T = b * s;
  auto o = options(core::KernelSet::Fused);
  const auto whole = core::layer_kernels(gpt(), o);
  o.memory.sequence_parallel = true;
  const auto split = core::layer_kernels(gpt(), o);
  // Forward: two LayerNorms and two bias-dropout-adds on T/t tokens instead of T.
  const double regions = 2 * (2 * e * T * h) + 2 * ((3 * e + 1) * T * h);
  EXPECT_DOUBLE_EQ(memory_bytes(whole, Pass::Forward) - memory_bytes(split, Pass::Forward), regions * (1 - 1 / t));
  EXPECT_DOUBLE_EQ(core::kernel_flops(whole, Pass::Forward), core::kernel_flops(split, Pass::Forward));
}

TEST(LayerKernels, RecomputationAddsExactlyWhatItRecomputes) {
  auto o = options(core::KernelSet::Fused);
  const auto none = core::layer_kernels(gpt(), o);
  o.memory.recompute = core::Recompute::Full;
  const auto full = core::layer_kernels(gpt(), o);
  // Full: the whole forward again, in the backward for the inputs.
  EXPECT_DOUBLE_EQ(core::kernel_flops(full, Pass::BackwardInput),
                   core::kernel_flops(none, Pass::BackwardInput) + core::kernel_flops(none, Pass::Forward));
  EXPECT_DOUBLE_EQ(core::kernel_bytes(full, Pass::BackwardInput),
                   core::kernel_bytes(none, Pass::BackwardInput) + core::kernel_bytes(none, Pass::Forward));
  EXPECT_DOUBLE_EQ(core::kernel_bytes(full, Pass::Forward), core::kernel_bytes(none, Pass::Forward));
  // Selective: the attention core only — scores, softmax, dropout, attention over values
  // and the context copy.
  o.memory.recompute = core::Recompute::Selective;
  const auto selective = core::layer_kernels(gpt(), o);
  double core_flops = 0, core_bytes = 0;
  for (const char* name : {"attention scores", "scale-mask-softmax", "attention dropout", "attention over values",
                           "context copy"})
    for (const auto& k : none)
      if (k.name == name) core_flops += k.flops * k.count, core_bytes += k.bytes * k.count;
  EXPECT_DOUBLE_EQ(core::kernel_flops(selective, Pass::BackwardInput),
                   core::kernel_flops(none, Pass::BackwardInput) + core_flops);
  EXPECT_DOUBLE_EQ(core::kernel_bytes(selective, Pass::BackwardInput),
                   core::kernel_bytes(none, Pass::BackwardInput) + core_bytes);
  EXPECT_DOUBLE_EQ(core_flops, 4.0 * 2 * 2048 * 2048 * 4096 / 4);
}

TEST(LayerKernels, StageHoldsItsLayersAndTheEmbeddingAndHeadOnce) {
  const core::ModelDims m = gpt();
  const auto o = options(core::KernelSet::Fused);
  const auto layer = core::layer_kernels(m, o);
  const auto middle = core::stage_kernels(m, 3, 7, o);
  EXPECT_DOUBLE_EQ(core::kernel_flops(middle, Pass::Forward), 4 * core::kernel_flops(layer, Pass::Forward));
  EXPECT_DOUBLE_EQ(core::kernel_bytes(middle, Pass::BackwardWeight), 4 * core::kernel_bytes(layer, Pass::BackwardWeight));
  // The last stage: the logits' product (2 T h V / t) and the fp32 cross-entropy over the
  // T × V/t logits: cast (e + 4), max (4), shift (8), exp (8), sum (4), normalize (8).
  const double e = 2, T = 2 * 2048, h = 4096, V = m.vocab, t = 4;
  const auto last = core::stage_kernels(m, m.layers - 1, m.layers, o);
  EXPECT_DOUBLE_EQ(core::kernel_flops(last, Pass::Forward) - core::kernel_flops(layer, Pass::Forward),
                   2 * T * h * V / t);
  EXPECT_DOUBLE_EQ(named_bytes(last, "cross-entropy"), (e + 4 + 4 + 8 + 8 + 4 + 8) * T * V / t);
  // The first stage: its layer and the embedding, no head.
  const auto first = core::stage_kernels(m, 0, 1, o);
  EXPECT_DOUBLE_EQ(core::kernel_flops(first, Pass::Forward), core::kernel_flops(layer, Pass::Forward));
  EXPECT_GT(named_bytes(first, "embedding lookup"), 0);
  EXPECT_EQ(named_bytes(first, "cross-entropy"), 0);
}

TEST(LayerKernels, GradientsAccumulateAfterTheFirstMicrobatchOnly) {
  auto o = options(core::KernelSet::Fused);
  EXPECT_EQ(named_bytes(core::layer_kernels(gpt(), o), "gradient accumulation"), 0);  // one microbatch
  o.microbatches = 4;
  // A rank's layer parameters: QKV (h × 3h/t, 3h/t biases), projection (h/t × h, h biases
  // whole), fc1 (h × 4h/t, 4h/t), fc2 (4h/t × h, h), two LayerNorms (4h).
  const double h = 4096, t = 4, parameters = (12 * h * h + 7 * h) / t + 2 * h + 4 * h;
  // Each of the 3 later microbatches reads its gradients and the sum, writes the sum.
  EXPECT_NEAR(named_bytes(core::layer_kernels(gpt(), o), "gradient accumulation"), 3 * 2 * parameters * 3 / 4,
              1e-9 * parameters);
}

TEST(LayerKernels, OptimizerBytesPerParameter) {
  EXPECT_EQ(core::optimizer_bytes_per_parameter(4), 32);  // AdamW in fp32 and the gradient norm
  EXPECT_EQ(core::optimizer_bytes_per_parameter(2), 52);  // + the fp32 gradient copy and the weights copied back
}

TEST(LayerKernels, KernelSetNamesRoundTripAndUnknownOnesAreRefused) {
  for (const char* name : {"unfused", "fused", "flash"})
    EXPECT_EQ(core::name_of(*core::parse_option<core::KernelSet>(name)), name);
  EXPECT_FALSE(core::parse_option<core::KernelSet>("triton"));
  EXPECT_EQ(core::option_list<core::KernelSet>(" or "), "unfused, fused or flash");
}

// A Llama 3 layer (grouped-query attention, SwiGLU) written out: q and the output 2 h² each,
// k and v 2 h g d each, gate, up and down 2 h f each, the attention core 4 s h, per token,
// forward; the layer kernels and the cost model's stage count agree on it.
TEST(LayerKernels, LlamaLayerFlopsFollowGroupedQueryAttentionAndSwiGlu) {
  const core::ModelDims m = core::model_dims("llama3-8b");
  const double b = 2, s = m.seq, h = m.hidden, f = m.ffn, kv = 8.0 * 128, t = 4;
  const double forward = b * s * (2 * (2 * h * h + 2 * h * kv) + 2 * 3 * h * f + 4 * s * h) / t;
  const auto k = core::layer_kernels(m, options(core::KernelSet::Unfused));
  EXPECT_DOUBLE_EQ(core::kernel_flops(k, Pass::Forward), forward);
  EXPECT_DOUBLE_EQ(core::kernel_flops(k, Pass::BackwardWeight), b * s * 2 * (2 * h * h + 2 * h * kv + 3 * h * f) / t);
  EXPECT_DOUBLE_EQ(core::stage_cost(m, 5, 6, 2, 4).forward_flops, forward);
  EXPECT_GT(named_bytes(k, "rotary embedding"), 0);
  EXPECT_GT(named_bytes(k, "gate multiply"), 0);
  EXPECT_EQ(named_bytes(k, "bias add"), 0) << "Llama's linears have no biases";
  EXPECT_EQ(named_bytes(k, "layernorm"), 0);
  EXPECT_GT(named_bytes(k, "rmsnorm"), 0);
  // Where tp exceeds the key/value heads, each rank computes one head of keys and values.
  auto o16 = options(core::KernelSet::Unfused);
  o16.tp = 16;
  const auto wide = core::layer_kernels(m, o16);
  const double q_kv_out = b * s * (h / 16 + 2 * 128);
  EXPECT_DOUBLE_EQ(core::kernel_flops({wide.begin(), wide.begin() + 2}, Pass::Forward), 2 * q_kv_out * h);
}

// The Llama 3 herd's sizes from their model cards: 8.03 B, 70.6 B and 405.9 B parameters.
TEST(CostModel, LlamaThreeParameterCountsMatchTheModelCards) {
  EXPECT_NEAR(core::model_dims("llama3-8b").parameters() / 1e9, 8.03, 0.01);
  EXPECT_NEAR(core::model_dims("llama3-70b").parameters() / 1e9, 70.55, 0.05);
  EXPECT_NEAR(core::model_dims("llama3-405b").parameters() / 1e9, 405.85, 0.2);
  // Llama 3.2's small models tie the head to the embedding (their model.safetensors: 1,235,814,400 and
  // 3,212,749,824 parameters); untied they would count 262.7M and 394.0M more.
  EXPECT_NEAR(core::model_dims("llama3.2-1b").parameters() / 1e9, 1.2358, 0.0005);
  EXPECT_NEAR(core::model_dims("llama3.2-3b").parameters() / 1e9, 3.2127, 0.0005);
}

// A tied head on the last of several pipeline stages uses a copy of the embedding's V/t
// rows (exec/pp/tied_gradients.h): the last stage holds V·h/t more parameters and
// accumulates their gradient over microbatches; one stage holding both ends, or an
// untied head (Llama 3 8B), has no copy.
TEST(CostModel, ATiedHeadOnTheLastOfSeveralStagesHoldsACopyOfTheEmbedding) {
  const core::ModelDims m = gpt();
  const int t = 4;
  const double copy = static_cast<double>(m.vocab) * m.hidden / t;
  const core::StageCost last = core::stage_cost(m, m.layers - 1, m.layers, 2, t);
  const core::StageCost whole = core::stage_cost(m, 0, m.layers, 2, t);
  EXPECT_DOUBLE_EQ(last.tied_copy_parameters, copy);
  EXPECT_EQ(whole.tied_copy_parameters, 0);
  EXPECT_NEAR(last.parameters - core::stage_cost(m, m.layers - 2, m.layers - 1, 2, t).parameters,
              copy + 2.0 * m.hidden / t, 1e-6 * copy);  // the copy and the final LayerNorm
  const core::ModelDims untied = core::model_dims("llama3-8b");
  EXPECT_EQ(core::stage_cost(untied, untied.layers - 1, untied.layers, 1, t).tied_copy_parameters, 0);

  auto o = options(core::KernelSet::Fused);
  o.microbatches = 4;
  const double accumulation = 3 * 2 * copy * 3 / 4;  // read the gradient and the sum, write the sum
  const auto last_kernels = core::stage_kernels(m, m.layers - 1, m.layers, o);
  const auto layer = core::layer_kernels(m, o);
  EXPECT_NEAR(named_bytes(last_kernels, "gradient accumulation") - named_bytes(layer, "gradient accumulation"),
              accumulation, 1e-9 * accumulation);
  // One stage with both ends: the embedding's rows (and learnt positions) accumulate once.
  const auto whole_kernels = core::stage_kernels(m, 0, m.layers, o);
  const double embedding = (static_cast<double>(m.vocab) / t + m.seq) * m.hidden;
  EXPECT_NEAR(named_bytes(whole_kernels, "gradient accumulation") - m.layers * named_bytes(layer, "gradient accumulation"),
              3 * 2 * embedding * 3 / 4, 1e-9 * accumulation);
}
