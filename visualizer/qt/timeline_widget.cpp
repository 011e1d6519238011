#include "visualizer/qt/timeline_widget.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "visualizer/model/filter.h"
#include "visualizer/qt/scene_painter.h"

namespace quintnet::viz {

TimelineWidget::TimelineWidget(std::unique_ptr<Timeline> a, std::unique_ptr<Timeline> b, ViewOptions view,
                               std::vector<std::string> names, QWidget* parent)
    : QWidget(parent), a_(std::move(a)), b_(std::move(b)), view_(std::move(view)), names_(std::move(names)) {
  critical_path_ = view_.critical_paths != nullptr;
  spread_ = view_.spread;
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumSize(640, 240);
  fit();
  // Teaching mode's play: 1/150 of the timeline per 40 ms tick, ~6 s for the whole.
  timer_.setInterval(40);
  connect(&timer_, &QTimer::timeout, this, [this] {
    reveal_ += (a_->end_us() - a_->begin_us()) / 150;
    if (reveal_ >= a_->end_us()) {
      reveal_ = 0.0 / 0.0;
      timer_.stop();
    }
    update();
  });
}

void TimelineWidget::set_timelines(std::unique_ptr<Timeline> a, std::unique_ptr<Timeline> b,
                                   std::vector<std::string> names, std::string title,
                                   std::shared_ptr<const std::vector<Interval>> spread) {
  a_ = std::move(a);
  spread_ = std::move(spread);
  b_ = std::move(b);
  full_a_.reset();
  full_b_.reset();
  filter_.clear();
  names_ = std::move(names);
  view_.title = std::move(title);
  timer_.stop();
  reveal_ = 0.0 / 0.0;
  reset_view();
  fit();
}

// After the shown timelines changed: no selection, critical paths of the new ones.
void TimelineWidget::reset_view() {
  selected_.reset();
  selection_.reset();
  selection_stats_.clear();
  view_.spread = full_a_ ? nullptr : spread_;  // a filtered grouped view has other event indices
  view_.critical_paths = critical_path_ ? viz::critical_paths(*a_) : nullptr;
  view_.critical_paths_b = critical_path_ && b_ ? viz::critical_paths(*b_) : nullptr;
  emit content_changed();
  update();
}

void TimelineWidget::set_palette(const Palette& palette) {
  view_.palette = palette;
  update();
}

void TimelineWidget::set_critical_path(bool on) {
  critical_path_ = on;
  reset_view();
}

void TimelineWidget::set_filter(const std::string& text) {
  const EventFilter f = EventFilter::parse(text);  // throws before anything changes
  const Timeline& all_a = full_a_ ? *full_a_ : *a_;
  const Timeline* all_b = full_b_ ? full_b_.get() : b_.get();
  if (f.empty()) {
    if (full_a_) a_ = std::move(full_a_);
    if (full_b_) b_ = std::move(full_b_);
  } else {
    auto fa = std::make_unique<Timeline>(filter_trace(all_a.trace(), f, text));
    auto fb = all_b ? std::make_unique<Timeline>(filter_trace(all_b->trace(), f, text)) : nullptr;
    if (!full_a_) full_a_ = std::move(a_);
    if (b_ && !full_b_) full_b_ = std::move(b_);
    a_ = std::move(fa);
    b_ = std::move(fb);
  }
  filter_ = f.empty() ? "" : text;
  reset_view();
}

void TimelineWidget::select_op(int source, long event) {
  const Timeline& tl = timeline(source);
  if (event < 0 || static_cast<size_t>(event) >= tl.trace().events.size()) return;
  selected_ = {{source, event}};
  const core::TraceEvent& e = tl.trace().events[static_cast<size_t>(event)];
  // Keep the op in view: centre it when it is outside the window (compare mode's second
  // timeline is drawn from its own start).
  const double offset = source == 1 && b_ ? a_->begin_us() - b_->begin_us() : 0;
  const double t0 = e.ts_us + offset, t1 = e.end_us() + offset;
  if (t1 < t0_ || t0 > t1_) {
    const double span = t1_ - t0_;
    set_window((t0 + t1) / 2 - span / 2, (t0 + t1) / 2 + span / 2);
  }
  emit op_selected(source, event);
  update();
}

void TimelineWidget::step_once() {
  timer_.stop();
  double next = 1e300;
  const double now = std::isnan(reveal_) ? a_->begin_us() - 1 : reveal_;
  for (const auto& e : a_->trace().events)
    if (e.ts_us > now) next = std::min(next, e.ts_us);
  reveal_ = next < 1e300 ? next + 1e-3 : 0.0 / 0.0;
  update();
}

void TimelineWidget::set_window(double t0_us, double t1_us) {
  if (!(t1_us > t0_us)) return;
  t0_ = t0_us;
  t1_ = t1_us;
  update();
}

void TimelineWidget::fit() {
  const double span = b_ ? std::max(a_->end_us() - a_->begin_us(), b_->end_us() - b_->begin_us())
                         : a_->end_us() - a_->begin_us();
  set_window(a_->begin_us(), a_->begin_us() + std::max(span, 1.0));
}

void TimelineWidget::jump_to_step(int step) {
  double lo = 1e300, hi = -1e300;
  for (const auto& e : a_->trace().events)
    if (e.step == step) lo = std::min(lo, e.ts_us), hi = std::max(hi, e.end_us());
  if (hi > lo) set_window(lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo));
}

void TimelineWidget::set_playing(bool on) {
  if (on) {
    if (std::isnan(reveal_)) reveal_ = a_->begin_us();
    timer_.start();
  } else {
    timer_.stop();
  }
  update();
}

Geometry TimelineWidget::geometry() const {
  ViewOptions v = view_;
  v.width = width();
  v.t0_us = t0_;
  v.t1_us = t1_;
  return timeline_geometry(*a_, v);
}

Scene TimelineWidget::build_scene() const {
  ViewOptions v = view_;
  v.width = width();
  v.t0_us = t0_;
  v.t1_us = t1_;
  v.reveal_until_us = reveal_;
  Scene s;
  if (b_) {
    // Compare mode: the second timeline shows the same offset from its own start.
    s = draw_comparison(*a_, *b_, names_.at(0), names_.at(1), v);
  } else {
    s = draw_timeline(*a_, v);
  }
  const Geometry g = geometry();
  if (selected_) {
    for (const Box& b : s.boxes)
      if (b.event == selected_->second && b.source == selected_->first) {
        const Color c = view_.palette.selection;
        const double x0 = b.x - 1, y0 = b.y - 1, x1 = b.x + std::max(b.w, 2.0) + 1, y1 = b.y + b.h + 1;
        s.lines.push_back({x0, y0, x1, y0, c, 3});
        s.lines.push_back({x1, y0, x1, y1, c, 3});
        s.lines.push_back({x1, y1, x0, y1, c, 3});
        s.lines.push_back({x0, y1, x0, y0, c, 3});
        break;
      }
  }
  if (selection_) {
    const double x0 = g.x_of(selection_->first), x1 = g.x_of(selection_->second);
    s.lines.push_back({x0, g.ruler_y, x0, s.height, view_.palette.selection, 2});
    s.lines.push_back({x1, g.ruler_y, x1, s.height, view_.palette.selection, 2});
    double y = s.height + 16;
    char line[200];
    std::snprintf(line, sizeof(line), "selection %s (%s - %s):", duration_text(selection_->second - selection_->first).c_str(),
                  duration_text(selection_->first - a_->begin_us()).c_str(),
                  duration_text(selection_->second - a_->begin_us()).c_str());
    s.texts.push_back({12, y, line, view_.palette.text, 11, true});
    for (const RankRangeStats& r : selection_stats_) {
      y += 15;
      const double len = selection_->second - selection_->first;
      std::snprintf(line, sizeof(line), "rank %d: busy %s (%.0f%%), idle %s, communication %s", r.rank,
                    duration_text(r.busy_us).c_str(), len > 0 ? 100 * r.busy_us / len : 0.0,
                    duration_text(r.idle_us).c_str(), duration_text(r.comm_us).c_str());
      s.texts.push_back({12, y, line, view_.palette.text, 11});
    }
    s.height = y + 8;
  }
  return s;
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  const Scene s = build_scene();
  if (minimumHeight() < s.height) setMinimumHeight(static_cast<int>(s.height));
  QPainter p(this);
  paint_scene(p, s);
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  // Zoom around the cursor: the time under it stays under it.
  const Geometry g = geometry();
  const double x = std::clamp(e->position().x(), g.plot_x0, g.plot_x1);
  const double t = g.t_of(x);
  const double factor = std::pow(0.8, e->angleDelta().y() / 120.0);
  const double span = std::max((t1_ - t0_) * factor, 1e-3);
  const double left = (x - g.plot_x0) / (g.plot_x1 - g.plot_x0);
  set_window(t - left * span, t - left * span + span);
  e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  drag_ = (e->modifiers() & Qt::ShiftModifier) ? Drag::Select : Drag::Pan;
  drag_start_ = e->pos();
  drag_t0_ = t0_;
  drag_t1_ = t1_;
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  const Geometry g = geometry();
  if (drag_ == Drag::Pan) {
    const double dt = (e->pos().x() - drag_start_.x()) / (g.plot_x1 - g.plot_x0) * (drag_t1_ - drag_t0_);
    set_window(drag_t0_ - dt, drag_t1_ - dt);
  } else if (drag_ == Drag::Select) {
    select(g.t_of(drag_start_.x()), g.t_of(e->pos().x()));
  }
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (drag_ == Drag::Pan && (e->pos() - drag_start_).manhattanLength() < 4) {
    if (const auto op = op_at(e->pos())) select_op(op->first, op->second);
  } else if (drag_ == Drag::Select) {
    const Geometry g = geometry();
    select(g.t_of(drag_start_.x()), g.t_of(e->pos().x()));
  }
  drag_ = Drag::None;
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* e) {
  if (b_) return;  // compare mode stacks two timelines: rows are not the first's alone
  const int row = geometry().row_at(e->pos().y());
  if (row >= 0 && a_->rows()[static_cast<size_t>(row)].lane == core::Lane::Compute)
    emit lane_activated(a_->rows()[static_cast<size_t>(row)].label);
}

void TimelineWidget::select(double t0, double t1) {
  if (t1 < t0) std::swap(t0, t1);
  selection_ = {{t0, t1}};
  selection_stats_ = range_statistics(*a_, t0, t1);
  update();
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const auto steps = a_->steps();
  switch (e->key()) {
    case Qt::Key_F:
    case Qt::Key_0: fit(); break;
    case Qt::Key_Space: set_playing(!playing()); break;
    case Qt::Key_N:
    case Qt::Key_P: {
      // The step whose events start nearest after (N) or before (P) the window's middle.
      const double mid = (t0_ + t1_) / 2;
      std::optional<int> target;
      for (int s : steps) {
        double lo = 1e300;
        for (const auto& ev : a_->trace().events)
          if (ev.step == s) lo = std::min(lo, ev.ts_us);
        if (e->key() == Qt::Key_N && lo > mid && !target) target = s;
        if (e->key() == Qt::Key_P && lo < t0_) target = s;
      }
      if (target) jump_to_step(*target);
      break;
    }
    case Qt::Key_Escape:
      selected_.reset();
      selection_.reset();
      selection_stats_.clear();
      update();
      break;
    default: QWidget::keyPressEvent(e);
  }
}

std::optional<std::pair<int, long>> TimelineWidget::op_at(QPoint p) const {
  const Scene s = build_scene();
  for (auto it = s.boxes.rbegin(); it != s.boxes.rend(); ++it) {
    const Box& b = *it;
    if (b.event < 0 || p.x() < b.x || p.x() > b.x + std::max(b.w, 2.0) || p.y() < b.y || p.y() > b.y + b.h) continue;
    if (static_cast<size_t>(b.event) >= timeline(b.source).trace().events.size()) return std::nullopt;
    return std::make_pair(b.source, b.event);
  }
  return std::nullopt;
}

std::string TimelineWidget::describe_at(QPoint p) const {
  const auto op = op_at(p);
  if (!op) return "";
  const Timeline& tl = timeline(op->first);
  const core::TraceEvent& e = tl.trace().events[static_cast<size_t>(op->second)];
  const auto c = e.rank < static_cast<int>(tl.trace().ranks.size()) ? tl.trace().ranks[e.rank] : core::RankCoords{};
  char text[400];
  std::snprintf(text, sizeof(text), "%s (%s)\nrank %d  pp %d tp %d dp %d\nstep %d  microbatch %d  chunk %d\nstart %s  duration %s%s",
                e.name.c_str(), e.kind.c_str(), e.rank, c.pp, c.tp, c.dp, e.step, e.mb, e.chunk,
                duration_text(e.ts_us - tl.begin_us()).c_str(), duration_text(e.dur_us).c_str(),
                e.bytes > 0 ? ("\n" + std::to_string(e.bytes) + " bytes" + (e.peer >= 0 ? ", peer " + std::to_string(e.peer) : "")).c_str() : "");
  return text;
}

bool TimelineWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const std::string text = describe_at(help->pos());
    if (text.empty()) QToolTip::hideText();
    else QToolTip::showText(help->globalPos(), QString::fromStdString(text), this);
    return true;
  }
  return QWidget::event(e);
}

}  // namespace quintnet::viz
