// GPT-2's loss, forward + backward, on the logits of one microbatch: the blocked
// cross-entropy (exec/models/chunked_cross_entropy) against LibTorch's cross_entropy
// (log-softmax + NLL: what the model ran before), in the same process, one thread.
//   build/bin/cross_entropy_bench
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "exec/models/chunked_cross_entropy.h"

namespace {

// rows: tokens of one microbatch (the Brown config: 8 x 64; GPT-2 124M's: 8 x 1024 on a GPU).
void run(benchmark::State& state, bool blocked) {
  torch::set_num_threads(1);
  torch::manual_seed(1);
  const int64_t rows = state.range(0), vocab = 50257;
  const torch::Tensor logits = (torch::randn({rows, vocab}) * 3).requires_grad_(true);
  const torch::Tensor targets = torch::randint(0, vocab, {rows});
  for (auto _ : state) {
    const torch::Tensor loss =
        blocked ? quintnet::exec::chunked_cross_entropy_sum(logits, targets)
                : torch::nn::functional::cross_entropy(
                      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    loss.backward();
    benchmark::DoNotOptimize(logits.grad().data_ptr());
    logits.mutable_grad() = torch::Tensor();
  }
}

void Blocked(benchmark::State& s) { run(s, true); }
void LibTorch(benchmark::State& s) { run(s, false); }

}  // namespace

BENCHMARK(Blocked)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(LibTorch)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
