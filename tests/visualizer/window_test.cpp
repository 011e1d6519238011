// The viewer's desktop window driven with QTest, in a real X window under Xvfb (ctest
// Viewer.WindowXvfb) and on the offscreen platform (Viewer.WindowOffscreen): opening
// and comparing through the menu actions, clicking an op for its details, jumping to
// its message partner, searching, the critical path, bad files, following a file,
// dropping files, exporting, the schedule panel.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTest>
#include <QUrl>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/private_temp_dir.h"
#include "core/trace.h"
#include "visualizer/model/grouping.h"
#include "visualizer/model/teaching.h"
#include "visualizer/qt/main_window.h"
#include "visualizer/qt/offscreen.h"

using namespace quintnet;
using namespace quintnet::viz;

namespace {

std::string temp(const std::string& name) { return ::testing::TempDir() + "/window_" + name; }

// A schedule's trace on disk, as `quintnet schedule --trace` writes it.
QString schedule_file(const std::string& name, TeachingSchedule t = {}) {
  const std::string path = temp(name);
  core::write_trace(teaching_trace(t), path);
  return QString::fromStdString(path);
}

struct Window {
  MainWindow w;
  QString next_file;  // what the file dialog "chooses"
  Window() : w(teaching_sources({})) {
    w.choose_file = [this](const QString&, bool) { return next_file; };
    w.resize(1800, 800);
    w.show();
    EXPECT_TRUE(QTest::qWaitForWindowExposed(&w));
  }
  void choose(const QString& path, const char* action) {
    next_file = path;
    ASSERT_NE(w.action(action), nullptr) << action;
    w.action(action)->trigger();
  }
  // The centre of the op's box on screen, in the timeline widget's coordinates.
  QPoint centre_of(long event) const {
    for (const Box& b : w.timeline()->scene().boxes)
      if (b.event == event && b.source == 0) return QPoint(static_cast<int>(b.x + b.w / 2), static_cast<int>(b.y + b.h / 2));
    ADD_FAILURE() << "op " << event << " is not drawn";
    return {};
  }
  long find(int rank, const std::string& name_prefix) const {
    const auto& events = w.timeline()->timeline().trace().events;
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].rank == rank && events[i].name.rfind(name_prefix, 0) == 0) return static_cast<long>(i);
    return -1;
  }
  QMessageBox* dialog() const { return w.findChild<QMessageBox*>("error-dialog"); }
};

}  // namespace

TEST(Window, OpensATraceThroughTheMenuAndRemembersIt) {
  Window v;
  const QString path = schedule_file("zb.json", {"zb-h1", 2, 4, 1, 1, 1, 1});
  v.choose(path, "open");
  EXPECT_EQ(v.w.timeline()->timeline().trace().source, "schedule");
  EXPECT_EQ(v.w.timeline()->timeline().trace().num_ranks(), 2);
  EXPECT_TRUE(v.w.windowTitle().contains("window_zb.json"));
  EXPECT_EQ(v.w.recent_files().value(0), QFileInfo(path).absoluteFilePath());
  EXPECT_EQ(v.dialog(), nullptr);
}

TEST(Window, ClickingAnOpShowsItsDetailsAndJumpsToItsMessagePartner) {
  Window v;
  v.choose(schedule_file("1f1b.json"), "open");
  // Rank 1 waits for microbatch 0's activations from rank 0 (0 to 1 ms).
  const long recv = v.find(1, "RECV_ACT(mb 0");
  ASSERT_GE(recv, 0);
  QTest::mouseClick(v.w.timeline(), Qt::LeftButton, Qt::NoModifier, v.centre_of(recv));
  ASSERT_TRUE(v.w.timeline()->selected_op());
  EXPECT_EQ(v.w.timeline()->selected_op()->second, recv);
  const QString text = v.w.details()->text();
  EXPECT_TRUE(text.contains("RECV_ACT(mb 0")) << text.toStdString();
  EXPECT_TRUE(text.contains("rank 1   pp 1  tp 0  dp 0")) << text.toStdString();
  EXPECT_TRUE(text.contains("sent by SEND_ACT(mb 0")) << text.toStdString();
  ASSERT_TRUE(v.w.partner_button()->isEnabled());
  QTest::mouseClick(v.w.partner_button(), Qt::LeftButton);
  const auto partner = v.w.timeline()->selected_op();
  ASSERT_TRUE(partner);
  const core::TraceEvent& send = v.w.timeline()->timeline().trace().events[static_cast<size_t>(partner->second)];
  EXPECT_EQ(send.rank, 0);
  EXPECT_EQ(send.kind, "send");
  EXPECT_EQ(send.mb, 0);
  EXPECT_TRUE(v.w.details()->text().contains("received by RECV_ACT(mb 0"));
}

TEST(Window, SearchNarrowsTheLanesAndABadTermChangesNothing) {
  Window v;
  v.choose(schedule_file("search.json"), "open");
  const size_t all = v.w.timeline()->row_count();
  v.w.search_box()->setText("pp=2");
  QTest::keyClick(v.w.search_box(), Qt::Key_Return);
  EXPECT_LT(v.w.timeline()->row_count(), all);
  for (const core::TraceEvent& e : v.w.timeline()->timeline().trace().events) EXPECT_EQ(e.rank, 2);
  const size_t narrowed = v.w.timeline()->row_count();
  v.w.search_box()->setText("stage=2");
  QTest::keyClick(v.w.search_box(), Qt::Key_Return);
  EXPECT_EQ(v.w.timeline()->row_count(), narrowed);
  EXPECT_TRUE(v.w.statusBar()->currentMessage().contains("stage=2")) << v.w.statusBar()->currentMessage().toStdString();
  v.w.search_box()->setText("forward mb=3");
  QTest::keyClick(v.w.search_box(), Qt::Key_Return);
  EXPECT_EQ(v.w.timeline()->timeline().trace().events.size(), 4u);  // F3 on each of 4 stages
  v.w.search_box()->clear();
  QTest::keyClick(v.w.search_box(), Qt::Key_Return);
  EXPECT_EQ(v.w.timeline()->row_count(), all);
}

TEST(Window, TheCriticalPathOfUniformOneFOneBIsDrawnAndListed) {
  Window v;  // opens on 1F1B, pp 4, 8 microbatches (teaching)
  v.w.action("critical-path")->trigger();
  const auto* paths = v.w.timeline()->critical_paths();
  ASSERT_NE(paths, nullptr);
  ASSERT_EQ(paths->size(), 1u);
  EXPECT_NEAR(paths->front().length_us(), 33000, 1e-6);
  int outlined = 0;
  for (const Line& l : v.w.timeline()->scene().lines) outlined += l.color == Palette::light().critical;
  EXPECT_GE(outlined, 4 * 22);  // every compute op on the path outlined
  EXPECT_TRUE(v.w.findChild<QLabel*>("summary")->text().contains("critical path 33 ms: backward 66.7%, forward 33.3%"));
  v.w.action("critical-path")->trigger();
  EXPECT_EQ(v.w.timeline()->critical_paths(), nullptr);
}

TEST(Window, CompareOpensFromTheMenuOneStepEach) {
  Window v;
  v.choose(schedule_file("a.json"), "open");
  v.choose(schedule_file("b.json", {"interleaved", 4, 8, 2}), "compare");
  ASSERT_TRUE(v.w.timeline()->comparing());
  bool header = false;
  for (const Text& t : v.w.timeline()->scene().texts) header |= t.text.rfind("compare: step time 33 ms vs", 0) == 0;
  EXPECT_TRUE(header);
  EXPECT_EQ(v.dialog(), nullptr);
}

TEST(Window, ABadFileOpensADialogWithTheReasonAndTheWindowKeepsWorking) {
  Window v;
  v.choose(schedule_file("good.json"), "open");
  const std::string bad = temp("bad.json");
  std::ofstream(bad) << "{\"traceEvents\": [ {\"ph\": \"X\", ";
  v.choose(QString::fromStdString(bad), "open");
  QMessageBox* box = v.dialog();
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->isVisible());
  EXPECT_TRUE(box->informativeText().contains("window_bad.json")) << box->informativeText().toStdString();
  EXPECT_EQ(v.w.timeline()->timeline().trace().num_ranks(), 4);  // still the good trace
  box->accept();
  QTest::qWait(10);
  v.choose(QString::fromStdString(temp("missing.json")), "compare");
  ASSERT_NE(v.dialog(), nullptr);
  EXPECT_FALSE(v.w.timeline()->comparing());
  v.dialog()->accept();
  QTest::qWait(10);
  v.choose(schedule_file("good2.json", {"1f1b", 2, 4}), "open");  // works after both
  EXPECT_EQ(v.w.timeline()->timeline().trace().num_ranks(), 2);
}

TEST(Window, FollowingAFileReloadsItWhenItIsRewritten) {
  Window v;
  const QString path = schedule_file("follow.json", {"1f1b", 2, 4});
  v.choose(path, "open");
  v.w.action("follow")->trigger();
  EXPECT_TRUE(v.w.action("follow")->isChecked());
  v.w.poll_followed_file();  // unchanged: nothing happens
  EXPECT_EQ(v.w.timeline()->timeline().trace().num_ranks(), 2);
  core::write_trace(teaching_trace({"1f1b", 3, 6}), path.toStdString());
  const auto later = std::filesystem::last_write_time(path.toStdString()) + std::chrono::seconds(2);
  std::filesystem::last_write_time(path.toStdString(), later);
  v.w.poll_followed_file();
  EXPECT_EQ(v.w.timeline()->timeline().trace().num_ranks(), 3);
}

TEST(Window, DroppedFilesOpenAndTwoAreCompared) {
  Window v;
  QMimeData data;
  data.setUrls({QUrl::fromLocalFile(schedule_file("drop_a.json")), QUrl::fromLocalFile(schedule_file("drop_b.json"))});
  QDragEnterEvent enter(QPoint(400, 300), Qt::CopyAction, &data, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(&v.w, &enter);
  EXPECT_TRUE(enter.isAccepted());
  QDropEvent drop(QPointF(400, 300), Qt::CopyAction, &data, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(&v.w, &drop);
  EXPECT_TRUE(v.w.timeline()->comparing()) << v.w.statusBar()->currentMessage().toStdString();
}

TEST(Window, ExportsThePictureShownAndTheSchedulePanelTeaches) {
  Window v;
  const std::string png = temp("export.png"), svg = temp("export.svg");
  EXPECT_TRUE(v.w.export_to(QString::fromStdString(png)));
  EXPECT_TRUE(v.w.export_to(QString::fromStdString(svg)));
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
  EXPECT_GT(std::filesystem::file_size(svg), 1000u);
  EXPECT_FALSE(v.w.export_to(QString::fromStdString(temp("export.gif"))));
  ASSERT_NE(v.dialog(), nullptr);
  v.dialog()->accept();
  auto* schedule = v.w.findChild<QComboBox*>();
  ASSERT_NE(schedule, nullptr);
  schedule->setCurrentText("zb-h1");
  QTest::mouseClick(v.w.findChild<QPushButton*>("show-schedule"), Qt::LeftButton);
  EXPECT_EQ(v.w.timeline()->timeline().trace().plan["schedule"], "zb-h1");
  v.w.timeline()->step_once();
  EXPECT_DOUBLE_EQ(v.w.timeline()->reveal_until_us(), v.w.timeline()->timeline().begin_us() + 1e-3);
}

// 512 ranks (a 1F1B pipeline of 4 stages over dp 128) open grouped per stage — four
// lanes — and the toolbar shows every rank, or per node, on demand.
TEST(Window, ALargeTraceOpensGroupedAndTheLanesMenuRegroupsIt) {
  const core::Trace one = teaching_trace({});
  core::Trace t;
  t.source = "sim";
  for (int dp = 0; dp < 128; ++dp)
    for (int pp = 0; pp < 4; ++pp) t.ranks.push_back({dp, 0, pp});
  for (int dp = 0; dp < 128; ++dp)
    for (core::TraceEvent e : one.events) {
      e.rank = dp * 4 + e.rank;
      t.events.push_back(e);
    }
  const std::string path = temp("large.json");
  core::write_trace(t, path);
  Window v;
  v.choose(QString::fromStdString(path), "open");
  auto compute_rows = [&] {
    size_t n = 0;
    for (const Row& r : v.w.timeline()->timeline().rows()) n += r.lane == core::Lane::Compute;
    return n;
  };
  EXPECT_EQ(compute_rows(), 4u);
  EXPECT_EQ(v.w.timeline()->timeline().rows()[0].label, "pp0 \u00d7128");
  v.w.group_by()->setCurrentIndex(v.w.group_by()->findData("none"));
  EXPECT_EQ(compute_rows(), 512u);
  v.w.group_by()->setCurrentIndex(v.w.group_by()->findData("node"));
  EXPECT_EQ(compute_rows(), 64u);
  // Expanding a group: double-click stage 2's lane -> its 128 ranks, one lane each.
  v.w.group_by()->setCurrentIndex(v.w.group_by()->findData("pp"));
  const Geometry g = timeline_geometry(v.w.timeline()->timeline(), ViewOptions{});
  QTest::mouseDClick(v.w.timeline(), Qt::LeftButton, Qt::NoModifier, QPoint(40, static_cast<int>(g.row_y[6] + 10)));
  EXPECT_EQ(v.w.search_box()->text().toStdString(), "pp=2");
  EXPECT_EQ(compute_rows(), 128u);
  for (const Row& r : v.w.timeline()->timeline().rows()) EXPECT_EQ(v.w.timeline()->timeline().trace().ranks[r.rank].pp, 2);
}

// ctest names the platform each run must be on, so the Xvfb run cannot quietly fall back
// to offscreen.
TEST(Window, RunsOnThePlatformCtestAskedFor) {
  const char* expected = std::getenv("QN_EXPECT_QT_PLATFORM");
  if (!expected) GTEST_SKIP() << "QN_EXPECT_QT_PLATFORM not set (run outside ctest)";
  EXPECT_EQ(QGuiApplication::platformName().toStdString(), expected);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  quintnet::viz::use_offscreen_without_display();  // a real window when DISPLAY is set (Xvfb)
  QStandardPaths::setTestModeEnabled(true);         // recent files kept out of the user's settings
  QApplication app(argc, argv);
  quintnet::testing_util::PrivateTempDir temp_dir;
  return temp_dir.finish(RUN_ALL_TESTS());
}
