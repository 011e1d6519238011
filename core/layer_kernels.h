#pragma once
// The kernels of a training step, as the GPU runs them: every matrix product (GEMM) and
// every memory-bound kernel (LayerNorm, softmax, dropout, GeLU, bias and residual adds,
// cross-entropy) of one microbatch on one tensor-parallel rank, with its FLOPs and the
// bytes it reads and writes in memory — the terms of a roofline.  The simulator times
// each on a platform (sim/roofline.h: a GEMM at a matrix rate that depends on its size,
// a memory-bound kernel at memory bandwidth × an efficiency that depends on its bytes),
// which is what makes the memory-bound kernels weigh more at small hidden sizes than at
// large ones.  docs/SIMULATOR.md writes the lists out as equations.
//
// Notation (per tensor-parallel rank): b micro-batch, s tokens per sample, T = b s,
// h hidden, a heads, d = h / a, f the MLP width (4h), t tp, V vocabulary, e bytes per
// value (2 on GPUs, 4 on CPUs), S = b a s² / t attention scores; dropout masks are one
// byte per element.  GEMM (M, N, K): 2 M N K FLOPs, e (M K + K N + M N) bytes.
// A Llama-style layer (ModelDims' kv_heads, gated_mlp, biases, rotary inputs) has the same
// list with its widths: q, k, v of h/t + 2 g d/t, SwiGLU's gate and up in the fc1 GEMM
// (2f/t), SiLU and the gate product for GeLU, RMSNorms, no bias kernels, and the
// rotation of q and k.
#include <string>
#include <vector>

#include "core/cost_model.h"

namespace quintnet::core {

// How a run computes a layer's memory-bound parts (core::KernelSet, core/run_options.h):
//   Unfused  plain PyTorch ops, one kernel each (our executor; bias adds, GeLU, scale,
//            mask, softmax, dropout and residual adds separately);
//   Fused    Megatron-LM 2021's fused kernels (Narayanan et al. §4.2): bias + GeLU,
//            bias + dropout + add, scale + mask + softmax — the attention scores still
//            go through memory;
//   Flash    FlashAttention for the attention core (one kernel forward and one backward,
//            no s² traffic; causal blocks above the diagonal skipped) and the fused
//            element-wise kernels.

// Where a kernel runs: the forward, the backward for the inputs (ZB-H1's BI: the
// activation gradients, the attention core's gradients, a recomputed forward) or the
// backward for the weights (BW: weight-gradient GEMMs, bias and LayerNorm weight
// gradients, accumulating them over microbatches).
enum class Pass { Forward, BackwardInput, BackwardWeight };

struct Kernel {
  std::string name;  // "qkv", "layernorm", "softmax", ...; "(recompute)" appended when recomputed
  Pass pass = Pass::Forward;
  double flops = 0;  // matrix FLOPs: > 0 for a GEMM, 0 for a memory-bound kernel
  double bytes = 0;  // read + written in memory
  double count = 1;  // launches per microbatch on the stage (its layers)
  bool matrix() const { return flops > 0; }
};

struct KernelOptions {
  int micro_batch = 1, tp = 1;
  // Context parallelism: the model's seq is then this rank's s/cp tokens, and the
  // attention core reads the keys the ring brings (exec/cp/ring_attention.h): FlashAttention
  // the whole causal sequence (s keys, half of them masked); the unfused core the
  // (2cp + 1) chunk pairs the mask leaves, each a (s/2cp)² block: (2cp + 1)/4 · s/cp keys.
  int cp = 1;
  int microbatches = 1;  // per step: gradients are accumulated into a buffer after the first
  double bytes_per_value = 2;
  KernelSet set = KernelSet::Unfused;
  MemoryOptions memory;  // recompute (adds what it recomputes to the backward), sequence parallelism
};

// One transformer layer (attention block + MLP), all three passes.
std::vector<Kernel> layer_kernels(const ModelDims& m, const KernelOptions& o);
// Pipeline stage [first, end): its layers (count = layers), plus the embedding on the
// first stage and the final norm, head and loss on the last.
std::vector<Kernel> stage_kernels(const ModelDims& m, int first_layer, int end_layer, const KernelOptions& o);

// Sums over a kernel list (count included).
double kernel_flops(const std::vector<Kernel>& kernels, Pass pass);
double kernel_bytes(const std::vector<Kernel>& kernels, Pass pass);

// Bytes the optimizer step moves per parameter: AdamW reading weight, gradient and both
// moments and writing weight and moments (28 bytes in fp32); in mixed precision also
// the 16-bit gradient copied into the fp32 one and unscaled, and the fp32 weights
// copied back to the 16-bit model (52); the gradient norm reads the gradients once.
double optimizer_bytes_per_parameter(double bytes_per_value);

}  // namespace quintnet::core
