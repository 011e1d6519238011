#pragma once
// What the language models (GPT-2, Llama) share as pipeline stages: the embedding on the
// stage with layer 0, the head on the stage with the last, the head's logits vocabulary-
// parallel (each tp rank holds its slice of the vocabulary: GPT-2's tied embedding,
// Llama's own lm_head) and from them the mean token cross-entropy and, for generation
// and tests, the full logits; generation through a KV cache.
#include <torch/torch.h>

#include "core/plan.h"
#include "exec/models/kv_cache.h"
#include "exec/models/stage_model.h"
#include "exec/models/stage_range.h"
#include "exec/tp/vocab_parallel.h"

namespace quintnet::exec {

class LanguageModel : public StageModel {
 public:
  // vocab_size: the vocabulary the full logits cover; layers: the model's (a stage's range
  // reaching the last holds the head).
  LanguageModel(int vocab_size, int layers, const TpContext& tp, StageRange range);

  // Mean cross-entropy over the targets >= 0, from the last stage's local logits [B, T, V_local].
  torch::Tensor token_loss(const torch::Tensor& local_logits, const torch::Tensor& targets);
  StageLoss loss(const torch::Tensor& local_logits, const torch::Tensor& targets) override;
  // The full logits [B, T, V] (all-gathered over tp): for generation and tests, not for training.
  torch::Tensor full_logits(const torch::Tensor& local_logits);
  // Generation on the whole model: the new tokens' ids [B, t] after cache.length() cached
  // ones -> the full logits of the last of them [B, V]; their keys and values join the cache.
  virtual torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache) = 0;

  bool has_embedding() const { return range_.has_embedding(); }
  bool has_head() const { return range_.end_block == layers_; }
  int layers() const { return layers_; }
  const TpContext& tp() const { return tp_; }

 protected:
  // The vocabulary-parallel weight whose logits() is the head (on the last stage).
  virtual const VocabParallelEmbedding& head() const = 0;

  int vocab_size_, layers_;
  TpContext tp_;
  StageRange range_;
};

}  // namespace quintnet::exec
