#pragma once
// The attention core shared by the ViT and GPT-2: softmax(q kᵀ / √d) v over each
// head, optionally causal, with dropout on the attention weights.
//
// q, k, v: [B, T, H, d] (views of a projection's output reshaped into heads; no
// transpose needed).  Returns [B, T, H, d], contiguous, so reshape({B, T, H·d}) is free.
//
// On the CPU without attention dropout, fp32 or bf16 (upcast to fp32: autocast), the
// fused kernel of exec/kernels/attention_cpu runs (forward and backward; one pass per
// head); with LibTorch 2.x, its scaled_dot_product_attention on CUDA (with attention
// dropout too: flash / memory-efficient kernels) and for heads 64 wide or more on the
// CPU without dropout (faster there, measured); anything else (dropout on the CPU,
// CUDA on 1.13) the composition of matmul, softmax and matmul.
// Both compute the same function; the test AttentionCore.* holds them together.
//
// Selective activation recomputation (plan `recompute: selective`, switched on by a
// RecomputeScope: exec/models/recompute.h): attention_core keeps only q, k and v for the
// backward — not the [B, H, T, T] softmax and dropout mask, the activations that grow
// with the sequence squared — and its backward computes them again (the same dropout
// masks: the generator's state is kept).  LibTorch 2.x's SDPA never keeps them, so it
// has nothing to recompute.
#include <torch/torch.h>

namespace quintnet::exec {

// Attention cores whose softmax this process computed again in a backward so far.
long attention_cores_recomputed();

torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                             double dropout = 0.0, bool training = false);

// The composition, always (the reference the fused kernel is tested against).
torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                                  double dropout = 0.0, bool training = false);

// LibTorch 2.x's scaled_dot_product_attention, in the same layout; `dropout` on the
// attention weights (its own mask: SDPA draws it inside the kernel).  Only where
// sdpa_available(): the version check lives in attention.cpp.
bool sdpa_available();
torch::Tensor attention_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                             double dropout = 0.0);

}  // namespace quintnet::exec
