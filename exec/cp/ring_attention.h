#pragma once
// Ring attention (Liu et al. 2023; Megatron-LM's context parallelism): causal attention
// over a sequence split across the cp group (exec/cp/context_parallel.h), without any
// rank ever holding the whole sequence's keys and values.
//
// Forward: the key/value block of each rank travels once around the ring (cp − 1
// hops).  At every step a rank attends its queries to the block it holds while the block
// moves on, and folds the result into its running output with the online softmax
// (running log-sum-exp per query), so the result equals softmax(q kᵀ/√d) v over all
// keys.  Chunk pairs the causal mask hides entirely are skipped; the chunk on the
// diagonal is masked; the others attend fully.
//
// Backward: the blocks travel the ring again, now with their gradients: each rank adds
// its queries' share of dK and dV to the block it holds before passing it on, and after
// one last hop every block's dK, dV are home.  The forward keeps only q, k, v, the
// output and the log-sum-exp (as FlashAttention does), never the [T, T] weights.
//
// Grouped-query attention: the blocks travel with their key/value heads only; each is
// repeated for its query heads where it is used.  Computed in fp32 (bf16 inputs are
// upcast: the online softmax's sums need it).
#include <torch/torch.h>

#include "exec/cp/context_parallel.h"

namespace quintnet::exec {

// q [B, T, H, d], k and v [B, T, KV, d]: this rank's 2 chunks of the sequence, rotary
// positions applied; H a multiple of KV.  Returns [B, T, H, d] in q's dtype, contiguous.
torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const CpContext& cp);

}  // namespace quintnet::exec
