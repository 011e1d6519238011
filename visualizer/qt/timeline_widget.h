#pragma once
// The interactive timeline: one trace, two compared, or a schedule being taught.
//   wheel            zoom around the cursor          drag             pan
//   shift+drag       select a range: per-rank busy / idle / communication below
//   F / 0            fit the whole timeline          N / P            next / previous step
//   space            teaching mode: play / pause (ops appear in time order)
//   hover            op, rank, mesh coordinates, microbatch, start, duration, bytes
#include <QTimer>
#include <QWidget>
#include <memory>
#include <optional>

#include "visualizer/model/compare.h"
#include "visualizer/model/range_stats.h"
#include "visualizer/model/scene.h"

namespace quintnet::viz {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  TimelineWidget(std::unique_ptr<Timeline> a, std::unique_ptr<Timeline> b, ViewOptions view,
                 std::vector<std::string> names, QWidget* parent = nullptr);

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

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  bool event(QEvent* e) override;  // tooltips

 private:
  Scene build_scene() const;
  Geometry geometry() const;
  void select(double t0, double t1);

  std::unique_ptr<Timeline> a_, b_;
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
