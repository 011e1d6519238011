#pragma once
// The Vision Transformer of the original QuintNet configs (img_size, patch_size,
// hidden_dim, in_channels, n_heads, depth): patch embedding, class token, learned
// positions, pre-LN blocks, final LayerNorm, linear head on the class token.
//
// Tensor parallel by construction: attention heads are split across the tp group
// (q, k, v column-parallel, output projection row-parallel) and the MLP is
// column → row.  With tp = 1 it is the serial model.  A ViT can hold a range of
// blocks only (a pipeline stage): the embedding lives on the stage with block 0, the
// head on the stage with the last block.
#include <torch/torch.h>

#include <map>
#include <string>

#include "core/plan.h"
#include "exec/tp/parallel_linear.h"

namespace quintnet::exec {

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t dim, int64_t heads, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t local_heads_, head_dim_;
  ColumnParallelLinear q_{nullptr}, k_{nullptr}, v_{nullptr};
  RowParallelLinear out_{nullptr};
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t dim, int64_t hidden, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  ColumnParallelLinear fc1_{nullptr};
  RowParallelLinear fc2_{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t dim, int64_t heads, int64_t mlp_hidden, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  Attention attn_{nullptr};
  Mlp mlp_{nullptr};
};
TORCH_MODULE(Block);

// Which part of the model this instance holds.
struct StageRange {
  int first_block = 0;
  int end_block = -1;  // one past the last block; -1 = all
  bool has_embedding() const { return first_block == 0; }
};

class ViTImpl : public torch::nn::Module {
 public:
  ViTImpl(const core::ModelConfig& config, const TpContext& tp, StageRange range = {});

  // First stage: images [B, C, H, W] -> hidden [B, T, D]; middle: hidden -> hidden;
  // last stage: -> logits [B, classes].  A whole model maps images to logits.
  torch::Tensor forward(const torch::Tensor& input);

  bool has_head() const { return range_.end_block == config_.depth; }
  const core::ModelConfig& config() const { return config_; }

 private:
  core::ModelConfig config_;
  StageRange range_;
  torch::nn::Linear patch_proj_{nullptr};
  torch::Tensor cls_token_, pos_embed_;
  std::vector<Block> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(ViT);

// Serial (unsharded) parameters by name, e.g. "block3.attn.q.weight" -> [D, D].
using SerialState = std::map<std::string, torch::Tensor>;

// Parameter name -> the dimension tensor parallelism splits it along, for every
// parameter of a column- or row-parallel layer (replicated parameters are absent).
std::map<std::string, int> tp_shard_dims(torch::nn::Module& model);

// Copies this rank's shard of every parameter of `model` out of a serial state:
// column-parallel weights split along dim 0, row-parallel along dim 1, the rest whole.
// Throws core::UserError naming a missing tensor or a wrong shape.
void load_serial_state(torch::nn::Module& model, const SerialState& state, const TpContext& tp);
// The serial parameters of `model`, gathering shards over the tp group.
SerialState gather_serial_state(torch::nn::Module& model, const TpContext& tp);

}  // namespace quintnet::exec
