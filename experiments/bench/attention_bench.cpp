// The attention core, forward + backward, on the shapes QuintNet trains on CPUs: the
// fused kernel (exec/kernels/attention_cpu) against the composition LibTorch offers
// (matmul, softmax, matmul: what the models ran before) and, built against LibTorch 2.x,
// its scaled_dot_product_attention, in the same process.
//   build/bin/attention_bench [--benchmark_filter=ViT]
#include <benchmark/benchmark.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "exec/models/attention.h"

namespace {

using quintnet::exec::attention_core;
using quintnet::exec::attention_reference;
using quintnet::exec::attention_sdpa;

enum Impl { kFused, kReference, kSdpa };

// kFused runs attention_core, what the models run: the fused kernel, except on LibTorch
// 2.x for heads 64 wide or more, which it hands to SDPA.
// shape: batch, tokens, heads, head_dim, causal
void run(benchmark::State& state, Impl impl, int64_t b, int64_t t, int64_t h, int64_t d, bool causal) {
  torch::set_num_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(1);
  const torch::Tensor qkv = torch::randn({b, t, 3 * h * d}).requires_grad_(true);
  const torch::Tensor upstream = torch::randn({b, t, h, d});
  for (auto _ : state) {
    auto parts = qkv.chunk(3, -1);
    auto heads = [&](const torch::Tensor& y) { return y.view({b, t, h, d}); };
    const torch::Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    torch::Tensor out = impl == kFused       ? attention_core(q, k, v, causal)
                        : impl == kReference ? attention_reference(q, k, v, causal)
                                             : attention_sdpa(q, k, v, causal);
    out.backward(upstream);
    benchmark::DoNotOptimize(qkv.grad().data_ptr());
  }
  state.counters["heads/s"] = benchmark::Counter(static_cast<double>(b * h), benchmark::Counter::kIsIterationInvariantRate);
}

// The ViT of the original config: micro-batch 16, 50 tokens, 4 heads of 16.
void ViT_Fused(benchmark::State& s) { run(s, kFused, 16, 50, 4, 16, false); }
void ViT_Reference(benchmark::State& s) { run(s, kReference, 16, 50, 4, 16, false); }
// The Brown-corpus GPT-2: micro-batch 8, 64 tokens, 4 heads of 16, causal.
void Gpt2Brown_Fused(benchmark::State& s) { run(s, kFused, 8, 64, 4, 16, true); }
void Gpt2Brown_Reference(benchmark::State& s) { run(s, kReference, 8, 64, 4, 16, true); }
// GPT-2 124M's heads (64 wide) on a short sequence.
void Gpt2Heads64_Fused(benchmark::State& s) { run(s, kFused, 2, 128, 12, 64, true); }
void Gpt2Heads64_Reference(benchmark::State& s) { run(s, kReference, 2, 128, 12, 64, true); }
void ViT_Sdpa(benchmark::State& s) { run(s, kSdpa, 16, 50, 4, 16, false); }
void Gpt2Brown_Sdpa(benchmark::State& s) { run(s, kSdpa, 8, 64, 4, 16, true); }
void Gpt2Heads64_Sdpa(benchmark::State& s) { run(s, kSdpa, 2, 128, 12, 64, true); }

}  // namespace

BENCHMARK(ViT_Fused)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(ViT_Reference)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Brown_Fused)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Brown_Reference)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Heads64_Fused)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Heads64_Reference)->Arg(1)->Unit(benchmark::kMicrosecond);
#if TORCH_VERSION_MAJOR >= 2
BENCHMARK(ViT_Sdpa)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Brown_Sdpa)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(Gpt2Heads64_Sdpa)->Arg(1)->Unit(benchmark::kMicrosecond);
#endif
BENCHMARK_MAIN();
