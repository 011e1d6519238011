#pragma once
// A Llama-3-style decoder: token embedding, pre-norm layers of RMSNorm → grouped-query
// attention with rotary positions → RMSNorm → SwiGLU MLP, a final RMSNorm and an
// untied output head; no biases, no dropout.  Parameter names follow Hugging Face's
// LlamaForCausalLM (embed_tokens, layers3.self_attn.q_proj, ..., norm, lm_head), so its
// checkpoints map name for name (load_hf_llama).
//
// Tensor parallel by construction, as GPT-2: query heads split across the tp group
// (q_proj column-parallel, o_proj row-parallel), the key/value heads split where tp
// divides them and otherwise held whole, each rank computing the one its query heads
// read (KeyValueParallelLinear), SwiGLU's gate and up column-parallel and down
// row-parallel, the embedding and the head vocabulary-parallel with the
// vocabulary-parallel cross-entropy.  With tp = 1 it is the serial model.  A Llama can
// hold a range of layers only (a pipeline stage): the embedding on the stage with layer 0,
// the final norm and the head on the stage with the last.
#include <torch/torch.h>

#include "core/plan.h"
#include "exec/models/language_model.h"
#include "exec/models/serial_state.h"
#include "exec/tp/parallel_linear.h"
#include "exec/tp/vocab_parallel.h"

namespace quintnet::exec {

// y = x / sqrt(mean(x²) + eps) · weight, computed in fp32 and cast back (as Hugging Face's).
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// The rotary embedding's frequencies [d/2] (fp32) of a head of width d: theta^(-2i/d),
// with Llama 3.1's scaling where the config asks for it.
torch::Tensor rotary_frequencies(int64_t d, double theta, const core::RopeScaling& scaling = {},
                                 torch::Device device = torch::kCPU);
// Rotary position embedding of q or k [B, T, H, d] at `positions` ([T], fp32): each
// feature pair (i, i + d/2) rotated by position × inv_freq[i] (Hugging Face's
// rotate_half layout).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& inv_freq, const torch::Tensor& positions);
// The same at positions first_position .. first_position + T − 1.
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& inv_freq, int64_t first_position = 0);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  LlamaAttentionImpl(const core::LlamaConfig& c, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);  // causal self-attention
  // Generation: x holds only the new tokens; their keys and values (the key/value heads,
  // not repeated: GQA's smaller cache) join `cache`'s layer `layer`.
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, int layer);
  std::vector<torch::Tensor> partial_gradient_parameters();  // k and v where held whole
  // Context parallelism: x holds this cp rank's two chunks; attention runs the ring.
  void use_context_parallel(const CpContext& cp) { cp_ = cp; }

 private:
  torch::Tensor repeat_for_queries(const torch::Tensor& kv) const;
  CpContext cp_;
  int64_t local_heads_, head_dim_;
  double rope_theta_;
  core::RopeScaling rope_scaling_;
  ColumnParallelLinear q_{nullptr};
  KeyValueParallelLinear k_{nullptr}, v_{nullptr};
  RowParallelLinear o_{nullptr};
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  LlamaMlpImpl(const core::LlamaConfig& c, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);  // down(silu(gate(x)) · up(x))

 private:
  ColumnParallelLinear gate_{nullptr}, up_{nullptr};
  RowParallelLinear down_{nullptr};
};
TORCH_MODULE(LlamaMlp);

class LlamaLayerImpl : public torch::nn::Module {
 public:
  LlamaLayerImpl(const core::LlamaConfig& c, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, int layer);  // generation
  LlamaAttention& attention() { return attn_; }

 private:
  RmsNorm input_norm_{nullptr}, post_attention_norm_{nullptr};
  LlamaAttention attn_{nullptr};
  LlamaMlp mlp_{nullptr};
};
TORCH_MODULE(LlamaLayer);

class LlamaImpl : public LanguageModel {
 public:
  LlamaImpl(const core::LlamaConfig& config, const TpContext& tp, StageRange range = {});

  // First stage: token ids [B, T] -> hidden [B, T, D]; middle: hidden -> hidden; last
  // stage: -> this rank's logits [B, T, V_local] (its vocabulary slice).
  torch::Tensor forward(const torch::Tensor& input) override;
  torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache) override;
  std::shared_ptr<StageModel> make_stage(const TpContext& tp, StageRange range) const override;
  std::vector<torch::Tensor> partial_gradient_parameters() override;
  std::vector<torch::Tensor> tied_parameters() override;  // the embedding, when tied to the head
  void use_context_parallel(const CpContext& cp) override;
  const core::LlamaConfig& config() const { return config_; }

 private:
  core::LlamaConfig config_;
  const VocabParallelEmbedding& head() const override { return head_; }
  VocabParallelEmbedding embed_{nullptr};
  std::vector<LlamaLayer> layers_;
  RmsNorm norm_{nullptr};
  // lm_head, a vocabulary-parallel weight of its own; tied: embed_ itself (registered once)
  VocabParallelEmbedding head_{nullptr};
};
TORCH_MODULE(Llama);

// Hugging Face Llama checkpoints (model.safetensors of a LlamaForCausalLM: "model.layers.3.
// self_attn.q_proj.weight", ..., "lm_head.weight"; without lm_head — tied embeddings —
// the head starts as a copy of the embedding).  Loads straight into `model`'s shards: a
// rank reads only its slices.  A config.json beside the file must describe the plan's
// model.  Throws core::UserError for a missing tensor, a wrong shape, a mismatched config.
void load_hf_llama(Llama& model, const std::string& safetensors_path);
// The serial state of a Llama in Hugging Face's names (every tensor F32), and its config.json.
SerialState to_hf_llama(const SerialState& serial, const core::LlamaConfig& config);
std::string hf_llama_config_json(const core::LlamaConfig& config);

}  // namespace quintnet::exec
