// quintnet-render: draw a trace timeline (or two, compared; or a schedule, for
// teaching) to PNG or SVG without a display.
//   quintnet render runs/quickstart/train_trace.json -o timeline.png
//   quintnet render measured.json --compare simulated.json -o compare.png
//   quintnet render --schedule 1f1b --pp 4 --microbatches 8 -o 1f1b.svg
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "core/atomic_file.h"
#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "visualizer/model/compare.h"
#include "visualizer/model/svg_writer.h"
#include "visualizer/model/teaching.h"
#include "visualizer/qt/scene_painter.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"output", "FILE", "where to write: .png or .svg (required)", 'o'},
    {"compare", "TRACE2", "draw TRACE and TRACE2 stacked on a shared time axis, with their deltas"},
    {"step", "N", "only step N of the trace(s) [all traced steps]"},
    {"width", "PIXELS", "image width [1600]"},
    {"palette", "NAME", "light or dark [light]"},
    {"title", "TEXT", "title above the timeline [the trace's source]"},
    {"no-flows", "", "no arrows from sends to receives"},
    {"schedule", "NAME", "teaching mode: draw this schedule (afab, 1f1b, interleaved, zb-h1) instead of a trace"},
    {"pp", "P", "teaching mode: pipeline ranks [4]"},
    {"microbatches", "M", "teaching mode: microbatches [8]"},
    {"chunks", "V", "teaching mode: chunks per rank (interleaved) [2 for interleaved, else 1]"},
    {"costs", "TF,TB[,TW]", "teaching mode: forward, backward(-input), weight-grad costs [1,2,0; zb-h1 1,1,1]"},
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void write_png(const viz::Scene& scene, const std::string& path) {
  QImage image(static_cast<int>(scene.width + 0.5), static_cast<int>(scene.height + 0.5), QImage::Format_RGB32);
  {
    QPainter painter(&image);
    viz::paint_scene(painter, scene);
  }
  // Save to a temporary name, then rename: never half a PNG under the final name.
  const std::string tmp = path + ".tmp.png";
  if (!image.save(QString::fromStdString(tmp), "PNG"))
    throw core::UserError(path + ": cannot write the PNG (directory missing or not writable?)");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw core::UserError(path + ": cannot move the PNG into place");
}

int render(int argc, char** argv) {
  Args args("quintnet render", kOptions, argc, argv);
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
  viz::ViewOptions view;
  view.width = args.get_int("width", 1600, 400, 20000);
  view.palette = viz::Palette::named(args.get("palette", "light"));
  view.flows = !args.flag("no-flows");
  view.title = args.get("title", "");
  std::optional<int> step;
  if (args.value("step")) step = args.get_int("step", 0, 0, 1 << 30);

  viz::Scene scene;
  if (args.value("schedule")) {
    if (!args.positional().empty()) throw UsageError("--schedule draws a schedule; give no trace file with it");
    viz::TeachingSchedule t;
    t.schedule = args.get("schedule", "1f1b");
    t.pp = args.get_int("pp", 4, 1, 256);
    t.microbatches = args.get_int("microbatches", 8, 1, 4096);
    t.chunks = args.get_int("chunks", t.schedule == "interleaved" ? 2 : 1, 1, 64);
    if (t.schedule == "zb-h1") t.backward_input = 1, t.backward_weight = 1;
    if (auto c = args.get_doubles("costs", 2, 3); !c.empty()) {
      t.forward = c[0];
      t.backward_input = c[1];
      t.backward_weight = c.size() > 2 ? c[2] : 0.0;
    }
    if (view.title.empty())
      view.title = t.schedule + "  pp=" + std::to_string(t.pp) + "  microbatches=" + std::to_string(t.microbatches) +
                   (t.chunks > 1 ? "  chunks=" + std::to_string(t.chunks) : "");
    scene = viz::draw_timeline(viz::Timeline(viz::teaching_trace(t)), view);
    double y = scene.height;
    for (const std::string& line : viz::phase_legend(t.schedule)) {
      scene.texts.push_back({12, y, line, view.palette.text, 11});
      y += 16;
    }
    scene.height = y + 4;
  } else {
    if (args.positional().size() != 1) throw UsageError("expected one trace file (or --schedule NAME)");
    const std::string path = args.positional()[0];
    const viz::Timeline a(core::read_trace(path), step);
    if (auto other = args.value("compare")) {
      const viz::Timeline b(core::read_trace(*other), step);
      scene = viz::draw_comparison(a, b, path, *other, view);
    } else {
      if (view.title.empty()) view.title = path + " (" + a.trace().source + ")";
      scene = viz::draw_timeline(a, view);
    }
  }

  if (ends_with(*output, ".svg")) {
    core::write_file_atomically(*output, viz::scene_to_svg(scene));
  } else {
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) setenv("QT_QPA_PLATFORM", "offscreen", 0);
    int qt_argc = 1;
    char name[] = "quintnet-render";
    char* qt_argv[] = {name, nullptr};
    QGuiApplication app(qt_argc, qt_argv);
    write_png(scene, *output);
  }
  std::cout << "wrote " << *output << " (" << static_cast<int>(scene.width) << "x" << static_cast<int>(scene.height)
            << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet render", [&] { return render(argc, argv); });
}
