// quintnet-calibrate: fit the simulator's machine figures to a measured executor trace.
//   quintnet launch --nproc 8 -- quintnet-train --config plan.yaml --max-steps 30 --trace run.json
//   quintnet calibrate --trace run.json -o calib.json
//   quintnet simulate --config other_plan.yaml --calibration calib.json
#include <cstdio>
#include <iostream>

#include "core/atomic_file.h"
#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "sim/calibration.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"trace", "FILE", "an executor trace (quintnet train --trace)"},
    {"output", "FILE", "where to write the calibration (JSON)", 'o'},
};

int calibrate(int argc, char** argv) {
  Args args("quintnet calibrate", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("--trace FILE -o calib.json")
              << "\nFits compute speed, message latency and bandwidth, and optimizer time to a measured run,\n"
                 "for quintnet simulate --calibration (see sim/calibration.h for how).\n";
    return 0;
  }
  const auto trace = args.value("trace");
  const auto output = args.value("output");
  if (!trace || !output) throw UsageError("--trace FILE and -o FILE are required");
  const sim::Calibration c = sim::calibrate(core::read_trace(*trace), *trace);
  core::write_file_atomically(*output, sim::calibration_to_json(c).dump(1) + "\n");
  std::printf("calibrated from %s (%d ops, %d messages, %d cores):\n", trace->c_str(), c.fitted_ops,
              c.fitted_messages, c.cores);
  for (const auto& [tp, k] : c.op_costs)
    std::printf("  ops at tp %d  forward %.3g GFLOP/s + %.3g us per layer, backward %.3g GFLOP/s + %.3g us per layer "
                "(one core)\n",
                tp, k.forward_flops_per_s / 1e9, k.forward_overhead_s * 1e6, k.backward_flops_per_s / 1e9,
                k.backward_overhead_s * 1e6);
  if (c.probe_ranks == 0)
    std::printf("  (no op-shape probe in the trace — micro-batch 1, or an older trace: the costs are the training "
                "ops' FLOP rate, no per-layer part)\n");
  else
    std::printf("  training ops took %.2fx those costs (%s); a forward without its graph %.2fx a forward "
                "(full recomputation's first forward)\n",
                c.slowdown,
                c.oversubscribed ? "more ranks than cores; plans with a core per rank get 1x"
                                 : "a core per rank; plans with more ranks than cores get 1x, not known from this run",
                c.no_graph_forward_ratio);
  std::printf("  messages  latency %.3g us, bandwidth %.3g GB/s per hop\n", c.latency_s * 1e6, c.bandwidth / 1e9);
  std::printf("  optimizer %.3g ns per parameter\nwrote %s\n", c.optimizer_s_per_parameter * 1e9, output->c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet calibrate", [&] { return calibrate(argc, argv); });
}
