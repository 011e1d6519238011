// Painting with Qt's offscreen platform: a 1F1B pp4 m8 schedule's pixels have each
// op's colour where the op runs and the bubble colour where the rank is idle; the
// render command writes PNG and SVG and refuses bad traces with exit 2.
#include <gtest/gtest.h>

#include <QApplication>
#include <QImage>
#include <cstdlib>
#include <fstream>

#include "common/private_temp_dir.h"
#include "common/run_command.h"
#include "core/trace.h"
#include "visualizer/model/teaching.h"
#include "visualizer/qt/offscreen.h"
#include "visualizer/qt/scene_painter.h"

using namespace quintnet;
using namespace quintnet::viz;
using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

namespace {

Color pixel(const QImage& img, double x, double y) {
  const QRgb p = img.pixel(static_cast<int>(x), static_cast<int>(y));
  return {static_cast<std::uint8_t>(qRed(p)), static_cast<std::uint8_t>(qGreen(p)), static_cast<std::uint8_t>(qBlue(p))};
}

QImage paint(const Scene& s) {
  QImage img(static_cast<int>(s.width), static_cast<int>(s.height), QImage::Format_RGB32);
  QPainter painter(&img);
  paint_scene(painter, s);
  return img;
}

}  // namespace

TEST(Render, OneFOneBPixelsShowOpsAndBubblesWhereTheScheduleHasThem) {
  const Timeline tl(teaching_trace({}));  // 1f1b, pp 4, m 8, tf 1, tb 2
  ViewOptions view;
  view.flows = false;  // arrows cross other ranks' rows; checked in the scene model
  const Geometry g = timeline_geometry(tl, view);
  const QImage img = paint(draw_timeline(tl, view));
  int checked_ops = 0, checked_bubbles = 0;
  for (size_t i = 0; i < tl.rows().size(); ++i) {
    const Row& row = tl.rows()[i];
    if (row.lane != core::Lane::Compute) continue;
    const double y = g.row_y[i] + 4;  // inside the box, above the label text
    for (size_t idx : row.events) {
      const auto& e = tl.trace().events[idx];
      if (e.dur_us <= 0) continue;  // GRAD_SYNC, OPTIMIZER_STEP cost nothing here
      EXPECT_EQ(pixel(img, g.x_of(e.ts_us) + 3, y), view.palette.of_op(e.kind, e.mb))
          << "rank " << row.rank << " " << e.name;
      ++checked_ops;
    }
    for (const Interval& b : tl.bubbles(row.rank)) {
      EXPECT_EQ(pixel(img, (g.x_of(b.begin_us) + g.x_of(b.end_us)) / 2, y), view.palette.bubble) << "rank " << row.rank;
      ++checked_bubbles;
    }
  }
  EXPECT_EQ(checked_ops, 4 * 8 * 2);
  EXPECT_GE(checked_bubbles, 4 + 3);  // every rank idles in cool-down, ranks 1-3 in warm-up too
}

TEST(Render, CommandWritesPngAndSvgAndRefusesBadTraces) {
  const std::string dir = ::testing::TempDir();
  auto r = run_command(bin("quintnet-render") + " --schedule 1f1b --pp 4 --microbatches 8 -o " + dir + "/s.png");
  ASSERT_EQ(r.code, 0) << r.err;
  QImage img(QString::fromStdString(dir + "/s.png"));
  EXPECT_EQ(img.width(), 1600);
  r = run_command(bin("quintnet-render") + " --schedule zb-h1 --pp 4 --microbatches 8 --palette dark -o " + dir + "/s.svg");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream svg(dir + "/s.svg");
  std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(text.find("backward-weight"), std::string::npos);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"empty.json", ""},
      {"truncated.json", "{\"traceEvents\": [{\"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": 1"},
      {"no_events.json", "{\"traceEvents\": []}"},
      {"huge.json", "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"F0\", \"cat\": \"forward\", \"pid\": 0, \"tid\": 0, "
                    "\"ts\": 1e308, \"dur\": 1e308, \"args\": {}}]}"},
      {"not_json.json", "hello"},
  };
  for (const auto& [name, content] : bad) {
    const std::string path = write_file(name, content);
    r = run_command(bin("quintnet-render") + " " + path + " -o " + dir + "/bad.png");
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find("quintnet render"), std::string::npos) << name << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << name << ": " << r.err;
  }
}

// `render A --compare B` sets one step against one: by default A's median step (spans
// 10, 30 and 20 ms: step 2) against B's first (15 ms, numbered 4 as a simulation may
// number it), never A's three steps against B's one; --step / --compare-step choose.
TEST(Render, CompareAlignsOneStepOfEachTrace) {
  auto trace_of = [](const std::vector<std::pair<int, double>>& steps) {  // (step, span ms), one op each
    core::Trace t;
    t.source = "exec";
    t.ranks = {{0, 0, 0}};
    double at = 0;
    for (const auto& [step, ms] : steps) {
      core::TraceEvent e;
      e.name = "F0", e.kind = "forward", e.step = step, e.mb = 0, e.ts_us = at, e.dur_us = ms * 1000;
      t.events.push_back(e);
      at += ms * 1000 + 5000;
    }
    return t;
  };
  const std::string dir = ::testing::TempDir();
  core::write_trace(trace_of({{0, 10}, {1, 30}, {2, 20}}), dir + "/measured.json");
  core::write_trace(trace_of({{4, 15}}), dir + "/simulated.json");
  auto header = [&](const std::string& options) {
    auto r = run_command(bin("quintnet-render") + " " + dir + "/measured.json --compare " + dir + "/simulated.json " +
                         options + " -o " + dir + "/compare.svg");
    EXPECT_EQ(r.code, 0) << r.err;
    std::ifstream svg(dir + "/compare.svg");
    const std::string text((std::istreambuf_iterator<char>(svg)), {});
    const size_t at = text.find("compare: step time");
    return at == std::string::npos ? text : text.substr(at, text.find('<', at) - at);
  };
  // The difference is the one `quintnet simulate --measured` reports: against the
  // measured trace's median step span (core::median_step_time_us), 20 ms.
  EXPECT_NE(header("").find("step time 20 ms vs 15 ms (-5 ms, -25.0%)"), std::string::npos) << header("");
  EXPECT_NE(header("--step 1").find("step time 30 ms vs 15 ms"), std::string::npos) << header("--step 1");
  auto r = run_command(bin("quintnet-render") + " " + dir + "/measured.json --compare " + dir +
                       "/simulated.json --compare-step 0 -o " + dir + "/compare.svg");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("step 0 is not in the trace"), std::string::npos) << r.err;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The painter's fonts and the viewer's widgets need an application; no display.
  quintnet::viz::use_offscreen_without_display();
  QApplication app(argc, argv);
  quintnet::testing_util::PrivateTempDir temp_dir;
  return temp_dir.finish(RUN_ALL_TESTS());
}
