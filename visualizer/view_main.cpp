// quintnet-view: the interactive timeline viewer.
//   quintnet view runs/quickstart/train_trace.json
//   quintnet view measured.json simulated.json            (compare mode)
//   quintnet view --schedule 1f1b --pp 4 --microbatches 8  (teaching mode; space plays)
//   quintnet view                                          (1F1B taught; File > Open)
// The window: visualizer/qt/main_window.h; keys and mouse: timeline_widget.h.
#include <QApplication>
#include <QComboBox>
#include <QSignalBlocker>
#include <iostream>

#include "core/cli/main_guard.h"
#include "visualizer/qt/offscreen.h"
#include "visualizer/qt/sources.h"
#include "visualizer/qt/main_window.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;

std::vector<OptionSpec> options() {
  std::vector<OptionSpec> o = {
      {"screenshot", "FILE", "render the window as it opens to FILE (.png) and exit (docs, headless checks)"},
      {"play", "", "teaching mode: start playing at once"},
      {"select", "EVENT", "select the trace's EVENT-th op (its details shown) as the window opens"},
  };
  o.insert(o.end(), viz::kSourceOptions.begin(), viz::kSourceOptions.end());
  return o;
}

int view(int argc, char** argv) {
  Args args("quintnet view", options(), argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("[TRACE [TRACE2] | --schedule NAME [--pp P --microbatches M]]")
              << "\nclick: the op's details   wheel: zoom at the cursor   drag: pan   shift+drag: select a range\n"
                 "F: fit   C: critical path   N/P: next/previous step   space: play/pause (teaching)   Esc: clear\n"
                 "File menu: open, open recent, compare with, export PNG/SVG, follow a trace being written;\n"
                 "the toolbar's search box filters ops (forward mb=3 pp=1 rank=5 dur>2ms ...); drop files on the window.\n";
    return 0;
  }
  viz::Sources src = args.positional().empty() && !args.value("schedule") ? viz::teaching_sources({})
                                                                          : viz::load_sources(args, args.positional());
  const auto screenshot = args.value("screenshot");
  if (screenshot) viz::use_offscreen_without_display();
  viz::QtArguments qt("quintnet-view");
  QApplication app(qt.argc, qt.argv);

  const std::vector<std::string> files = args.positional();
  viz::MainWindow window(std::move(src));
  if (args.value("step")) window.timeline()->jump_to_step(args.get_int("step", 0, 0, 1 << 30));
  if (args.flag("play")) window.timeline()->set_playing(true);
  if (auto axes = args.value("group-by")) {  // the toolbar's lanes menu says what the command line chose
    const int item = window.group_by()->findData(QString::fromStdString(*axes));
    const QSignalBlocker quiet(window.group_by());
    if (item >= 0) window.group_by()->setCurrentIndex(item);
  }
  if (files.size() == 1) window.set_current_file(QString::fromStdString(files[0]));
  if (auto select = args.value("select")) window.timeline()->select_op(0, args.get_int("select", 0, 0, 1 << 30));
  window.show();
  if (screenshot) {
    // Two rounds of events: the first paint sizes the timeline (its height follows the
    // drawing), the second lays the window out around it.
    for (int round = 0; round < 2; ++round) {
      window.timeline()->repaint();
      QApplication::processEvents();
    }
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
