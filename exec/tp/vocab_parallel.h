#pragma once
// The vocabulary split across the tensor-parallel group (Megatron-LM's scheme).
//
// The vocabulary is padded to a multiple of tp; rank r holds rows [r·Vp/tp, (r+1)·Vp/tp)
// of the embedding, the padding rows (on the last ranks) only as zeros that no token
// reaches.  The same shard is the tied output head: each rank computes the logits of
// its own vocabulary slice, and the cross-entropy combines the slices with three
// all-reduces of one number per token (max, sum of exponentials, target logit) —
// full logits are never gathered.
#include <torch/torch.h>

#include "exec/tp/tp_ops.h"

namespace quintnet::exec {

struct VocabShard {
  int64_t first = 0;  // global id of this rank's first row
  int64_t rows = 0;   // rows held, padding included (the same on every rank)
  int64_t valid = 0;  // of them, real vocabulary entries
};
VocabShard vocab_shard(int64_t vocab, const TpContext& tp);

class VocabParallelEmbeddingImpl : public torch::nn::Module {
 public:
  VocabParallelEmbeddingImpl(int64_t vocab, int64_t dim, const TpContext& tp);
  // ids [B, T] -> [B, T, dim], the same on every tp rank (all-reduced).
  torch::Tensor forward(const torch::Tensor& ids);
  // This rank's logits [.., valid] for hidden states h [.., dim]: the tied head.
  torch::Tensor logits(const torch::Tensor& h);
  const VocabShard& shard() const { return shard_; }
  int64_t vocab() const { return vocab_; }  // the real vocabulary size

  torch::Tensor weight;  // [rows, dim]

 private:
  TpContext tp_;
  int64_t vocab_;
  VocabShard shard_;
};
TORCH_MODULE(VocabParallelEmbedding);

// Per-token cross-entropy [N] from this rank's logits [N, valid] (vocabulary columns
// from `first`) and global target ids [N]; targets < 0 (ignored) give 0.  Equal on
// every tp rank; the gradient flows to each rank's own logits.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& targets,
                                           int64_t first, const TpContext& tp);

}  // namespace quintnet::exec
