#pragma once
// What `quintnet render` and `quintnet view` draw, from their shared options: a trace,
// two traces compared, or a schedule straight from core's generator (teaching mode).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cli/args.h"
#include "visualizer/model/scene.h"
#include "visualizer/model/teaching.h"

namespace quintnet::viz {

extern const std::vector<core::cli::OptionSpec> kSourceOptions;

struct Sources {
  std::unique_ptr<Timeline> a, b;  // b only in compare mode
  std::vector<std::string> names;  // file names (or the schedule's description)
  std::vector<std::string> legend;  // teaching mode: the phases explained
  ViewOptions view;                 // with view.spread when the lanes are grouped
};

// `traces`: the positional trace files (one, or two to compare).  Throws
// core::cli::UsageError / core::UserError with the reason.
Sources load_sources(const core::cli::Args& args, const std::vector<std::string>& traces);

// One trace with its lanes grouped as `group_by` says (visualizer/model/grouping.h):
// "" groups by pp above kGroupAboveRanks ranks and not below, "none" never.  The node
// size comes from the trace's platform (gpus_per_node) when it has one, else 8.
constexpr int kGroupAboveRanks = 256;
Sources trace_sources(core::Trace trace, const std::string& name, const std::string& group_by = "",
                      std::optional<int> step = std::nullopt);

// A schedule straight from core's generator, with its phases explained.
Sources teaching_sources(const TeachingSchedule& t);

// Two trace files compared one step against one: `step_a` of the first (its median step
// by default) against `step_b` of the second (its first step by default).
Sources compare_sources(const std::string& trace_a, const std::string& trace_b, std::optional<int> step_a = std::nullopt,
                        std::optional<int> step_b = std::nullopt);

}  // namespace quintnet::viz
