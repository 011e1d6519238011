// Generation with a KV cache: at every step of a greedy decode, the cached forward pass
// (the new token alone, attending over the cached keys and values) gives the logits the
// whole-context forward pass gives, for GPT-2 and the Llama (rotary positions offset by
// the cache, grouped-query heads cached once); a prompt of several tokens goes through in
// one step (the causal mask offset by what is cached) and the cache refuses to overflow.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "exec/models/gpt2.h"
#include "exec/models/kv_cache.h"
#include "exec/models/llama.h"

namespace {

namespace exec = quintnet::exec;
namespace core = quintnet::core;

core::Gpt2Config tiny_gpt2() {
  core::Gpt2Config c;
  c.vocab_size = 97, c.n_positions = 32, c.n_embd = 32, c.n_layer = 3, c.n_head = 4, c.n_inner = 64;
  c.attn_pdrop = c.embd_pdrop = c.resid_pdrop = 0.0;
  return c;
}

core::LlamaConfig tiny_llama() {
  core::LlamaConfig c;
  c.vocab_size = 97, c.max_position_embeddings = 32, c.hidden_size = 32, c.num_hidden_layers = 3;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.intermediate_size = 64, c.rope_theta = 10000.0;
  return c;
}

// Decodes 12 tokens after a 5-token prompt both ways: the cached forward pass against the
// whole context's last logits; returns the largest relative difference.
double decode_difference(exec::LanguageModel& model) {
  model.eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  torch::Tensor ids = torch::randint(0, 97, {1, 5});
  exec::KvCache cache(model.layers(), 32);
  torch::Tensor fresh = ids;
  double worst = 0;
  for (int step = 0; step < 12; ++step) {
    const torch::Tensor expected = model.full_logits(model.forward(ids))[0][-1];
    const torch::Tensor got = model.forward_cached(fresh, cache)[0];
    worst = std::max(worst, (got - expected).abs().max().item<double>() / expected.abs().max().item<double>());
    const torch::Tensor next = expected.argmax().reshape({1, 1});
    ids = torch::cat({ids, next}, 1);
    fresh = next;
  }
  EXPECT_EQ(cache.length(), 5 + 11);
  return worst;
}

}  // namespace

TEST(KvCache, Gpt2CachedLogitsEqualTheWholeContextsAtEveryStep) {
  torch::manual_seed(1);
  exec::Gpt2 model(tiny_gpt2(), exec::TpContext{});
  EXPECT_LT(decode_difference(*model), 1e-5);
}

TEST(KvCache, LlamaCachedLogitsEqualTheWholeContextsAtEveryStep) {
  torch::manual_seed(2);
  exec::Llama model(tiny_llama(), exec::TpContext{});
  EXPECT_LT(decode_difference(*model), 1e-5);
  // The negative control: rotary positions not offset by the cache give other logits.
  torch::NoGradGuard no_grad;
  exec::KvCache cache(3, 32);
  const torch::Tensor ids = torch::randint(0, 97, {1, 6});
  model->forward_cached(ids.narrow(1, 0, 5), cache);
  const torch::Tensor right = model->forward_cached(ids.narrow(1, 5, 1), cache);
  exec::KvCache empty(3, 32);
  const torch::Tensor at_zero = model->forward_cached(ids.narrow(1, 5, 1), empty);
  EXPECT_GT((right - at_zero).abs().max().item<double>(), 1e-3);
}

TEST(KvCache, RefusesTokensBeyondItsCapacity) {
  exec::KvCache cache(1, 4);
  const torch::Tensor k = torch::zeros({1, 3, 2, 8});
  cache.append(0, k, k);
  cache.advance(3);
  EXPECT_THROW(cache.append(0, k, k), quintnet::core::UserError);
}
