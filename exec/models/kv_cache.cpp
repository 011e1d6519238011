#include "exec/models/kv_cache.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace quintnet::exec {

std::pair<torch::Tensor, torch::Tensor> KvCache::append(int layer, const torch::Tensor& k, const torch::Tensor& v) {
  Layer& l = layers_.at(static_cast<size_t>(layer));
  const int64_t t = k.size(1);
  if (length_ + t > capacity_)
    throw core::UserError("generation: " + std::to_string(length_ + t) + " tokens do not fit the model's " +
                          std::to_string(capacity_) + " positions");
  if (!l.k.defined()) {  // allocated once, at the first append: the batch and heads are known then
    l.k = torch::empty({k.size(0), capacity_, k.size(2), k.size(3)}, k.options());
    l.v = torch::empty({v.size(0), capacity_, v.size(2), v.size(3)}, v.options());
  }
  l.k.narrow(1, length_, t).copy_(k);
  l.v.narrow(1, length_, t).copy_(v);
  return {l.k.narrow(1, 0, length_ + t), l.v.narrow(1, 0, length_ + t)};
}

torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t offset) {
  const int64_t t = q.size(1), total = k.size(1);
  // [B, T, H, d] -> [B, H, T, d], the 1/√d scale on q as attention_core's composition.
  const torch::Tensor qh = q.transpose(1, 2) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));
  torch::Tensor scores = torch::matmul(qh, k.transpose(1, 2).transpose(-2, -1));  // [B, H, t, total]
  if (t > 1) {  // (a single new token sees every cached one: no mask)
    const auto opts = torch::TensorOptions().dtype(torch::kLong).device(q.device());
    const torch::Tensor future = torch::arange(total, opts).unsqueeze(0) > (torch::arange(t, opts) + offset).unsqueeze(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  return torch::matmul(torch::softmax(scores, -1), v.transpose(1, 2)).transpose(1, 2).contiguous();
}

}  // namespace quintnet::exec
