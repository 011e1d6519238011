// quintnet-view: the interactive timeline viewer.
//   quintnet view runs/quickstart/train_trace.json
//   quintnet view measured.json simulated.json            (compare mode)
//   quintnet view --schedule 1f1b --pp 4 --microbatches 8  (teaching mode; space plays)
// Keys and mouse: see visualizer/qt/timeline_widget.h (also shown in the status bar).
#include <QApplication>
#include <QMainWindow>
#include <QScrollArea>
#include <QStatusBar>
#include <iostream>

#include "core/cli/main_guard.h"
#include "visualizer/qt/offscreen.h"
#include "visualizer/qt/sources.h"
#include "visualizer/qt/timeline_widget.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;

std::vector<OptionSpec> options() {
  std::vector<OptionSpec> o = {
      {"screenshot", "FILE", "render the window as it opens to FILE (.png) and exit (docs, headless checks)"},
      {"play", "", "teaching mode: start playing at once"},
  };
  o.insert(o.end(), viz::kSourceOptions.begin(), viz::kSourceOptions.end());
  return o;
}

int view(int argc, char** argv) {
  Args args("quintnet view", options(), argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("TRACE [TRACE2] | --schedule NAME [--pp P --microbatches M]")
              << "\nwheel: zoom at the cursor   drag: pan   shift+drag: select a range (statistics below)\n"
                 "F: fit   N/P: next/previous step   space: play/pause (teaching)   Esc: clear the selection\n";
    return 0;
  }
  viz::Sources src = viz::load_sources(args, args.positional());
  const auto screenshot = args.value("screenshot");
  if (screenshot) viz::use_offscreen_without_display();
  viz::QtArguments qt("quintnet-view");
  QApplication app(qt.argc, qt.argv);

  QMainWindow window;
  window.setWindowTitle(QString::fromStdString("QuintNet — " + src.names[0]));
  auto* widget = new viz::TimelineWidget(std::move(src.a), std::move(src.b), src.view, src.names);
  auto* scroll = new QScrollArea;
  scroll->setWidget(widget);
  scroll->setWidgetResizable(true);
  window.setCentralWidget(scroll);
  std::string help = "wheel: zoom   drag: pan   shift+drag: select   F: fit   N/P: step";
  if (!src.legend.empty()) help += "   space: play/pause";
  window.statusBar()->showMessage(QString::fromStdString(help));
  window.resize(static_cast<int>(src.view.width), 720);
  if (args.value("step")) widget->jump_to_step(args.get_int("step", 0, 0, 1 << 30));
  if (args.flag("play")) widget->set_playing(true);
  window.show();
  if (screenshot) {
    if (!window.grab().save(QString::fromStdString(*screenshot)))
      throw core::UserError(*screenshot + ": cannot write the screenshot");
    std::cout << "wrote " << *screenshot << "\n";
    return 0;
  }
  return app.exec();
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet view", [&] { return view(argc, argv); });
}
