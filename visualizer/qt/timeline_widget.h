#pragma once
// The interactive timeline: one trace, two compared, or a schedule being taught.
//   wheel            zoom around the cursor          drag             pan
//   shift+drag       select a range: per-rank busy / idle / communication below
//   F / 0            fit the whole timeline          N / P            next / previous step
//   space            teaching mode: play / pause (ops appear in time order)
//   hover            op, rank, mesh coordinates, microbatch, start, duration, bytes
//   click            select the op (outlined; op_selected tells the details panel)
//   double-click     on a lane's label: lane_activated (the window expands a group)
#include <QTimer>
#include <QWidget>
#include <memory>
#include <optional>

#include "visualizer/model/compare.h"
#include "visualizer/model/critical_path.h"
#include "visualizer/model/range_stats.h"
#include "visualizer/model/scene.h"

namespace quintnet::viz {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  TimelineWidget(std::unique_ptr<Timeline> a, std::unique_ptr<Timeline> b, ViewOptions view,
                 std::vector<std::string> names, QWidget* parent = nullptr);

  // What is shown: one timeline, or two compared (b non-null); `spread` for grouped
  // lanes (ViewOptions::spread).  Clears the selection, the filter and the playback,
  // and fits the window.
  void set_timelines(std::unique_ptr<Timeline> a, std::unique_ptr<Timeline> b, std::vector<std::string> names,
                     std::string title, std::shared_ptr<const std::vector<Interval>> spread = nullptr);
  const Timeline& timeline(int source = 0) const { return source == 1 && b_ ? *b_ : *a_; }
  bool comparing() const { return b_ != nullptr; }
  const std::vector<std::string>& names() const { return names_; }
  // The drawing as shown (for export and tests).
  Scene scene() const { return build_scene(); }

  void set_palette(const Palette& palette);
  // Draws each step's critical path over the timeline(s) when on.
  void set_critical_path(bool on);
  const std::vector<CriticalPath>* critical_paths() const { return view_.critical_paths.get(); }
  // Shows only the ops the search text keeps (visualizer/model/filter.h); "" shows all.
  // Throws core::UserError for a term it cannot read or when nothing matches, leaving
  // the view as it was.
  void set_filter(const std::string& text);
  const std::string& filter() const { return filter_; }
  // The lanes shown (rows of the first timeline).
  size_t row_count() const { return a_->rows().size(); }

  // The selected op: (which timeline, event index); the window moves to show it.
  void select_op(int source, long event);
  std::optional<std::pair<int, long>> selected_op() const { return selected_; }
  std::optional<std::pair<int, long>> op_at(QPoint p) const;
  // Teaching mode: reveal up to the next op's start.
  void step_once();

  // The time window shown, in the (first) trace's microseconds.
  double window_begin_us() const { return t0_; }
  double window_end_us() const { return t1_; }
  void set_window(double t0_us, double t1_us);
  void fit();
  void jump_to_step(int step);  // fits the window to that step's events
  // The rubber-band selection (empty when none) and its statistics.
  std::optional<std::pair<double, double>> selection() const { return selection_; }
  const std::vector<RankRangeStats>& selection_stats() const { return selection_stats_; }
  // Teaching mode.
  void set_playing(bool on);
  bool playing() const { return timer_.isActive(); }
  double reveal_until_us() const { return reveal_; }
  // What the tooltip shows at a widget position ("" when no op is there).
  std::string describe_at(QPoint p) const;

 signals:
  void op_selected(int source, long event);
  void content_changed();  // timelines, filter or critical path replaced
  void lane_activated(const std::string& label);  // a compute lane double-clicked

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  bool event(QEvent* e) override;  // tooltips

 private:
  Scene build_scene() const;
  Geometry geometry() const;
  void select(double t0, double t1);

  void reset_view();

  std::unique_ptr<Timeline> a_, b_;
  std::unique_ptr<Timeline> full_a_, full_b_;  // the unfiltered timelines while a filter is on
  std::string filter_;
  std::shared_ptr<const std::vector<Interval>> spread_;  // grouped lanes' whiskers (hidden while filtered)
  bool critical_path_ = false;
  std::optional<std::pair<int, long>> selected_;
  ViewOptions view_;
  std::vector<std::string> names_;
  double t0_ = 0, t1_ = 1, reveal_ = 0.0 / 0.0;
  enum class Drag { None, Pan, Select } drag_ = Drag::None;
  QPoint drag_start_;
  double drag_t0_ = 0, drag_t1_ = 0;
  std::optional<std::pair<double, double>> selection_;
  std::vector<RankRangeStats> selection_stats_;
  QTimer timer_;
};

}  // namespace quintnet::viz
