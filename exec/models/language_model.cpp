#include "exec/models/language_model.h"

#include "exec/models/chunked_cross_entropy.h"

namespace quintnet::exec {

LanguageModel::LanguageModel(int vocab_size, int layers, const TpContext& tp, StageRange range)
    : vocab_size_(vocab_size), layers_(layers), tp_(tp), range_(range) {
  if (range_.end_block < 0) range_.end_block = layers;
}

torch::Tensor LanguageModel::token_loss(const torch::Tensor& local_logits, const torch::Tensor& targets) {
  const int64_t v = local_logits.size(-1);
  const torch::Tensor flat_targets = targets.reshape({-1});
  const torch::Tensor counted = (flat_targets >= 0).sum().clamp_min(1);
  // The whole vocabulary is here: the blocked cross-entropy, on the logits as computed
  // (bf16 under autocast): no fp32 copy of [tokens, vocab] (exec/models/chunked_cross_entropy.h).
  if (tp_.size() == 1) return chunked_cross_entropy_sum(local_logits.reshape({-1, v}), flat_targets) / counted;
  torch::Tensor per_token = vocab_parallel_cross_entropy(local_logits.to(torch::kFloat32).reshape({-1, v}), flat_targets,
                                                         head()->shard().first, tp_);
  return per_token.sum() / counted;
}

StageLoss LanguageModel::loss(const torch::Tensor& local_logits, const torch::Tensor& targets) {
  return {token_loss(local_logits, targets), torch::zeros({}, torch::TensorOptions().device(local_logits.device())),
          static_cast<double>(targets.size(0))};
}

torch::Tensor LanguageModel::full_logits(const torch::Tensor& local_logits) {
  if (tp_.size() == 1) return local_logits;
  // Equal widths for the gather: pad each slice to the shard's rows, then cut the padding.
  const VocabShard& s = head()->shard();
  torch::Tensor padded = torch::constant_pad_nd(local_logits.detach(), {0, s.rows - s.valid});
  return tp_.comm->all_gather(*tp_.group, padded, -1).narrow(-1, 0, vocab_size_);
}

}  // namespace quintnet::exec
