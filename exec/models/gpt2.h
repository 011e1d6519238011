#pragma once
// GPT-2 (the original QuintNet's second model): learned positions, pre-LN blocks,
// GELU (tanh) MLP, final LayerNorm, output head tied to the token embedding.
//
// Tensor parallel by construction: the heads are split across the tp group (the fused
// q/k/v projection is one QkvParallelLinear, the output projection row-parallel), the
// MLP is column → row, the token embedding is vocabulary-parallel and so is the tied
// head; the loss is the vocabulary-parallel cross-entropy (no rank holds full logits).
// With tp = 1 it is the serial model.  A Gpt2 can hold a range of blocks only (a
// pipeline stage): token and position embeddings on the stage with block 0, the final
// LayerNorm and the head on the stage with the last block.  When those are different
// stages, both hold the tied embedding ("wte.weight"), kept equal by all-reducing its
// gradient between them.
//
// Dropout (attn_pdrop on the attention weights, embd_pdrop on the embeddings,
// resid_pdrop on each residual branch) in training mode only.  The residual stream is
// replicated over the tp group, so its masks must be the same on every tp rank: they
// are, because the ranks of a tp group draw from identically seeded generators in the
// same order (the trainer seeds every rank alike and their shards have equal shapes).
// The attention-weight masks of different ranks' heads are therefore equal too — still
// Bernoulli per element, but correlated across tp ranks (Megatron-LM draws those from a
// separate per-rank generator; not done here).  The equivalence tests run without dropout.
#include <torch/torch.h>

#include "core/plan.h"
#include "exec/models/language_model.h"
#include "exec/models/serial_state.h"
#include "exec/precision/layer_norm.h"
#include "exec/tp/parallel_linear.h"
#include "exec/tp/vocab_parallel.h"

namespace quintnet::exec {

class Gpt2AttentionImpl : public torch::nn::Module {
 public:
  Gpt2AttentionImpl(int64_t dim, int64_t heads, double attn_pdrop, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);  // causal self-attention
  // Generation: x holds only the new tokens; their keys and values join `cache`'s layer `layer`.
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, int layer);
  // Context parallelism: x holds this cp rank's two chunks; attention runs the ring.
  void use_context_parallel(const CpContext& cp) { cp_ = cp; }

 private:
  CpContext cp_;
  int64_t local_heads_, head_dim_;
  double attn_pdrop_;
  QkvParallelLinear qkv_{nullptr};
  RowParallelLinear proj_{nullptr};
};
TORCH_MODULE(Gpt2Attention);

class Gpt2BlockImpl : public torch::nn::Module {
 public:
  Gpt2BlockImpl(const core::Gpt2Config& c, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, int layer);  // generation (no dropout)
  Gpt2Attention& attention() { return attn_; }

 private:
  torch::Tensor mlp(const torch::Tensor& h);  // fc, GeLU, proj
  double resid_pdrop_;
  LayerNorm ln1_{nullptr}, ln2_{nullptr};
  Gpt2Attention attn_{nullptr};
  ColumnParallelLinear fc_{nullptr};
  RowParallelLinear proj_{nullptr};
};
TORCH_MODULE(Gpt2Block);

class Gpt2Impl : public LanguageModel {
 public:
  Gpt2Impl(const core::Gpt2Config& config, const TpContext& tp, StageRange range = {});

  // First stage: token ids [B, T] -> hidden [B, T, D]; middle: hidden -> hidden; last
  // stage: -> this rank's logits [B, T, V_local] (its vocabulary slice).
  torch::Tensor forward(const torch::Tensor& input) override;
  torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache) override;
  std::shared_ptr<StageModel> make_stage(const TpContext& tp, StageRange range) const override;
  std::vector<torch::Tensor> tied_parameters() override;
  std::vector<torch::Tensor> partial_gradient_parameters() override;
  // Context parallelism: this rank's two chunks of every sequence (their position rows,
  // ring attention); the plan's validation keeps attn_pdrop 0 with it.
  void use_context_parallel(const CpContext& cp) override;
  VocabParallelEmbedding& wte() { return wte_; }
  const core::Gpt2Config& config() const { return config_; }

 private:
  core::Gpt2Config config_;
  const VocabParallelEmbedding& head() const override { return wte_; }  // tied: the embedding's shard
  CpContext cp_;
  VocabParallelEmbedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  std::vector<Gpt2Block> blocks_;
  LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(Gpt2);

// Hugging Face GPT-2 checkpoints (model.safetensors): names "h.3.attn.c_attn.weight" or
// "transformer.h.3...", Conv1D weights stored [in, out] (transposed relative to a
// Linear).  Loads straight into `model`'s shards: a rank reads only its slices.
// Throws core::UserError for a missing tensor, a wrong shape or dtype, a truncated file.
void load_hf_gpt2(Gpt2& model, const std::string& safetensors_path);
// The serial state of a GPT-2 in Hugging Face's names and layout (every tensor F32).
SerialState to_hf_gpt2(const SerialState& serial, const core::Gpt2Config& config);

}  // namespace quintnet::exec
