// Generation with and without the KV cache (exec/models/kv_cache.h), in the same process:
// 256 new tokens, greedy, after a 16-token prompt, on GPT-2 124M (random weights: the
// time does not depend on them) and on a Llama of the same width (12 layers, hidden 768,
// 12 query heads sharing 4 key/value heads, SwiGLU 2,048, vocabulary 50,257).  Without the
// cache every token runs the whole context again (quintnet generate --no-kv-cache); with
// it, only the new token.  Reports tokens/s; docs/LLAMA.md has the table.
//   build/bin/generation_bench [--benchmark_filter=Gpt2]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <functional>

#include "exec/models/gpt2.h"
#include "exec/models/kv_cache.h"
#include "exec/models/llama.h"

namespace {

namespace exec = quintnet::exec;
namespace core = quintnet::core;

constexpr int kPrompt = 16, kNew = 256;

core::Gpt2Config gpt2_124m() {
  core::Gpt2Config c;
  c.attn_pdrop = c.embd_pdrop = c.resid_pdrop = 0.0;  // GPT-2 124M's sizes are the defaults
  return c;
}

core::LlamaConfig llama_124m_width() {
  core::LlamaConfig c;  // GPT-2 124M's width, depth, vocabulary and positions are the defaults
  c.num_key_value_heads = 4, c.intermediate_size = 2048;
  return c;
}

using Step = std::function<torch::Tensor(const torch::Tensor&, exec::KvCache&)>;

void generate(benchmark::State& state, const Step& step, int layers, bool cached) {
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    std::vector<int64_t> ids(kPrompt, 464);
    exec::KvCache cache(layers, 1024);
    for (int i = 0; i < kNew; ++i) {
      torch::Tensor logits;
      if (cached) {
        logits = step(torch::tensor(std::vector<int64_t>(ids.begin() + cache.length(), ids.end())).unsqueeze(0), cache);
      } else {
        exec::KvCache fresh(layers, 1024);
        logits = step(torch::tensor(ids).unsqueeze(0), fresh);
      }
      ids.push_back(logits[0].argmax().item<int64_t>());
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(kNew) * state.iterations(), benchmark::Counter::kIsRate);
}

void Gpt2(benchmark::State& state) {
  torch::manual_seed(1);
  exec::Gpt2 model(gpt2_124m(), exec::TpContext{});
  model->eval();
  generate(state, [&](const torch::Tensor& ids, exec::KvCache& c) { return model->forward_cached(ids, c); }, 12,
           state.range(0) == 1);
}

void Llama(benchmark::State& state) {
  torch::manual_seed(1);
  exec::Llama model(llama_124m_width(), exec::TpContext{});
  model->eval();
  generate(state, [&](const torch::Tensor& ids, exec::KvCache& c) { return model->forward_cached(ids, c); }, 12,
           state.range(0) == 1);
}

}  // namespace

// Arg: 1 with the KV cache, 0 without.  One iteration each: uncached takes about a minute.
BENCHMARK(Gpt2)->Arg(1)->Arg(0)->ArgName("kv_cache")->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(Llama)->Arg(1)->Arg(0)->ArgName("kv_cache")->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
