// The interactive viewer driven with QTest on the offscreen platform: wheel zoom keeps
// the time under the cursor, drag pans, shift+drag selects and computes the range's
// statistics, hover describes the op, play reveals ops in time order.
#include <gtest/gtest.h>

#include <QApplication>
#include <QTest>
#include <QWheelEvent>

#include "visualizer/model/teaching.h"
#include "visualizer/qt/timeline_widget.h"

using namespace quintnet;
using namespace quintnet::viz;

namespace {

struct Viewer {
  TimelineWidget* w;
  Viewer() : w(new TimelineWidget(std::make_unique<Timeline>(teaching_trace({})), nullptr, ViewOptions{}, {"1f1b"})) {
    w->resize(1600, 600);
    w->show();
  }
  ~Viewer() { delete w; }
  Geometry geometry() const {
    ViewOptions v;
    v.width = w->width();
    v.t0_us = w->window_begin_us();
    v.t1_us = w->window_end_us();
    Timeline tl(teaching_trace({}));
    return timeline_geometry(tl, v);
  }
};

}  // namespace

TEST(Viewer, WheelZoomKeepsTheTimeUnderTheCursor) {
  Viewer v;
  const double x = 700;
  const double t_before = v.geometry().t_of(x), span_before = v.w->window_end_us() - v.w->window_begin_us();
  QWheelEvent wheel(QPointF(x, 100), QPointF(x, 100), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                    Qt::NoScrollPhase, false);
  QApplication::sendEvent(v.w, &wheel);
  const double span_after = v.w->window_end_us() - v.w->window_begin_us();
  EXPECT_NEAR(span_after, 0.8 * span_before, 1e-6 * span_before);
  EXPECT_NEAR(v.geometry().t_of(x), t_before, 1e-6 * span_before);
}

TEST(Viewer, DragPansByTheDraggedTime) {
  Viewer v;
  const Geometry g = v.geometry();
  const double t0 = v.w->window_begin_us(), per_px = (g.t1_us - g.t0_us) / (g.plot_x1 - g.plot_x0);
  QTest::mousePress(v.w, Qt::LeftButton, Qt::NoModifier, QPoint(800, 100));
  QTest::mouseMove(v.w, QPoint(900, 100));
  QTest::mouseRelease(v.w, Qt::LeftButton, Qt::NoModifier, QPoint(900, 100));
  EXPECT_NEAR(v.w->window_begin_us(), t0 - 100 * per_px, 1e-6 * (g.t1_us - g.t0_us));
  EXPECT_FALSE(v.w->selection());
}

TEST(Viewer, ShiftDragSelectsARangeWithItsStatistics) {
  Viewer v;
  const Geometry g = v.geometry();
  QTest::mousePress(v.w, Qt::LeftButton, Qt::ShiftModifier, QPoint(400, 100));
  QTest::mouseMove(v.w, QPoint(1000, 100));
  QTest::mouseRelease(v.w, Qt::LeftButton, Qt::ShiftModifier, QPoint(1000, 100));
  ASSERT_TRUE(v.w->selection());
  EXPECT_NEAR(v.w->selection()->first, g.t_of(400), 1e-6);
  EXPECT_NEAR(v.w->selection()->second, g.t_of(1000), 1e-6);
  const auto expected = range_statistics(Timeline(teaching_trace({})), g.t_of(400), g.t_of(1000));
  ASSERT_EQ(v.w->selection_stats().size(), 4u);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(v.w->selection_stats()[i].rank, expected[i].rank);
    EXPECT_NEAR(v.w->selection_stats()[i].busy_us, expected[i].busy_us, 1e-6);
  }
  // The window did not move.
  EXPECT_NEAR(v.w->window_begin_us(), g.t0_us, 1e-9);
}

TEST(Viewer, HoverDescribesTheOpUnderTheCursor) {
  Viewer v;
  const Timeline tl(teaching_trace({}));
  const Geometry g = v.geometry();
  for (const auto& e : tl.trace().events)
    if (e.rank == 0 && e.kind == "forward" && e.mb == 3) {
      const std::string text =
          v.w->describe_at(QPoint(static_cast<int>(g.x_of(e.ts_us + e.dur_us / 2)), static_cast<int>(g.row_y[0] + 10)));
      EXPECT_NE(text.find("F3 (forward)"), std::string::npos) << text;
      EXPECT_NE(text.find("rank 0"), std::string::npos) << text;
      EXPECT_NE(text.find("microbatch 3"), std::string::npos) << text;
    }
  EXPECT_EQ(v.w->describe_at(QPoint(5, 5)), "");
}

TEST(Viewer, PlayRevealsOpsInTimeOrder) {
  Viewer v;
  EXPECT_TRUE(std::isnan(v.w->reveal_until_us()));
  v.w->set_playing(true);
  QTest::qWait(200);
  EXPECT_TRUE(v.w->playing());
  const double shown = v.w->reveal_until_us();
  EXPECT_GT(shown, 0);
  EXPECT_LT(shown, Timeline(teaching_trace({})).end_us());
  QTest::qWait(150);
  EXPECT_GT(v.w->reveal_until_us(), shown);
}

TEST(Viewer, KeyFFitsAfterZooming) {
  Viewer v;
  const double b = v.w->window_begin_us(), e = v.w->window_end_us();
  v.w->set_window(b + 1000, b + 2000);
  QTest::keyClick(v.w, Qt::Key_F);
  EXPECT_DOUBLE_EQ(v.w->window_begin_us(), b);
  EXPECT_DOUBLE_EQ(v.w->window_end_us(), e);
}
