#pragma once
// What `quintnet render` and `quintnet view` draw, from their shared options: a trace,
// two traces compared, or a schedule straight from core's generator (teaching mode).
#include <memory>
#include <string>
#include <vector>

#include "core/cli/args.h"
#include "visualizer/model/scene.h"

namespace quintnet::viz {

extern const std::vector<core::cli::OptionSpec> kSourceOptions;

struct Sources {
  std::unique_ptr<Timeline> a, b;  // b only in compare mode
  std::vector<std::string> names;  // file names (or the schedule's description)
  std::vector<std::string> legend;  // teaching mode: the phases explained
  ViewOptions view;
};

// `traces`: the positional trace files (one, or two to compare).  Throws
// core::cli::UsageError / core::UserError with the reason.
Sources load_sources(const core::cli::Args& args, const std::vector<std::string>& traces);

}  // namespace quintnet::viz
