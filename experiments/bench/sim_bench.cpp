// Simulator scale: wall time and simulated events (ops, messages, collectives) per second for one training
// step of GPT-3 6.7B (tp 8 x pp 8, micro-batch 1, 16 microbatches, 1F1B) on 64 ...
// 16384 DGX-A100 GPUs (dp = ranks / 64).  Each simulation runs in a child process
// (SimGrid has one engine per process); the time is the child's.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "sim/sim_plan.h"
#include "sim/simulation.h"

namespace {

using namespace quintnet;

void BM_SimulateGpt3Step(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0)), dp = ranks / 64;
  core::Plan plan;
  plan.mesh_dim = {dp, 8, 8};
  plan.grad_acc_steps = 16;
  plan.batch_size = 16 * dp;
  plan.device_type = "cuda";
  sim::Platform platform = sim::load_platform("dgx-a100", (ranks + 7) / 8);
  const sim::SimPlan sp = sim::make_sim_plan(plan, platform, "gpt3-6.7b", 2048);
  double events = 0;
  for (auto _ : state) {
    int fds[2];
    if (pipe(fds) != 0) state.SkipWithError("pipe");
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      const double n = static_cast<double>(sim::simulate_step(sp, platform).trace.events.size());
      if (write(fds[1], &n, sizeof(n)) != sizeof(n)) _exit(1);
      _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &events, sizeof(events)) != sizeof(events)) state.SkipWithError("simulation failed");
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.counters["ranks"] = ranks;
  state.counters["events"] = events;
  state.counters["events_per_s"] = benchmark::Counter(events, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SimulateGpt3Step)
    ->RangeMultiplier(4)
    ->Range(64, 16384)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
