#pragma once
// Cross-entropy over a large vocabulary without an fp32 copy of the logits.
//
// Why: GPT-2's last stage produced [8, 1024, 50257] logits — in bf16 under autocast —
// and turned them into fp32 (1.6 GB) before LibTorch's cross-entropy, whose log-softmax
// wrote another 1.6 GB forward and its gradient another backward.  Here the logits stay
// in the dtype they were computed in; a block of rows at a time is upcast to fp32, its
// log-sum-exp kept ([N] floats), and the backward recomputes softmax - onehot block by
// block straight into the gradient, in the logits' dtype.  The fp32 scratch is one block.
#include <torch/torch.h>

namespace quintnet::exec {

// Σ over rows of -log softmax(logits[i])[targets[i]], fp32; rows whose target is < 0 count 0.
// logits [N, V] (any floating dtype), targets [N] (int64).  Differentiable in logits.
torch::Tensor chunked_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets);

// Rows per block: about 2^26 elements on a GPU (few, large kernels), 2^22 on the CPU
// (a block that fits in the caches).
int64_t cross_entropy_block_rows(const torch::Tensor& logits);

}  // namespace quintnet::exec
