// quintnet bubble: a traced run's measured bubble beside core's predictions.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/bubble_report.h"
#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/cli/verbs.h"
#include "core/trace.h"

namespace quintnet::core::cli {
namespace {

const std::vector<OptionSpec> kOptions = {
    {"json", "", "print the figures as one JSON object"},
};

}  // namespace

int bubble_command(int argc, char** argv) {
  return guarded_main("quintnet bubble", [&] {
    Args args("quintnet bubble", kOptions, argc, argv);
    if (args.help_requested()) {
      std::cout << args.usage("TRACE [--json]")
                << "\nThe bubble fraction an executor trace measured, beside what core's schedule statistics\n"
                   "predict from the op costs the same trace measured (the median of each op kind and the\n"
                   "mean message latency), and replayed with each op's own measured time.\n";
      return 0;
    }
    if (args.positional().size() != 1) throw UsageError("expected one trace file, e.g. quintnet bubble run.json");
    const std::string path = args.positional()[0];
    const Trace trace = read_trace(path);
    const Schedule schedule = trace_schedule(trace, path);
    const BubbleReport r = bubble_report(trace, schedule);
    if (args.flag("json")) {
      std::cout << nlohmann::ordered_json{{"measured", r.measured}, {"predicted", r.predicted}, {"replayed", r.replayed}}
                       .dump()
                << '\n';
      return 0;
    }
    std::printf("%s: %s, pp %d, %d microbatches, %d ranks\n", path.c_str(), schedule.name.c_str(), schedule.pp,
                schedule.microbatches, trace.num_ranks());
    std::printf("  bubble fraction measured                  %.4f\n", r.measured);
    std::printf("  predicted from the median op costs        %.4f\n", r.predicted);
    std::printf("  replayed with each op's measured time     %.4f\n", r.replayed);
    return 0;
  });
}

}  // namespace quintnet::core::cli
