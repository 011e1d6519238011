#pragma once
// The Vision Transformer of the original QuintNet configs (img_size, patch_size,
// hidden_dim, in_channels, n_heads, depth): patch embedding, class token, learned
// positions, pre-LN blocks, final LayerNorm, linear head on the class token.
//
// Tensor parallel by construction: attention heads are split across the tp group
// (one fused q/k/v column-parallel layer, output projection row-parallel) and the MLP
// is column → row.  With tp = 1 it is the serial model.  A ViT can hold a range of
// blocks only (a pipeline stage): the embedding lives on the stage with block 0, the
// head on the stage with the last block.
#include <torch/torch.h>

#include <string>

#include "core/plan.h"
#include "exec/models/serial_state.h"
#include "exec/models/stage_model.h"
#include "exec/models/stage_range.h"
#include "exec/precision/layer_norm.h"
#include "exec/tp/parallel_linear.h"

namespace quintnet::exec {

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t dim, int64_t heads, const TpContext& tp);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t local_heads_, head_dim_;
  QkvParallelLinear qkv_{nullptr};
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
  LayerNorm ln1_{nullptr}, ln2_{nullptr};
  Attention attn_{nullptr};
  Mlp mlp_{nullptr};
};
TORCH_MODULE(Block);

class ViTImpl : public StageModel {
 public:
  ViTImpl(const core::VitConfig& config, const TpContext& tp, StageRange range = {});

  // First stage: images [B, C, H, W] -> hidden [B, T, D]; middle: hidden -> hidden;
  // last stage: -> logits [B, classes].  A whole model maps images to logits.
  torch::Tensor forward(const torch::Tensor& input) override;
  // Cross-entropy of the class logits; correct = samples classified right.
  StageLoss loss(const torch::Tensor& logits, const torch::Tensor& labels) override;
  std::shared_ptr<StageModel> make_stage(const TpContext& tp, StageRange range) const override;
  std::vector<torch::Tensor> partial_gradient_parameters() override;

  bool has_head() const { return range_.end_block == config_.depth; }
  const core::VitConfig& config() const { return config_; }

 private:
  core::VitConfig config_;
  TpContext tp_;
  StageRange range_;
  torch::nn::Linear patch_proj_{nullptr};
  torch::Tensor cls_token_, pos_embed_;
  std::vector<Block> blocks_;
  LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(ViT);

}  // namespace quintnet::exec
