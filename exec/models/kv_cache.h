#pragma once
// The key/value cache of generation: each layer's keys and values of the tokens seen so
// far (this tp rank's heads), so a new token's forward pass computes only its own q, k
// and v and attends over the cache — one token's work per step instead of the whole
// context's.  The caller (exec/generate/) owns the cache; the models' forward_cached
// fill it.
#include <torch/torch.h>

#include <vector>

namespace quintnet::exec {

class KvCache {
 public:
  // Room for `capacity` tokens (the model's longest sequence).
  KvCache(int layers, int64_t capacity) : layers_(static_cast<size_t>(layers)), capacity_(capacity) {}

  int64_t length() const { return length_; }  // tokens cached
  int64_t capacity() const { return capacity_; }
  // Appends layer `layer`'s new keys and values [B, t, H, d] at positions length() ..
  // length() + t - 1 and returns all of them so far; advance() moves length() on once
  // every layer has appended.
  std::pair<torch::Tensor, torch::Tensor> append(int layer, const torch::Tensor& k, const torch::Tensor& v);
  void advance(int64_t tokens) { length_ += tokens; }

 private:
  struct Layer {
    torch::Tensor k, v;  // [B, capacity, H, d], filled up to length()
  };
  std::vector<Layer> layers_;
  int64_t capacity_, length_ = 0;
};

// Causal attention of new queries q [B, t, H, d] at positions offset .. offset + t - 1
// over keys and values [B, offset + t, H, d]: query i sees keys 0 .. offset + i.
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t offset);

}  // namespace quintnet::exec
