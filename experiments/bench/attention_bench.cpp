// The attention core, forward + backward, on the shapes QuintNet trains on CPUs: the
// fused kernel (exec/kernels/attention_cpu) against the composition LibTorch offers
// (matmul, softmax, matmul: what the models ran before), in the same process.
//   build/bin/attention_bench [--benchmark_filter=ViT]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "exec/models/attention.h"

namespace {

using quintnet::exec::attention_core;
using quintnet::exec::attention_reference;

// shape: batch, tokens, heads, head_dim, causal
void run(benchmark::State& state, bool fused, int64_t b, int64_t t, int64_t h, int64_t d, bool causal) {
  torch::set_num_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(1);
  const torch::Tensor qkv = torch::randn({b, t, 3 * h * d}).requires_grad_(true);
  const torch::Tensor upstream = torch::randn({b, t, h, d});
  for (auto _ : state) {
    auto parts = qkv.chunk(3, -1);
    auto heads = [&](const torch::Tensor& y) { return y.view({b, t, h, d}); };
    torch::Tensor out = fused ? attention_core(heads(parts[0]), heads(parts[1]), heads(parts[2]), causal)
                              : attention_reference(heads(parts[0]), heads(parts[1]), heads(parts[2]), causal);
    out.backward(upstream);
    benchmark::DoNotOptimize(qkv.grad().data_ptr());
  }
  state.counters["heads/s"] = benchmark::Counter(static_cast<double>(b * h), benchmark::Counter::kIsIterationInvariantRate);
}

// The ViT of the original config: micro-batch 16, 50 tokens, 4 heads of 16.
void ViT_Fused(benchmark::State& s) { run(s, true, 16, 50, 4, 16, false); }
void ViT_Reference(benchmark::State& s) { run(s, false, 16, 50, 4, 16, false); }
// The Brown-corpus GPT-2: micro-batch 8, 64 tokens, 4 heads of 16, causal.
void Gpt2Brown_Fused(benchmark::State& s) { run(s, true, 8, 64, 4, 16, true); }
void Gpt2Brown_Reference(benchmark::State& s) { run(s, false, 8, 64, 4, 16, true); }
// GPT-2 124M's heads (64 wide) on a short sequence.
void Gpt2Heads64_Fused(benchmark::State& s) { run(s, true, 2, 128, 12, 64, true); }
void Gpt2Heads64_Reference(benchmark::State& s) { run(s, false, 2, 128, 12, 64, true); }

}  // namespace

BENCHMARK(ViT_Fused)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(ViT_Reference)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Brown_Fused)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Brown_Reference)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Heads64_Fused)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Heads64_Reference)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
