// quintnet-render: draw a trace timeline (or two, compared; or a schedule, for
// teaching) to PNG or SVG without a display.
//   quintnet render runs/quickstart/train_trace.json -o timeline.png
//   quintnet render measured.json --compare simulated.json -o compare.png
//   quintnet render --schedule 1f1b --pp 4 --microbatches 8 -o 1f1b.svg
#include <QGuiApplication>
#include <cstdlib>
#include <iostream>

#include "core/atomic_file.h"
#include "core/cli/main_guard.h"
#include "visualizer/model/compare.h"
#include "visualizer/model/svg_writer.h"
#include "visualizer/qt/offscreen.h"
#include "visualizer/qt/png_writer.h"
#include "visualizer/qt/sources.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

std::vector<OptionSpec> options() {
  std::vector<OptionSpec> o = {
      {"output", "FILE", "where to write: .png or .svg (required)", 'o'},
      {"compare", "TRACE2", "draw TRACE and TRACE2 stacked on a shared time axis, with their deltas"},
  };
  o.insert(o.end(), viz::kSourceOptions.begin(), viz::kSourceOptions.end());
  return o;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int render(int argc, char** argv) {
  Args args("quintnet render", options(), argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("TRACE [--compare TRACE2] -o out.png|out.svg  |  --schedule NAME --pp P --microbatches M -o F")
              << "\nDraws one lane per rank (grouped by pp stage, tp, dp) with compute, p2p, TP- and DP-collective\n"
                 "sub-lanes, bubbles and their share, flow arrows; no display needed.\n";
    return 0;
  }
  const auto output = args.value("output");
  if (!output) throw UsageError("--output FILE (-o) is required, e.g. -o timeline.png");
  if (!ends_with(*output, ".png") && !ends_with(*output, ".svg"))
    throw UsageError("--output '" + *output + "': the name must end in .png or .svg");
  std::vector<std::string> traces = args.positional();
  if (auto other = args.value("compare")) traces.push_back(*other);
  const viz::Sources src = viz::load_sources(args, traces);

  viz::Scene scene = src.b ? viz::draw_comparison(*src.a, *src.b, src.names[0], src.names[1], src.view)
                           : viz::draw_timeline(*src.a, src.view);
  double y = scene.height;
  for (const std::string& line : src.legend) {
    scene.texts.push_back({12, y, line, src.view.palette.text, 11});
    y += 16;
  }
  scene.height = y + (src.legend.empty() ? 0 : 4);

  if (ends_with(*output, ".svg")) {
    core::write_file_atomically(*output, viz::scene_to_svg(scene));
  } else {
    viz::use_offscreen_without_display();
    viz::QtArguments qt("quintnet-render");
    QGuiApplication app(qt.argc, qt.argv);
    viz::write_png(scene, *output);
  }
  for (const auto* paths : {src.view.critical_paths.get(), src.view.critical_paths_b.get()})
    if (paths)
      for (const viz::CriticalPath& p : *paths) std::cout << "step " << p.step << ": " << viz::critical_path_summary(p) << "\n";
  std::cout << "wrote " << *output << " (" << static_cast<int>(scene.width) << "x" << static_cast<int>(scene.height)
            << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet render", [&] { return render(argc, argv); });
}
