#pragma once
// The viewer's desktop window around the TimelineWidget:
//   menu and toolbar   File: open (Ctrl+O), open recent, compare with..., export PNG/SVG,
//                      follow the file (reload as it is rewritten); View: fit, critical
//                      path, dark palette; search box (visualizer/model/filter.h)
//   Details panel      the clicked op (visualizer/model/details.h), a button to jump to
//                      its message partner, its collective's other members (click one to
//                      go there), each pipeline stage's time in the op's step, the
//                      critical path's shares
//   Lanes              auto (grouped per pipeline stage above 256 ranks), every rank, per
//                      stage, per stage and replica, per node (visualizer/model/grouping.h);
//                      double-click a group's lane to see its ranks
//   Schedule panel     teaching mode: schedule, pp, microbatches, chunks; show, play, step
// Files can be dropped on the window (two: compared).  A file that cannot be read opens a
// dialog with the one-line reason; the window keeps what it showed.
#include <QDateTime>
#include <QMainWindow>
#include <QTimer>
#include <functional>

#include "visualizer/model/teaching.h"
#include "visualizer/qt/sources.h"
#include "visualizer/qt/timeline_widget.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QMenu;
class QPushButton;
class QSpinBox;

namespace quintnet::viz {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(Sources sources, QWidget* parent = nullptr);

  // Each returns false (after showing the reason in a dialog) when the file is refused.
  bool open_trace(const QString& path);
  bool compare_with(const QString& path);
  bool export_to(const QString& path);  // .png or .svg
  void show_schedule(const TeachingSchedule& t);
  // The file shown (opened from the command line): compared with, followed, remembered.
  void set_current_file(const QString& path);
  // A grouped lane double-clicked: every rank's lanes, searched down to that group's.
  void expand_group(const std::string& label);
  // Reload the followed file now when it changed since it was read (the timer calls it).
  void poll_followed_file();

  TimelineWidget* timeline() const { return timeline_; }
  QLineEdit* search_box() const { return search_; }
  QLabel* details() const { return details_; }
  QPushButton* partner_button() const { return partner_; }
  QListWidget* members() const { return members_; }
  QAction* action(const QString& object_name) const;  // "open", "compare", "critical-path", ...
  QComboBox* group_by() const { return group_by_; }   // the lanes: auto, all ranks, per pp, ...
  QStringList recent_files() const;

  // Asks for a file to open (save: to write); the dialog by default, replaced in tests.
  std::function<QString(const QString& caption, bool save)> choose_file;

 protected:
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;

 private:
  void build_menus();
  // The toolbar: file actions, Fit and the view toggles, the lane grouping, the search.
  void build_toolbar(const QList<QAction*>& toggles);
  QWidget* build_details_panel();
  QWidget* build_schedule_panel();
  void show_details(int source, long event);
  void refresh_summary();
  void remember(const QString& path);
  void rebuild_recent_menu();
  void report(const QString& what, const std::string& why);  // the dialog
  void show_file(const QString& path);  // reads and shows it, grouped as the toolbar says; throws

  TimelineWidget* timeline_ = nullptr;
  QLineEdit* search_ = nullptr;
  QLabel* details_ = nullptr;
  QLabel* summary_ = nullptr;
  QPushButton* partner_ = nullptr;
  QListWidget* members_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  QComboBox* schedule_ = nullptr;
  QComboBox* group_by_ = nullptr;  // lanes: auto, every rank, per stage, ...
  QSpinBox *pp_ = nullptr, *microbatches_ = nullptr, *chunks_ = nullptr;
  long partner_event_ = -1;
  int details_source_ = 0;
  QString current_file_;
  QDateTime current_mtime_;
  QTimer follow_timer_;
};

}  // namespace quintnet::viz
