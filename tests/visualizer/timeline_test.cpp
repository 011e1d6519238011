// The viewer's model without a display: rows in mesh order, bubbles equal to core's
// statistic, comparison deltas, ruler units, level of detail on a million events.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/schedule_generators.h"
#include "core/schedule_validator.h"
#include "core/trace_analysis.h"
#include "visualizer/model/collectives.h"
#include "visualizer/model/compare.h"
#include "visualizer/model/range_stats.h"
#include "visualizer/model/svg_writer.h"
#include "visualizer/model/teaching.h"
#include "visualizer/test_ops.h"

using namespace quintnet;
using namespace quintnet::viz;

using viz::testing::op;

TEST(Timeline, RowsAreOrderedByPipelineStageThenTpThenDp) {
  core::Trace t;
  // Mesh rank layout: tp innermost, then dp, then pp (2 x 2 x 2).
  for (int r = 0; r < 8; ++r) {
    t.ranks.push_back({(r / 2) % 2, r % 2, r / 4});
    t.events.push_back(op(r, "forward", 0, 10));
  }
  t.events.push_back(op(0, "allreduce", 0, 5, -1, core::Lane::TpCollective));
  const Timeline tl(t);
  std::vector<int> compute_ranks;
  for (const Row& row : tl.rows())
    if (row.lane == core::Lane::Compute) compute_ranks.push_back(row.rank);
  EXPECT_EQ(compute_ranks, (std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(tl.rows()[0].label, "pp0 tp0 dp0");
  EXPECT_EQ(tl.rows()[2].label, "pp0 tp0 dp1");
  // Every rank gets the tp-collective sub-lane any rank uses, none other.
  EXPECT_EQ(tl.rows().size(), 16u);
  EXPECT_EQ(tl.rows()[1].lane, core::Lane::TpCollective);
}

TEST(Timeline, BubbleOfATeachingScheduleEqualsCoresStatistic) {
  for (const char* name : {"afab", "1f1b", "interleaved", "zb-h1"}) {
    TeachingSchedule ts;
    ts.schedule = name;
    ts.chunks = std::string(name) == "interleaved" ? 2 : 1;
    if (std::string(name) == "zb-h1") ts.backward_input = 1, ts.backward_weight = 1;
    const core::Trace trace = teaching_trace(ts);
    const Timeline tl(trace);
    core::OpCosts costs;
    costs.forward = ts.forward;
    costs.backward_input = ts.backward_input;
    costs.backward_weight = ts.backward_weight;
    const auto stats = core::simulate_schedule(
        core::make_schedule(core::parse_schedule_kind(name), ts.pp, ts.microbatches, ts.chunks), costs);
    EXPECT_NEAR(tl.bubble_fraction(), stats.bubble_fraction, 1e-9) << name;
    EXPECT_NEAR(tl.bubble_fraction(), core::measured_bubble_fraction(trace), 1e-9) << name;
    for (int r = 0; r < ts.pp; ++r) EXPECT_NEAR(tl.bubble_fraction(r), stats.bubble_per_rank[r], 1e-9) << name;
  }
  // 1F1B, uniform costs: (p-1)/(m+p-1) = 3/11.
  EXPECT_NEAR(Timeline(teaching_trace({})).bubble_fraction(), 3.0 / 11.0, 1e-12);
}

TEST(Timeline, BubblesAreTheIdleGapsInsideTheStep) {
  core::Trace t;
  t.events = {op(0, "forward", 0, 10), op(0, "backward", 30, 10), op(1, "forward", 10, 10), op(1, "backward", 20, 10)};
  const Timeline tl(t);
  ASSERT_EQ(tl.bubbles(0).size(), 1u);
  EXPECT_EQ(tl.bubbles(0)[0].begin_us, 10);
  EXPECT_EQ(tl.bubbles(0)[0].end_us, 30);
  ASSERT_EQ(tl.bubbles(1).size(), 2u);  // before its forward, after its backward
  EXPECT_DOUBLE_EQ(tl.bubble_fraction(0), 0.5);
  EXPECT_DOUBLE_EQ(tl.bubble_fraction(), 0.5);
}

TEST(Compare, OneSlowerOpShowsAsItsDelta) {
  const core::Trace a = teaching_trace({});
  core::Trace b = a;
  for (auto& e : b.events)
    if (e.rank == 2 && e.kind == "forward" && e.mb == 5) {
      e.dur_us += 700;  // the only difference
      break;
    }
  const Comparison c = compare_timelines(Timeline(a), Timeline(b));
  for (const auto& k : c.kinds) EXPECT_DOUBLE_EQ(k.b_us - k.a_us, k.kind == "forward" ? 700.0 : 0.0) << k.kind;
  for (const auto& r : c.ranks) EXPECT_DOUBLE_EQ(r.busy_b_us - r.busy_a_us, r.rank == 2 ? 700.0 : 0.0) << r.rank;
  const Scene s = draw_comparison(Timeline(a), Timeline(b), "a", "b", {});
  EXPECT_NE(s.texts[1].text.find("forward +700 us"), std::string::npos) << s.texts[1].text;
}

TEST(Scene, OpsSitWhereTheirTimesAreAndCarryTheirColours) {
  const Timeline tl(teaching_trace({}));
  ViewOptions view;
  const Geometry g = timeline_geometry(tl, view);
  const Scene s = draw_timeline(tl, view);
  int ops = 0, computes = 0;
  for (const auto& e : tl.trace().events) computes += e.kind == "forward" || e.kind == "backward";
  for (const Box& b : s.boxes) {
    if (b.event < 0) continue;
    const auto& e = tl.trace().events[static_cast<size_t>(b.event)];
    EXPECT_NEAR(b.x, g.x_of(e.ts_us), 1e-9);
    // Instantaneous events (a send is posted at no cost) stay visible: half a pixel.
    EXPECT_NEAR(b.x + b.w, std::max(g.x_of(e.end_us()), b.x + 0.5), 1e-9);
    EXPECT_EQ(b.fill, view.palette.of_op(e.kind, e.mb));
    ops += e.kind == "forward" || e.kind == "backward";
  }
  EXPECT_EQ(ops, computes);
  EXPECT_EQ(computes, 2 * 4 * 8);
  const std::string svg = scene_to_svg(s);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("bubble 27.3%"), std::string::npos);
}

TEST(Scene, RulerTicksUseReadableSteps) {
  const auto ticks = ruler_ticks(0, 10000, 10);
  ASSERT_EQ(ticks.size(), 11u);
  EXPECT_EQ(ticks[1].label, "1 ms");
  EXPECT_EQ(ruler_ticks(0, 50, 5)[1].label, "10 us");
  EXPECT_EQ(ruler_ticks(0, 3e6, 3)[1].label, "1 s");
}

TEST(Scene, AMillionEventsBecomeAtMostAFewBoxesPerPixel) {
  core::Trace t;
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 250000; ++i) t.events.push_back(op(r, i % 2 ? "forward" : "backward", i * 10.0, 8.0, i % 8));
  const Timeline tl(std::move(t));
  ViewOptions view;
  view.width = 1600;
  const Scene s = draw_timeline(tl, view);
  size_t ops = 0;
  for (const Box& b : s.boxes) ops += b.event >= 0;
  EXPECT_LE(ops, 4u * 2 * 1600);
  // Zoomed in to 100 events' worth: each is its own box again.
  view.t0_us = 500000;
  view.t1_us = 501000;
  const Scene z = draw_timeline(tl, view);
  ops = 0;
  for (const Box& b : z.boxes) ops += b.event >= 0;
  EXPECT_GE(ops, 4u * 100);
  EXPECT_LE(ops, 4u * 102);
}

TEST(Timeline, TracesWithNothingToDrawOrImpossibleTimesAreRefused) {
  EXPECT_THROW(Timeline(core::Trace{}), core::TraceError);
  core::Trace t;
  t.events = {op(0, "forward", 1e300, 1)};
  EXPECT_THROW(Timeline{t}, core::TraceError);
  t.events = {op(0, "forward", 0, -5)};
  EXPECT_THROW(Timeline{t}, core::TraceError);
  t.events = {op(0, "forward", 0, 5)};
  EXPECT_THROW(Timeline(t, 7), core::TraceError);  // no step 7
}

TEST(RangeStatistics, BusyIdleAndCommunicationOfARange) {
  core::Trace t;
  t.events = {op(0, "forward", 0, 10), op(0, "backward", 20, 10), op(0, "send", 8, 6, 0, core::Lane::P2P),
              op(0, "allreduce", 10, 6, -1, core::Lane::DpCollective)};
  const Timeline tl(t);
  const auto s = range_statistics(tl, 5, 25);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(s[0].busy_us, 5 + 5);   // [5,10) and [20,25)
  EXPECT_DOUBLE_EQ(s[0].idle_us, 20 - 10);
  EXPECT_DOUBLE_EQ(s[0].comm_us, 8);       // [8,14) and [10,16) overlap: [8,16)
}

TEST(Collectives, GroupMembersAreJoinedAtTheLastArrival) {
  core::Trace t;
  // tp group {0, 1} (dp 0, pp 0) and tp group {2, 3} (dp 1, pp 0); two all-reduces each.
  t.ranks = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}};
  for (int r = 0; r < 4; ++r) {
    t.events.push_back(op(r, "forward", 0, 100));
    t.events.push_back(op(r, "allreduce", 10 + r, 5, -1, core::Lane::TpCollective));       // arrivals 10..13
    t.events.push_back(op(r, "allreduce", 50 + 2 * r, 5, -1, core::Lane::TpCollective));   // 50, 52, 54, 56
  }
  const Timeline tl(t);
  const auto spans = collective_spans(tl);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(spans[0].last_arrival_us, 11);
  EXPECT_EQ(spans[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_DOUBLE_EQ(spans[1].last_arrival_us, 13);
  EXPECT_DOUBLE_EQ(spans[3].last_arrival_us, 56);
  // Drawn: a vertical line at the last arrival spanning the group's tp-collective rows.
  ViewOptions view;
  const Geometry g = timeline_geometry(tl, view);
  const Scene s = draw_timeline(tl, view);
  int joined = 0;
  for (const Line& l : s.lines)
    if (l.x1 == l.x2 && std::abs(l.x1 - g.x_of(11)) < 1e-9 && l.y2 > l.y1 + 20) ++joined;
  EXPECT_EQ(joined, 1);
}
