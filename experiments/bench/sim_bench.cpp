// Simulator scale: wall time and simulated events (ops, messages, collectives) per second for one training
// step of GPT-3 6.7B (tp 8 x pp 8, micro-batch 1, 16 microbatches, 1F1B) on 64 ...
// 131,072 DGX-A100 GPUs (dp = ranks / 64), and of GPT-3 175B as Megatron-LM lays it out
// (tp 8 x pp 16, dp = ranks / 128).  BM_Exact simulates every rank (the reference, and the
// baseline in this process); BM_Reduced one of the dp identical replicas
// (sim/simulation.h).  Each simulation runs in a child process (SimGrid has one engine per
// process); the time is the child's, and its peak memory is reported.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "sim/step_costs.h"
#include "sim/simulation.h"

namespace {

using namespace quintnet;

sim::StepCosts gpt3_plan(int ranks, const std::string& model, int tp, int pp, sim::Platform& platform) {
  const int dp = ranks / (tp * pp);
  core::Plan plan;
  plan.mesh_dim = {dp, tp, pp};
  plan.grad_acc_steps = 16;
  plan.batch_size = 16 * dp;
  plan.device_type = core::Device::Cuda;
  platform = sim::load_platform("dgx-a100", (ranks + 7) / 8);
  return sim::make_step_costs(sim::simulated_layout(plan, model, 2048), platform);
}

void simulate(benchmark::State& state, const std::string& model, int tp, int pp, bool exact) {
  const int ranks = static_cast<int>(state.range(0));
  sim::Platform platform;
  const sim::StepCosts sp = gpt3_plan(ranks, model, tp, pp, platform);
  double result[3] = {0, 0, 0};  // events of the whole step, step time, peak RSS (bytes)
  for (auto _ : state) {
    int fds[2];
    if (pipe(fds) != 0) state.SkipWithError("pipe");
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      const sim::SimResult r = sim::simulate_step(sp, platform, exact);
      struct rusage usage {};
      getrusage(RUSAGE_SELF, &usage);
      const double out[3] = {static_cast<double>(r.events), r.step_time_s,
                             static_cast<double>(usage.ru_maxrss) * 1024};
      if (write(fds[1], out, sizeof(out)) != sizeof(out)) _exit(1);
      _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], result, sizeof(result)) != sizeof(result)) state.SkipWithError("simulation failed");
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.counters["ranks"] = ranks;
  state.counters["events"] = result[0];
  state.counters["step_s"] = result[1];
  state.counters["peak_rss_GiB"] = result[2] / (1 << 30);
}

void BM_Exact(benchmark::State& state) { simulate(state, "gpt3-6.7b", 8, 8, true); }
void BM_Reduced(benchmark::State& state) { simulate(state, "gpt3-6.7b", 8, 8, false); }
void BM_Gpt3_175B_Reduced(benchmark::State& state) { simulate(state, "gpt3-175b", 8, 16, false); }
BENCHMARK(BM_Exact)->RangeMultiplier(4)->Range(64, 4096)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_Reduced)->RangeMultiplier(4)->Range(64, 65536)->Arg(131072)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_Gpt3_175B_Reduced)->Arg(16384)->Arg(131072)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
