#include "visualizer/qt/main_window.h"

#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QToolBar>
#include <QVBoxLayout>

#include "core/atomic_file.h"
#include "core/error.h"
#include "visualizer/model/details.h"
#include "visualizer/model/grouping.h"
#include "visualizer/model/svg_writer.h"
#include "visualizer/qt/png_writer.h"

namespace quintnet::viz {
namespace {

constexpr int kRecentFiles = 8;
const char* const kHelp = "click: details   wheel: zoom   drag: pan   shift+drag: select   F: fit   N/P: step";

}  // namespace

MainWindow::MainWindow(Sources src, QWidget* parent) : QMainWindow(parent) {
  choose_file = [this](const QString& caption, bool save) {
    const QString filter = save ? "Images (*.png *.svg)" : "Traces (*.json);;All files (*)";
    return save ? QFileDialog::getSaveFileName(this, caption, QString(), filter)
                : QFileDialog::getOpenFileName(this, caption, QString(), filter);
  };
  const bool teaching = !src.legend.empty();
  setWindowTitle(QString::fromStdString("QuintNet — " + src.names.at(0)));
  timeline_ = new TimelineWidget(std::move(src.a), std::move(src.b), src.view, src.names);
  auto* scroll = new QScrollArea;
  scroll->setWidget(timeline_);
  scroll->setWidgetResizable(true);
  setCentralWidget(scroll);
  setAcceptDrops(true);

  auto* details = new QDockWidget("Details", this);
  details->setObjectName("details-panel");
  details->setWidget(build_details_panel());
  addDockWidget(Qt::RightDockWidgetArea, details);
  auto* schedule = new QDockWidget("Schedule", this);
  schedule->setObjectName("schedule-panel");
  schedule->setWidget(build_schedule_panel());
  addDockWidget(Qt::LeftDockWidgetArea, schedule);
  schedule->setVisible(teaching);
  build_menus();
  menuBar()->addMenu("&Panels")->addActions({details->toggleViewAction(), schedule->toggleViewAction()});

  connect(timeline_, &TimelineWidget::op_selected, this, &MainWindow::show_details);
  connect(timeline_, &TimelineWidget::content_changed, this, [this] {
    details_->setText("Click an op to see it here.");
    partner_->setEnabled(false);
    members_->clear();
    refresh_summary();
  });
  connect(timeline_, &TimelineWidget::lane_activated, this, &MainWindow::expand_group);
  connect(&follow_timer_, &QTimer::timeout, this, &MainWindow::poll_followed_file);
  follow_timer_.setInterval(1000);
  refresh_summary();
  statusBar()->showMessage(kHelp);
  resize(static_cast<int>(src.view.width) + 320, 760);
}

void MainWindow::build_menus() {
  auto add = [this](QMenu* menu, const char* name, const QString& text, QKeySequence key, auto slot) {
    QAction* a = menu->addAction(text);
    a->setObjectName(name);
    if (!key.isEmpty()) a->setShortcut(key);
    connect(a, &QAction::triggered, this, slot);
    return a;
  };
  QMenu* file = menuBar()->addMenu("&File");
  add(file, "open", "&Open trace...", QKeySequence::Open, [this] {
    const QString path = choose_file("Open a trace", false);
    if (!path.isEmpty()) open_trace(path);
  });
  recent_menu_ = file->addMenu("Open &recent");
  add(file, "compare", "&Compare with...", QKeySequence("Ctrl+K"), [this] {
    const QString path = choose_file("Compare with a trace", false);
    if (!path.isEmpty()) compare_with(path);
  });
  add(file, "export", "&Export PNG/SVG...", QKeySequence("Ctrl+E"), [this] {
    const QString path = choose_file("Export the timeline", true);
    if (!path.isEmpty()) export_to(path);
  });
  QAction* follow = add(file, "follow", "&Follow the file (reload as it grows)", QKeySequence("Ctrl+L"), [this](bool on) {
    if (on) follow_timer_.start();
    else follow_timer_.stop();
  });
  follow->setCheckable(true);
  file->addSeparator();
  add(file, "quit", "&Quit", QKeySequence::Quit, [this] { close(); });
  rebuild_recent_menu();

  QMenu* view = menuBar()->addMenu("&View");
  add(view, "fit", "&Fit", QKeySequence("F"), [this] { timeline_->fit(); });
  QAction* critical = add(view, "critical-path", "&Critical path", QKeySequence("C"), [this](bool on) {
    timeline_->set_critical_path(on);
  });
  critical->setCheckable(true);
  critical->setChecked(timeline_->critical_paths() != nullptr);
  QAction* dark = add(view, "dark", "&Dark palette", QKeySequence("Ctrl+D"), [this](bool on) {
    timeline_->set_palette(on ? Palette::dark() : Palette::light());
  });
  dark->setCheckable(true);

  build_toolbar({critical, dark, follow});
}

void MainWindow::build_toolbar(const QList<QAction*>& toggles) {
  QToolBar* bar = addToolBar("Main");
  bar->setObjectName("toolbar");
  bar->setMovable(false);
  bar->addActions({action("open"), action("compare"), action("export")});
  bar->addSeparator();
  bar->addActions({action("fit")});
  bar->addActions(toggles);
  bar->addSeparator();
  group_by_ = new QComboBox;
  group_by_->setObjectName("group-by");
  for (const auto& [text, axes] : {std::pair{"lanes: auto", ""}, {"lanes: every rank", "none"}, {"lanes: per stage", "pp"},
                                   {"lanes: per stage and replica", "pp,dp"}, {"lanes: per node", "node"}})
    group_by_->addItem(text, QString(axes));
  group_by_->setToolTip("Grouped lanes show each group's median op, with whiskers from the earliest start to the latest end");
  bar->addWidget(group_by_);
  connect(group_by_, &QComboBox::currentIndexChanged, this, [this] {
    if (current_file_.isEmpty()) return;
    try {
      show_file(current_file_);
    } catch (const core::UserError& e) {
      report("Cannot regroup " + current_file_, e.what());
    }
  });
  search_ = new QLineEdit;
  search_->setObjectName("search");
  search_->setPlaceholderText("search: forward mb=3 pp=1 rank=5 dur>2ms ...");
  search_->setClearButtonEnabled(true);
  search_->setMinimumWidth(320);
  bar->addWidget(search_);
  connect(search_, &QLineEdit::returnPressed, this, [this] {
    try {
      timeline_->set_filter(search_->text().toStdString());
      statusBar()->showMessage(timeline_->filter().empty() ? kHelp
                                                            : QString("showing the ops that match '%1'").arg(search_->text()));
    } catch (const core::UserError& e) {
      statusBar()->showMessage(QString::fromStdString(e.what()));
    }
  });
}

QWidget* MainWindow::build_details_panel() {
  auto* panel = new QWidget;
  auto* layout = new QVBoxLayout(panel);
  details_ = new QLabel("Click an op to see it here.");
  details_->setObjectName("details");
  details_->setTextFormat(Qt::PlainText);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setWordWrap(true);
  partner_ = new QPushButton("Jump to the message partner");
  partner_->setObjectName("partner");
  partner_->setEnabled(false);
  connect(partner_, &QPushButton::clicked, this, [this] {
    if (partner_event_ >= 0) timeline_->select_op(details_source_, partner_event_);
  });
  members_ = new QListWidget;
  members_->setObjectName("members");
  members_->setMaximumHeight(120);
  connect(members_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    timeline_->select_op(details_source_, item->data(Qt::UserRole).toLongLong());
  });
  summary_ = new QLabel;
  summary_->setObjectName("summary");
  summary_->setTextFormat(Qt::PlainText);
  summary_->setWordWrap(true);
  layout->addWidget(details_);
  layout->addWidget(partner_);
  layout->addWidget(new QLabel("Collective members (activate one to go there):"));
  layout->addWidget(members_);
  layout->addWidget(summary_);
  layout->addStretch();
  panel->setMinimumWidth(280);
  return panel;
}

QWidget* MainWindow::build_schedule_panel() {
  auto* panel = new QWidget;
  auto* form = new QFormLayout(panel);
  schedule_ = new QComboBox;
  schedule_->addItems({"afab", "1f1b", "interleaved", "zb-h1"});
  schedule_->setCurrentText("1f1b");
  auto spin = [](int lo, int hi, int value) {
    auto* s = new QSpinBox;
    s->setRange(lo, hi);
    s->setValue(value);
    return s;
  };
  pp_ = spin(1, 64, 4);
  microbatches_ = spin(1, 256, 8);
  chunks_ = spin(1, 8, 2);
  form->addRow("schedule", schedule_);
  form->addRow("pp", pp_);
  form->addRow("microbatches", microbatches_);
  form->addRow("chunks (interleaved)", chunks_);
  auto* show = new QPushButton("Show");
  show->setObjectName("show-schedule");
  auto* play = new QPushButton("Play / pause");
  auto* step = new QPushButton("Step");
  form->addRow(show);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(play);
  buttons->addWidget(step);
  form->addRow(buttons);
  connect(show, &QPushButton::clicked, this, [this] {
    TeachingSchedule t;
    t.schedule = schedule_->currentText().toStdString();
    t.pp = pp_->value();
    t.microbatches = microbatches_->value();
    t.chunks = t.schedule == "interleaved" ? chunks_->value() : 1;
    if (t.schedule == "zb-h1") t.backward_input = 1, t.backward_weight = 1;
    show_schedule(t);
  });
  connect(play, &QPushButton::clicked, this, [this] { timeline_->set_playing(!timeline_->playing()); });
  connect(step, &QPushButton::clicked, this, [this] { timeline_->step_once(); });
  return panel;
}

QAction* MainWindow::action(const QString& object_name) const { return findChild<QAction*>(object_name); }

void MainWindow::show_file(const QString& path) {
  Sources s = trace_sources(core::read_trace(path.toStdString()), QFileInfo(path).fileName().toStdString(),
                            group_by_->currentData().toString().toStdString());
  const std::string title = s.view.title;
  timeline_->set_timelines(std::move(s.a), nullptr, s.names, title, std::move(s.view.spread));
}

bool MainWindow::open_trace(const QString& path) {
  try {
    show_file(path);
  } catch (const core::UserError& e) {
    report("Cannot open " + path, e.what());
    return false;
  }
  set_current_file(path);
  search_->clear();
  return true;
}

void MainWindow::set_current_file(const QString& path) {
  current_file_ = path;
  current_mtime_ = QFileInfo(path).lastModified();
  setWindowTitle("QuintNet — " + path);
  remember(path);
}

bool MainWindow::compare_with(const QString& path) {
  if (timeline_->comparing() || current_file_.isEmpty()) {
    report("Cannot compare", "open one trace first (File > Open); the view compares two");
    return false;
  }
  try {
    // One step of each: the first trace's median step against the second's first.
    Sources s = compare_sources(current_file_.toStdString(), path.toStdString());
    timeline_->set_timelines(std::move(s.a), std::move(s.b), s.names, "");
  } catch (const core::UserError& e) {
    report("Cannot compare with " + path, e.what());
    return false;
  }
  setWindowTitle("QuintNet — " + current_file_ + " vs " + path);
  remember(path);
  return true;
}

bool MainWindow::export_to(const QString& path) {
  try {
    const std::string p = path.toStdString();
    if (path.endsWith(".svg")) core::write_file_atomically(p, scene_to_svg(timeline_->scene()));
    else if (path.endsWith(".png")) write_png(timeline_->scene(), p);
    else throw core::UserError(p + ": the name must end in .png or .svg");
  } catch (const core::UserError& e) {
    report("Cannot export", e.what());
    return false;
  }
  statusBar()->showMessage("wrote " + path);
  return true;
}

void MainWindow::show_schedule(const TeachingSchedule& t) {
  try {
    Sources s = teaching_sources(t);
    const std::string name = s.names[0];
    timeline_->set_timelines(std::move(s.a), nullptr, s.names, name);
    current_file_.clear();
    setWindowTitle(QString::fromStdString("QuintNet — " + name));
  } catch (const core::UserError& e) {
    statusBar()->showMessage(QString::fromStdString(e.what()));
  }
}

void MainWindow::expand_group(const std::string& label) {
  const std::string search = expand_search(label);
  if (current_file_.isEmpty() || label.find("\u00d7") == std::string::npos || search.empty()) return;  // not a group
  group_by_->setCurrentIndex(group_by_->findData("none"));  // every rank, re-read
  search_->setText(QString::fromStdString(search));
  emit search_->returnPressed();
}

void MainWindow::poll_followed_file() {
  if (current_file_.isEmpty()) return;
  const QFileInfo info(current_file_);
  if (!info.exists() || info.lastModified() == current_mtime_) return;
  try {
    const std::string filter = timeline_->filter();
    show_file(current_file_);
    if (!filter.empty()) timeline_->set_filter(filter);
    current_mtime_ = info.lastModified();
    statusBar()->showMessage("reloaded " + current_file_ + " (" + info.lastModified().toString("hh:mm:ss") + ")");
  } catch (const core::UserError& e) {
    // A writer between two steps may leave a file the reader refuses: try again later.
    statusBar()->showMessage(QString("following: %1").arg(e.what()));
  }
}

QStringList MainWindow::recent_files() const {
  return QSettings("QuintNet", "quintnet-view").value("recent_files").toStringList();
}

void MainWindow::remember(const QString& path) {
  QStringList recent = recent_files();
  const QString full = QFileInfo(path).absoluteFilePath();
  recent.removeAll(full);
  recent.prepend(full);
  while (recent.size() > kRecentFiles) recent.removeLast();
  QSettings("QuintNet", "quintnet-view").setValue("recent_files", recent);
  rebuild_recent_menu();
}

void MainWindow::rebuild_recent_menu() {
  recent_menu_->clear();
  for (const QString& path : recent_files())
    connect(recent_menu_->addAction(path), &QAction::triggered, this, [this, path] { open_trace(path); });
  recent_menu_->setEnabled(!recent_menu_->isEmpty());
}

void MainWindow::show_details(int source, long event) {
  const Timeline& tl = timeline_->timeline(source);
  const OpDetails d = op_details(tl, event);
  details_source_ = source;
  details_->setText(QString::fromStdString([&] {
    std::string text;
    for (const std::string& line : d.lines) text += line + "\n";
    return text;
  }()));
  partner_event_ = d.partner;
  partner_->setEnabled(d.partner >= 0);
  members_->clear();
  for (long m : d.members) {
    const core::TraceEvent& e = tl.trace().events[static_cast<size_t>(m)];
    auto* item = new QListWidgetItem(QString("rank %1: %2 at %3").arg(e.rank).arg(QString::fromStdString(e.name))
                                         .arg(QString::fromStdString(duration_text(e.ts_us - tl.begin_us()))));
    item->setData(Qt::UserRole, static_cast<qlonglong>(m));
    members_->addItem(item);
  }
  refresh_summary();
}

void MainWindow::refresh_summary() {
  std::string text;
  if (const auto* paths = timeline_->critical_paths())
    for (const CriticalPath& p : *paths) text += "step " + std::to_string(p.step) + ": " + critical_path_summary(p) + "\n";
  const Timeline& tl = timeline_->timeline();
  const auto selected = timeline_->selected_op();
  const int step = selected ? timeline_->timeline(selected->first).trace().events[static_cast<size_t>(selected->second)].step
                            : tl.steps().front();
  text += "\nstep " + std::to_string(step) + " by pipeline stage:\n";
  for (const std::string& line : stage_summary(selected ? timeline_->timeline(selected->first) : tl, step)) text += line + "\n";
  summary_->setText(QString::fromStdString(text));
}

void MainWindow::report(const QString& what, const std::string& why) {
  // Window-modal but not blocking: the event loop (and tests) go on while it is open.
  auto* box = new QMessageBox(QMessageBox::Warning, "QuintNet", what, QMessageBox::Ok, this);
  box->setObjectName("error-dialog");
  box->setInformativeText(QString::fromStdString(why));
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
  statusBar()->showMessage(QString::fromStdString(why));
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  const QList<QUrl> urls = e->mimeData()->urls();
  if (urls.isEmpty()) return;
  if (open_trace(urls[0].toLocalFile()) && urls.size() > 1) compare_with(urls[1].toLocalFile());
  e->acceptProposedAction();
}

}  // namespace quintnet::viz
