#pragma once
// The attention core softmax(q kᵀ / √d [causal]) v on the CPU, forward and backward,
// one (batch, head) pair at a time, in register-tiled loops over GCC vector types.
//
// Why a kernel of our own: for the models this testbed trains on CPUs (ViT: 50 tokens
// of 16 features a head; small GPT-2s: 64 tokens) LibTorch 1.13 runs the attention as
// two batched matmuls of B·H tiny GEMMs (~3 µs of BLAS call overhead each, a third of a
// ViT step) and a softmax over rows of 50.  One pass per (batch, head) that keeps the
// head's q, k, v and scores in cache does the same arithmetic in a fraction of the time
// (docs/PERFORMANCE.md).  No LibTorch here: raw float pointers, so the file compiles
// fast, with -O3 and one variant per CPU level (AVX-512, AVX2, baseline), each with
// register tiles of its own width.
//
// Layout: q, k, v are [B, T, H, d] with d contiguous and the strides below (they may be
// views into one fused qkv projection); out and d* are contiguous [B, T, H, d]; probs
// (the softmax, kept for the backward pass) is contiguous [B, H, T, T].
#include <cstdint>

namespace quintnet::exec::kernels {

struct AttentionDims {
  int64_t batch = 0, heads = 0, tokens = 0, head_dim = 0;
  int64_t stride_b = 0, stride_t = 0;  // q, k and v: element strides of the batch and token dims (head: head_dim)
  float scale = 1.0f;                   // usually 1/√head_dim
  bool causal = false;                  // token t attends to tokens ≤ t
};

// The instruction-set levels the kernels are built for; the best one this CPU has runs,
// unless set_cpu_level picks a lower one (tests check every level against LibTorch).
enum class CpuLevel { kBaseline, kAvx2, kAvx512 };  // x86-64 (v1), x86-64-v3, x86-64-v4
CpuLevel best_cpu_level();
CpuLevel cpu_level();
void set_cpu_level(CpuLevel level);  // throws std::invalid_argument above best_cpu_level()
const char* cpu_level_name(CpuLevel level);

// (batch, head) pairs n in [first, last), n = b·heads + h.
void attention_forward(const AttentionDims& dims, const float* q, const float* k, const float* v, float* out,
                       float* probs, int64_t first, int64_t last);

void attention_backward(const AttentionDims& dims, const float* q, const float* k, const float* v, const float* probs,
                        const float* dout, float* dq, float* dk, float* dv, int64_t first, int64_t last);

}  // namespace quintnet::exec::kernels
