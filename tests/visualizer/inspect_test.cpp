// The viewer's search terms and details panel, without a display.
#include <gtest/gtest.h>

#include "core/error.h"
#include "visualizer/model/critical_path.h"
#include "visualizer/model/details.h"
#include "visualizer/model/filter.h"
#include "visualizer/model/grouping.h"
#include "visualizer/model/teaching.h"

using namespace quintnet;
using namespace quintnet::viz;

namespace {

std::set<int> ranks_of(const core::Trace& t) {
  std::set<int> r;
  for (const auto& e : t.events) r.insert(e.rank);
  return r;
}

}  // namespace

TEST(Filter, TermsSelectKindsMicrobatchesRanksAxesAndDurations) {
  const core::Trace t = teaching_trace({});  // 1f1b pp 4 m 8: F 1 ms, B 2 ms
  auto keep = [&](const std::string& text) { return filter_trace(t, EventFilter::parse(text), text); };
  const core::Trace f3 = keep("forward mb=3");
  ASSERT_EQ(f3.events.size(), 4u);  // F3 on each stage
  for (const auto& e : f3.events) EXPECT_EQ(e.name, "F3");
  EXPECT_EQ(ranks_of(keep("pp=2")), (std::set<int>{2}));
  EXPECT_EQ(keep("pp=2").events.size(), keep("rank=2").events.size());
  const core::Trace long_ops = keep("dur>1.5ms");
  EXPECT_EQ(keep("backward dur>1.5ms").events.size(), 32u);  // every B (2 ms), no F (1 ms)
  for (const auto& e : long_ops.events) EXPECT_GT(e.dur_us, 1500);
  EXPECT_LT(long_ops.events.size(), t.events.size());
  EXPECT_EQ(keep("recv_grad").events.size(), 3u * 8u);  // part of the name, any case
  EXPECT_TRUE(EventFilter::parse("  ").empty());
  EXPECT_THROW(EventFilter::parse("mb=x"), core::UserError);
  EXPECT_THROW(EventFilter::parse("stage=1"), core::UserError);
  EXPECT_THROW(EventFilter::parse("dur>fast"), core::UserError);
  EXPECT_THROW(keep("mb=99"), core::TraceError);
}

TEST(Details, AReceiveNamesItsSenderAndACollectiveItsMembers) {
  const Timeline tl(teaching_trace({}));
  const auto& events = tl.trace().events;
  long recv = -1;
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].rank == 1 && events[i].kind == "recv" && events[i].mb == 0 && events[i].name.rfind("RECV_ACT", 0) == 0)
      recv = static_cast<long>(i);
  ASSERT_GE(recv, 0);
  const OpDetails d = op_details(tl, recv);
  ASSERT_GE(d.partner, 0);
  const core::TraceEvent& send = events[static_cast<size_t>(d.partner)];
  EXPECT_EQ(send.rank, 0);
  EXPECT_EQ(send.kind, "send");
  EXPECT_EQ(send.mb, 0);
  // And back: the send's partner is this receive.
  EXPECT_EQ(op_details(tl, d.partner).partner, recv);
  EXPECT_EQ(d.lines[1], "rank 1   pp 1  tp 0  dp 0   lane p2p");

  core::Trace t;
  t.ranks = {{0, 0, 0}, {0, 1, 0}};
  for (int r = 0; r < 2; ++r) {
    core::TraceEvent e;
    e.name = "tp all-reduce";
    e.kind = "allreduce";
    e.rank = r;
    e.lane = core::Lane::TpCollective;
    e.ts_us = 10 + 5 * r;
    e.dur_us = 20 - 5 * r;
    t.events.push_back(e);
  }
  const Timeline two(t);
  const OpDetails c = op_details(two, 0);
  EXPECT_EQ(c.members, (std::vector<long>{1}));
  EXPECT_EQ(c.lines.back(), "waited 5 us for rank 1");
  const auto stages = stage_summary(two, 0);
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0], "stage 0 (2 ranks): compute 0%, communication 88%, idle 100%");
}

// A 1F1B pipeline of 4 stages replicated over dp 3 (12 ranks); one replica's stage-2
// forward of microbatch 5 runs 400 us late.  Grouped per stage: 4 lanes whose ops sit at
// the members' median times — the schedule's own — with the late one's spread.
TEST(Grouping, LanesPerStageShowTheMedianOpAndTheSpread) {
  const core::Trace one = teaching_trace({});
  core::Trace t;
  for (int dp = 0; dp < 3; ++dp)
    for (int pp = 0; pp < 4; ++pp) t.ranks.push_back({dp, 0, pp});
  for (int dp = 0; dp < 3; ++dp)
    for (core::TraceEvent e : one.events) {
      const int stage = e.rank;
      e.rank = dp * 4 + stage;
      if (dp == 2 && stage == 2 && e.name == "F5") e.ts_us += 400;
      t.events.push_back(e);
    }
  for (int dp = 0; dp < 3; ++dp)
    for (core::TraceFlow f : one.flows) {
      f.from_rank += dp * 4;
      f.to_rank += dp * 4;
      t.flows.push_back(f);
    }
  const GroupedTrace g = group_trace(t, Grouping::parse("pp"));
  ASSERT_EQ(g.labels.size(), 4u);
  EXPECT_EQ(g.labels[2], "pp2 \u00d73");
  EXPECT_EQ(g.members[2], (std::vector<int>{2, 6, 10}));
  ASSERT_EQ(g.trace.events.size(), one.events.size());
  for (size_t i = 0; i < g.trace.events.size(); ++i) {
    const core::TraceEvent& e = g.trace.events[i];
    const auto same = std::find_if(one.events.begin(), one.events.end(), [&](const core::TraceEvent& o) {
      return o.rank == e.rank && o.name == e.name && o.lane == e.lane;
    });
    ASSERT_NE(same, one.events.end()) << e.name;
    EXPECT_DOUBLE_EQ(e.ts_us, same->ts_us) << e.name;
    const bool late = e.rank == 2 && e.name == "F5";
    EXPECT_DOUBLE_EQ(g.spread[i].end_us, same->end_us() + (late ? 400 : 0)) << e.name;
  }
  const auto tl = grouped_timeline(g);
  EXPECT_EQ(tl->rows()[0].label, "pp0 \u00d73");
  EXPECT_NEAR(tl->bubble_fraction(), 3.0 / 11.0, 1e-12);
  // The groups' messages are kept, so the critical path runs through the stages as the
  // schedule's own does: (m + p - 1)(tf + tb), a third of it forward.
  EXPECT_FALSE(g.trace.flows.empty());
  const CriticalPath path = critical_path(*tl, 0);
  EXPECT_NEAR(path.length_us(), 33000, 1e-6);
  EXPECT_EQ(critical_path_summary(path), "critical path 33 ms: backward 66.7%, forward 33.3%");
  // Per stage and replica: every rank its own lane again; per node of 8: two lanes.
  EXPECT_EQ(group_trace(t, Grouping::parse("pp,dp")).labels.size(), 12u);
  EXPECT_EQ(group_trace(t, Grouping::parse("node", 8)).labels, (std::vector<std::string>{"node0 \u00d78", "node1 \u00d74"}));
  EXPECT_TRUE(Grouping::parse("none").empty());
  EXPECT_EQ(expand_search("pp3 dp1 \u00d764"), "pp=3 dp=1");
  EXPECT_EQ(filter_trace(t, EventFilter::parse("node=1"), "node=1").events.size(), one.events.size());  // ranks 8-11: one replica
  EXPECT_THROW(Grouping::parse("pp,stage"), core::UserError);
}
