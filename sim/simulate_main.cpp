// quintnet-simulate: predict one training step of a plan on a described cluster.
//   quintnet simulate --config experiments/configs/vit_3d.yaml --platform cpu-local
//   quintnet simulate --config plan.yaml --model gpt3-175b --platform dgx-a100 --nodes 128
//   quintnet simulate --uniform 1,2 --schedule 1f1b --pp 4 --microbatches 8 --platform ideal
//   quintnet simulate --allreduce 1e9 --ranks 8 --platform dgx-a100
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/error.h"
#include "core/trace_analysis.h"
#include "sim/calibration.h"
#include "sim/kernel_report.h"
#include "sim/memory_estimate.h"
#include "sim/plan_simulation.h"
#include "sim/simulation.h"
#include "sim/what_if.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"config", "PLAN", "the plan to simulate (YAML/JSON; the executor's plans load unchanged)"},
    {"platform", "NAME|FILE", "dgx-a100, dgx-h100, dgx-a100-superpod, dgx-h100-superpod, a100x4-fat-tree, h200, cpu-local, ideal, a JSON description or a SimGrid platform .xml [dgx-a100]"},
    {"nodes", "N", "override the platform's node count"},
    {"model", "NAME", "simulate this model instead of the plan's (gpt2-124m ... gpt3-175b, llama3-8b, llama3-70b, llama3-405b, llama3.2-1b, llama3.2-3b)"},
    {"seq", "N", "sequence length with --model [the model's: 1,024 GPT-2, 2,048 GPT-3, 8,192 Llama 3]"},
    {"trace", "FILE", "write the simulated step as a Chrome trace (source: sim)"},
    {"json", "", "print the summary as JSON"},
    {"calibration", "FILE", "use a calibrated machine (quintnet calibrate) instead of --platform"},
    {"measured", "TRACE", "also print the step time an executor trace of this plan measured (its median step: first op to optimizer end), and the error"},
    {"uniform", "TF,TB[,TW]", "uniform op times in seconds instead of a plan (with --schedule --pp --microbatches)"},
    {"schedule", "NAME", "with --uniform: afab, 1f1b, interleaved, zb-h1 [1f1b]"},
    {"pp", "P", "with --uniform: pipeline ranks [4]"},
    {"microbatches", "M", "with --uniform: microbatches [8]"},
    {"chunks", "V", "with --uniform: chunks per rank [2 for interleaved]"},
    {"p2p-bytes", "BYTES", "with --uniform: bytes of each activation message [0]"},
    {"allreduce", "BYTES", "simulate one ring all-reduce of BYTES over --ranks GPUs and print its time"},
    {"ranks", "N", "with --allreduce: ranks in the ring [8]"},
    {"reduce-scatter", "", "with --allreduce: a ring reduce-scatter (an all-gather takes the same) instead"},
    {"collective", "KIND", "ring or hierarchical (two-level) DP all-reduces across nodes [the platform's: ring]"},
    {"exact", "", "simulate every data-parallel replica, even when they are provably identical (the reference)"},
    {"straggler", "RANK:F[,...]", "what-if: these ranks compute at F times the others' speed (0.8: each op takes 1/0.8 as long)"},
    {"slow-node", "NODE:F[,...]", "what-if: every rank of these nodes computes at F times the speed"},
    {"slow-nic", "NODE/NIC:F[,...]", "what-if: these NICs (NIC * for all of the node's) run at F times their bandwidth, F in (0, 1]"},
    {"failed-nic", "NODE/NIC[,...]", "what-if: these NICs are down; their GPUs' messages leave through the node's next working NIC"},
    {"jitter", "DIST:CV", "what-if: each op's time times a factor of mean 1, normal:CV or lognormal:CV (e.g. lognormal:0.05)"},
    {"seed", "N", "with --jitter: the random seed [1]"},
    {"kernels", "", "print the kernels of the slowest pipeline rank's microbatch with their roofline times, and exit"},
    {"show-platform", "", "print the platform as JSON, with where each figure comes from, and exit"},
};

double number(const Args& args, const std::string& name, double fallback) {
  const auto v = args.get_doubles(name, 1, 1);
  return v.empty() ? fallback : v[0];
}

// --kernels: the kernels of the pipeline rank whose microbatch takes longest (it sets the
// pipeline's pace).
int print_kernels(const sim::StepCosts& costs, const sim::Platform& platform, const std::string& what) {
  if (costs.kernels.empty()) throw UsageError("--kernels: a calibrated machine's ops are timed as measured, not by kernels");
  auto microbatch = [&](size_t r) { return costs.forward_s[r] + costs.backward_input_s[r] + costs.backward_weight_s[r]; };
  size_t slowest = 0;
  for (size_t r = 1; r < costs.kernels.size(); ++r)
    if (microbatch(r) > microbatch(slowest)) slowest = r;
  std::printf("%s on %s: pipeline rank %zu (of %zu), one microbatch, one tensor-parallel rank\n", what.c_str(),
              platform.name.c_str(), slowest, costs.kernels.size());
  std::cout << sim::kernel_report(costs.kernels[slowest], platform);
  return 0;
}

// The human-readable summary (what --json prints, in words).
void print_summary(const std::string& what, const sim::StepCosts& costs, const sim::Platform& platform,
                   const sim::SimResult& r, const nlohmann::ordered_json& summary, double measured, double wall,
                   bool exact) {
  const double step = r.step_time_s, samples_s = summary["samples_per_s"], mfu = summary["mfu"];
  const double peak_memory = summary["peak_memory_bytes"], compute = summary["compute_fraction"],
               comm = summary["exposed_comm_fraction"];
  std::printf("simulated: %s on %s (%d ranks)\n", what.c_str(), platform.name.c_str(), summary["ranks"].get<int>());
  std::printf("  step time        %.6g s", step);
  if (measured > 0) std::printf("   (measured %.6g s: %+.1f%%)", measured, 100 * (step - measured) / measured);
  std::printf("\n");
  std::printf("  bubble fraction  %.4f\n", r.bubble_fraction);
  std::printf("  throughput       %.4g samples/s", samples_s);
  if (costs.tokens_per_sample > 0) std::printf(", %.4g tokens/s", samples_s * costs.tokens_per_sample);
  std::printf("\n");
  if (mfu > 0) std::printf("  MFU              %.1f%%\n", 100 * mfu);
  if (peak_memory > 0 && platform.memory_bytes > 0)
    std::printf("  peak memory      %s per GPU of %s\n", sim::gib_text(peak_memory).c_str(),
                sim::gib_text(platform.memory_bytes).c_str());
  else if (peak_memory > 0)
    std::printf("  peak memory      %s per rank\n", sim::gib_text(peak_memory).c_str());
  if (peak_memory > 0 && summary.contains("peak_memory_split")) {
    const auto& m = summary["peak_memory_split"];
    std::printf("                   weights %s, gradients %s, optimizer %s, activations %s (pipeline rank %d)\n",
                sim::gib_text(m["weights"]).c_str(), sim::gib_text(m["gradients"]).c_str(),
                sim::gib_text(m["optimizer"]).c_str(), sim::gib_text(m["activations"]).c_str(),
                m["pipeline_rank"].get<int>());
  }
  std::printf("  time per rank    compute %.1f%%, exposed communication %.1f%%, idle %.1f%%\n", 100 * compute,
              100 * comm, 100 * (1 - compute - comm));
  if (summary.contains("cp_ring_exposed_s"))
    std::printf("  context parallel cp %d: ring attention's hops beyond the attention they overlap %.4g s per step"
                " (closed form, no other traffic: %.4g s)\n", summary["cp"].get<int>(),
                summary["cp_ring_exposed_s"].get<double>(), summary["cp_ring_closed_form_s"].get<double>());
  std::printf("  (%zu events simulated in %.2f s wall", r.trace.events.size(), wall);
  if (r.reduced) std::printf("; %s", sim::describe_replicas(r.classes).c_str());
  else if (costs.dp > 1 && !exact)
    std::printf("; all %d data-parallel replicas simulated: %s", costs.dp, sim::why_not_reducible(costs, platform).c_str());
  std::printf(")\n");
}

int simulate(int argc, char** argv) {
  Args args("quintnet simulate", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("--config PLAN [--platform NAME|FILE] [--nodes N] [--model NAME] [--trace F] [--json]")
              << "\nPredicts one training step with SimGrid: step time, bubbles, throughput, MFU, memory.\n";
    return 0;
  }
  std::optional<sim::Calibration> calibration;
  if (auto path = args.value("calibration")) calibration = sim::read_calibration(*path);
  sim::Platform platform = calibration ? sim::calibrated_platform(*calibration, 1)
                                       : sim::load_platform(args.get("platform", "dgx-a100"), args.get_int("nodes", 0, 0, 1 << 20));
  if (auto c = args.value("collective")) sim::choose_collective(platform, *c);
  if (args.flag("show-platform")) {
    std::cout << sim::platform_to_json(platform).dump(2) << '\n';
    return 0;
  }

  if (args.value("allreduce")) {
    const double bytes = number(args, "allreduce", 0);
    const int n = args.get_int("ranks", 8, 1, 1 << 20);
    if (n > platform.gpus()) throw core::UserError("--ranks " + std::to_string(n) + ": the platform has " + std::to_string(platform.gpus()) + " GPUs");
    for (const char* step_only : {"straggler", "slow-node", "jitter", "kernels"})
      if (args.value(step_only)) throw UsageError(std::string("--") + step_only + " applies to a step (--config or --uniform), not to --allreduce");
    sim::add_nic_faults(platform, args.get("slow-nic", ""), args.get("failed-nic", ""), n);
    const bool scatter = args.flag("reduce-scatter");
    const double t = sim::simulate_ring_allreduce(bytes, n, platform, scatter);
    if (args.flag("json")) std::cout << nlohmann::ordered_json{{scatter ? "reduce_scatter_s" : "allreduce_s", t}, {"bytes", bytes}, {"ranks", n}}.dump() << '\n';
    else std::printf("ring %s of %.4g bytes over %d ranks: %.6g s\n", scatter ? "reduce-scatter" : "all-reduce", bytes, n, t);
    return 0;
  }

  sim::StepCosts costs;
  std::string what;
  nlohmann::json plan_json;  // into the trace, so `quintnet bubble` can read its schedule
  if (args.value("uniform")) {
    if (args.flag("kernels")) throw UsageError("--kernels lists a plan's kernels (--config), not --uniform op times");
    const auto c = args.get_doubles("uniform", 2, 3);
    const core::ScheduleKind kind = core::parse_schedule_kind(args.get("schedule", "1f1b"));
    const int pp = args.get_int("pp", 4, 1, 4096), m = args.get_int("microbatches", 8, 1, 1 << 20);
    const int v = args.get_int("chunks", kind == core::ScheduleKind::Interleaved ? 2 : 1, 1, 64);
    if (pp > platform.gpus()) throw core::UserError("--pp " + std::to_string(pp) + ": the platform has " + std::to_string(platform.gpus()) + " GPUs");
    costs = sim::uniform_step_costs(kind, pp, m, v, c[0], c[1], c.size() > 2 ? c[2] : 0.0, number(args, "p2p-bytes", 0));
    plan_json = {{"schedule", core::schedule_kind_name(kind)}, {"pp", pp}, {"microbatches", m}, {"chunks", v}};
    what = "uniform ops";
  } else {
    const auto config = args.value("config");
    if (!config) throw UsageError("--config PLAN is required (or --uniform / --allreduce)");
    const core::LoadedPlan loaded = core::load_plan(*config);
    plan_json = loaded.plan.to_json();
    const core::RunLayout layout =
        sim::simulated_layout(loaded.plan, args.get("model", ""), args.get_int("seq", 0, 0, 1 << 24));
    costs = sim::checked_step_costs(layout, platform, calibration ? &*calibration : nullptr);
    what = costs.model + " on " + loaded.plan.mesh().shape_string() + ", " + loaded.plan.schedule;
    if (args.flag("kernels")) return print_kernels(costs, platform, what);
  }

  sim::SimulateRequest request;
  request.exact = args.flag("exact");
  request.trace_path = args.get("trace", "");
  request.plan_json = plan_json;
  if (auto path = args.value("measured")) request.measured_s = core::median_step_time_us(core::read_trace(*path)) * 1e-6;
  request.what_ifs = [&](sim::Platform& p, int world) {
    sim::add_stragglers(p, args.get("straggler", ""), args.get("slow-node", ""), world);
    sim::add_nic_faults(p, args.get("slow-nic", ""), args.get("failed-nic", ""), world);
    p.jitter = sim::parse_jitter(args.get("jitter", ""), static_cast<uint64_t>(args.get_int("seed", 1, 0, 1 << 30)));
  };
  const sim::PlanSimulation s = sim::simulate_plan(costs, platform, request);
  if (args.flag("json")) {
    std::cout << s.summary.dump() << std::endl;
    return 0;
  }
  print_summary(what, costs, platform, s.result, s.summary, request.measured_s, s.wall_s, request.exact);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet simulate", [&] { return simulate(argc, argv); });
}
