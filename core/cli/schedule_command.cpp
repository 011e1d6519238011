// quintnet schedule: draw a pipeline schedule, prove it correct, report its bubble.
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/cli/verbs.h"
#include "core/schedule_ascii.h"
#include "core/schedule_generators.h"
#include "core/schedule_trace.h"
#include "core/schedule_validator.h"

namespace quintnet::core::cli {
namespace {

const std::vector<OptionSpec> kOptions = {
    {"schedule", "NAME", "afab (GPipe), 1f1b, interleaved or zb-h1 [1f1b]"},
    {"pp", "P", "pipeline ranks [4]"},
    {"microbatches", "M", "microbatches per step [8]"},
    {"chunks", "V", "virtual stages per rank, interleaved only [1; 2 for interleaved]"},
    {"costs", "TF,TB[,TW]", "forward, backward-input, weight-gradient cost of one rank's layers [1,1,1]; "
                            "B costs TB+TW; a chunk costs 1/V of it"},
    {"p2p", "LATENCY", "time for one activation/gradient message [0]"},
    {"json", "", "print the statistics as JSON instead of the drawing"},
    {"trace", "FILE", "write the timeline as a Chrome/Perfetto trace (1 cost unit = 1 ms)"},
    {"color", "", "colour the drawing (default when stdout is a terminal)"},
    {"no-color", "", "plain text drawing"},
};

std::string fraction_text(double x) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << x;
  return out.str();
}

}  // namespace

int schedule_command(int argc, char** argv) {
  return guarded_main("quintnet schedule", [&] {
    Args args("quintnet schedule", kOptions, argc, argv);
    if (args.help_requested()) {
      std::cout << args.usage("[--schedule NAME] [--pp P] [--microbatches M] [--chunks V] [--costs TF,TB,TW] "
                              "[--json] [--trace FILE]")
                << "\nDraws the per-rank action order of a pipeline schedule, proves it (no deadlock, every\n"
                   "send received, every microbatch through every stage), and reports step time, bubble\n"
                   "fraction and peak in-flight activations for the given op costs.\n";
      return 0;
    }
    if (!args.positional().empty())
      throw UsageError("unexpected argument '" + args.positional()[0] + "'");
    const ScheduleKind kind = parse_schedule_kind(args.get("schedule", "1f1b"));
    const int pp = args.get_int("pp", 4, 1, 4096);
    const int m = args.get_int("microbatches", 8, 1, 65536);
    const int v = args.get_int("chunks", kind == ScheduleKind::Interleaved ? 2 : 1, 1, 64);
    OpCosts costs;
    if (auto c = args.get_doubles("costs", 2, 3); !c.empty()) {
      costs.forward = c[0];
      costs.backward_input = c[1];
      costs.backward_weight = c.size() > 2 ? c[2] : 0.0;
    }
    if (auto l = args.get_doubles("p2p", 1, 1); !l.empty()) costs.p2p = l[0];
    if (costs.forward + costs.backward_input + costs.backward_weight <= 0)
      throw UsageError("--costs are all zero; give the ops a positive cost");

    const Schedule schedule = make_schedule(kind, pp, m, v);
    const ScheduleStats stats = simulate_schedule(schedule, costs);

    if (auto path = args.value("trace")) write_trace(schedule_to_trace(schedule, stats, costs), *path);

    if (args.flag("json")) {
      nlohmann::ordered_json j = {{"schedule", schedule.name},
                          {"pp", pp},
                          {"microbatches", m},
                          {"chunks", v},
                          {"costs", {{"tf", costs.forward}, {"tb", costs.backward_input},
                                     {"tw", costs.backward_weight}, {"p2p", costs.p2p}}},
                          {"valid", true},
                          {"step_time", stats.step_time},
                          {"bubble_fraction", stats.bubble_fraction},
                          {"bubble_fraction_per_rank", stats.bubble_per_rank},
                          {"peak_activations", stats.peak_activations},
                          {"peak_pending_wgrad", stats.peak_pending_wgrad},
                          {"actions_per_rank", nlohmann::ordered_json::array()}};
      for (const auto& list : schedule.ranks) {
        nlohmann::ordered_json names = nlohmann::ordered_json::array();
        for (const auto& a : list) names.push_back(to_string(a));
        j["actions_per_rank"].push_back(names);
      }
      if (auto path = args.value("trace")) j["trace"] = *path;
      std::cout << j.dump(2) << '\n';
      return 0;
    }

    const bool color = args.flag("color") || (!args.flag("no-color") && isatty(STDOUT_FILENO));
    std::cout << schedule.name << "  pp=" << pp << "  microbatches=" << m << "  chunks=" << v
              << "  costs tf=" << costs.forward << " tb=" << costs.backward_input
              << " tw=" << costs.backward_weight << " p2p=" << costs.p2p << "\n\n"
              << render_ascii_timeline(schedule, stats, color)
              << "\nF forward  B backward  I input-grad  W weight-grad  (lowercase: odd chunk)  . idle\n\n"
              << "valid           : yes (no deadlock, every send received, every microbatch through every stage)\n"
              << "step time       : " << stats.step_time << "\n"
              << "bubble fraction : " << fraction_text(stats.bubble_fraction) << "   per rank:";
    for (double b : stats.bubble_per_rank) std::cout << ' ' << fraction_text(b);
    std::cout << "\npeak activations:";
    for (int a : stats.peak_activations) std::cout << ' ' << a;
    std::cout << "   (microbatches in flight per rank)\n";
    if (kind == ScheduleKind::ZbH1) {
      std::cout << "pending W       :";
      for (int a : stats.peak_pending_wgrad) std::cout << ' ' << a;
      std::cout << "   (weight-gradients held back per rank)\n";
    }
    if (auto path = args.value("trace")) std::cout << "trace           : " << *path << " (open in ui.perfetto.dev)\n";
    return 0;
  });
}

}  // namespace quintnet::core::cli
