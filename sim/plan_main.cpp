// quintnet-plan: the best layouts for a model on a cluster.
//   quintnet plan --model gpt3-175b --gpus 1024 --platform dgx-a100 --global-batch 1536 --seq 2048
// Enumerates (dp, tp, pp, micro-batch, schedule, chunks), says why the impossible ones
// are, ranks the rest by an analytic step time and simulates the best few with SimGrid
// (each in a child process: SimGrid has one engine per process).
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/cost_model.h"
#include "core/error.h"
#include "sim/planner.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"model", "NAME", "gpt2-124m ... gpt3-175b, llama3-8b ... llama3-405b, llama3.2-1b, llama3.2-3b [gpt3-175b]"},
    {"gpus", "N", "GPUs to use [1024]"},
    {"platform", "NAME|FILE", "dgx-a100, dgx-h100, h200, a JSON description or a SimGrid platform .xml [dgx-a100]"},
    {"nodes", "N", "nodes of the platform [enough for --gpus]"},
    {"global-batch", "N", "samples per optimizer step [1536]"},
    {"seq", "N", "sequence length [2048]"},
    {"micro-batches", "LIST", "micro-batch sizes to try [1,2,4]"},
    {"top", "N", "layouts to list [10]"},
    {"simulate", "N", "simulate the best N with SimGrid [3; 0: analytic only]"},
};

int plan_command(int argc, char** argv) {
  Args args("quintnet plan", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("--model NAME --gpus N --platform NAME [--global-batch B --seq S]")
              << "\nLists the best layouts with predicted throughput and says why the others cannot run.\n";
    return 0;
  }
  sim::PlanQuery q;
  q.model = args.get("model", q.model);
  q.gpus = args.get_int("gpus", q.gpus, 1, 1 << 22);
  q.global_batch = args.get_int("global-batch", q.global_batch, 1, 1 << 26);
  q.seq = args.get_int("seq", q.seq, 1, 1 << 22);
  if (args.value("micro-batches")) {
    q.micro_batches.clear();
    for (double b : args.get_doubles("micro-batches", 1, 16)) q.micro_batches.push_back(static_cast<int>(b));
  }
  const sim::Platform platform =
      sim::planner_platform(args.get("platform", "dgx-a100"), args.get_int("nodes", 0, 0, 1 << 20), q.gpus);
  const int top = args.get_int("top", 10, 1, 1000), to_simulate = args.get_int("simulate", 3, 0, 100);

  std::vector<sim::Candidate> all = sim::enumerate_layouts(q, platform);
  const core::ModelDims dims = core::model_dims(q.model);
  core::ModelDims at_seq = dims;
  at_seq.seq = q.seq;
  const double flops_per_step = core::training_flops_per_sample(at_seq) * q.global_batch;
  int feasible = 0;
  for (const auto& c : all) feasible += c.rejected.empty();
  std::printf("%s on %d GPUs of %s, global batch %d, sequence %d: %zu layouts, %d can run\n", q.model.c_str(), q.gpus,
              platform.name.c_str(), q.global_batch, q.seq, all.size(), feasible);
  for (int i = 0; i < std::min(to_simulate, feasible); ++i) {
    std::fprintf(stderr, "simulating %d/%d: %s ...\n", i + 1, std::min(to_simulate, feasible), all[i].layout().c_str());
    all[i].simulated_step_s = sim::simulate_in_child(sim::candidate_step_costs(q, all[i], platform), platform);
  }
  std::printf("\n| # | layout | memory/GPU | step (analytic) | step (SimGrid) | tokens/s | MFU |\n"
              "|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < std::min(top, feasible); ++i) {
    const auto& c = all[i];
    const double step = c.simulated_step_s > 0 ? c.simulated_step_s : c.analytic_step_s;
    char sim_col[32] = "-";
    if (c.simulated_step_s > 0) std::snprintf(sim_col, sizeof(sim_col), "%.3f s", c.simulated_step_s);
    std::printf("| %d | %s | %.1f GiB | %.3f s | %s | %.4g | %.1f%% |\n", i + 1, c.layout().c_str(),
                c.memory_bytes / (1024.0 * 1024 * 1024), c.analytic_step_s, sim_col,
                q.global_batch * static_cast<double>(q.seq) / step, 100 * flops_per_step / (q.gpus * platform.peak_flops * step));
  }
  std::map<std::string, std::pair<int, std::string>> reasons;
  for (const auto& c : all)
    if (!c.rejected.empty()) {
      const std::string key = c.rejected.rfind("does not fit", 0) == 0 ? "does not fit in GPU memory" : c.rejected;
      auto& r = reasons[key];
      if (r.first++ == 0) r.second = c.layout() + (key != c.rejected ? " (" + c.rejected + ")" : "");
    }
  if (!reasons.empty()) std::printf("\nrejected:\n");
  for (const auto& [why, r] : reasons) std::printf("  %4d  %s   e.g. %s\n", r.first, why.c_str(), r.second.c_str());
  if (feasible == 0) throw core::UserError("no layout of " + q.model + " fits on " + std::to_string(q.gpus) + " GPUs of " + platform.name);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet plan", [&] { return plan_command(argc, argv); });
}
