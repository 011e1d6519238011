// The critical path on schedules and traces whose path is known by construction.
#include <gtest/gtest.h>

#include "visualizer/model/critical_path.h"
#include "visualizer/model/teaching.h"
#include "visualizer/test_ops.h"

using namespace quintnet;
using namespace quintnet::viz;

using viz::testing::op;

namespace {

double share(const CriticalPath& p, const std::string& kind) {
  for (const auto& [k, us] : p.by_kind)
    if (k == kind) return us;
  return 0;
}

// "rank:name" of the path's compute ops, in time order.
std::vector<std::string> compute_ops(const Timeline& tl, const CriticalPath& p) {
  std::vector<std::string> out;
  for (const PathSegment& s : p.segments) {
    if (s.event < 0) continue;
    const core::TraceEvent& e = tl.trace().events[static_cast<size_t>(s.event)];
    if (e.lane == core::Lane::Compute) out.push_back(std::to_string(e.rank) + ":" + e.name);
  }
  return out;
}

}  // namespace

TEST(CriticalPath, UniformOneFOneBRunsDownTheFirstForwardsTheLastStageAndBackUp) {
  const Timeline tl(teaching_trace({}));  // 1f1b, pp 4, m 8, tf 1 ms, tb 2 ms, free messages
  const CriticalPath p = critical_path(tl, 0);
  // Microbatch 0's forward through stages 0-3, the last stage's 1F1B steady state,
  // microbatch 7's backward back through stages 2-0.
  std::vector<std::string> expected = {"0:F0", "1:F0", "2:F0", "3:F0"};
  for (int mb = 0; mb < 8; ++mb) {
    if (mb > 0) expected.push_back("3:F" + std::to_string(mb));
    expected.push_back("3:B" + std::to_string(mb));
  }
  for (const char* b : {"2:B7", "1:B7", "0:B7"}) expected.push_back(b);
  EXPECT_EQ(compute_ops(tl, p), expected);
  // (m + p - 1)(tf + tb) = 33 ms: the whole step, forward 11 ms, backward 22 ms.
  EXPECT_DOUBLE_EQ(p.begin_us, tl.begin_us());
  EXPECT_DOUBLE_EQ(p.end_us, tl.end_us());
  EXPECT_NEAR(p.length_us(), 33000, 1e-6);
  EXPECT_NEAR(share(p, "forward"), 11000, 1e-6);
  EXPECT_NEAR(share(p, "backward"), 22000, 1e-6);
  EXPECT_EQ(critical_path_summary(p), "critical path 33 ms: backward 66.7%, forward 33.3%");
}

TEST(CriticalPath, SegmentsTileEveryTeachingScheduleFromStartToEnd) {
  for (const char* name : {"afab", "1f1b", "interleaved", "zb-h1"}) {
    TeachingSchedule ts;
    ts.schedule = name;
    ts.chunks = ts.schedule == "interleaved" ? 2 : 1;
    if (ts.schedule == "zb-h1") ts.backward_input = 1, ts.backward_weight = 1;
    const Timeline tl(teaching_trace(ts));
    const CriticalPath p = critical_path(tl, 0);
    SCOPED_TRACE(name);
    ASSERT_FALSE(p.segments.empty());
    EXPECT_DOUBLE_EQ(p.segments.front().begin_us, tl.begin_us());
    EXPECT_DOUBLE_EQ(p.segments.back().end_us, tl.end_us());
    double sum = 0;
    for (size_t i = 0; i < p.segments.size(); ++i) {
      if (i > 0) {
        EXPECT_NEAR(p.segments[i].begin_us, p.segments[i - 1].end_us, 1e-6);
      }
      EXPECT_GT(p.segments[i].length_us(), 0);
      sum += p.segments[i].length_us();
    }
    EXPECT_NEAR(sum, tl.end_us() - tl.begin_us(), 1e-6);
    EXPECT_EQ(share(p, "idle"), 0);  // a schedule's ops start the moment they can
  }
}

TEST(CriticalPath, AReceiveThatWaitedLeadsToTheLateSenderAndItsIdleTime) {
  core::Trace t;
  t.ranks = {{0, 0, 0}, {0, 0, 1}};
  t.events = {op(0, "forward", 0, 10), op(0, "send", 20, 2, 0, core::Lane::P2P),  // sent 10 us late
              op(1, "recv", 5, 20, 0, core::Lane::P2P), op(1, "forward", 25, 10)};
  t.flows = {{1, 0, core::Lane::P2P, 20, 1, core::Lane::P2P, 25}};
  const Timeline tl(t);
  const CriticalPath p = critical_path(tl, 0);
  ASSERT_EQ(p.segments.size(), 5u);
  EXPECT_EQ(p.segments[1].kind, "idle");
  EXPECT_EQ(p.segments[1].rank, 0);
  EXPECT_DOUBLE_EQ(p.segments[1].begin_us, 10);
  EXPECT_EQ(p.segments[2].via, PathSegment::Via::Message);  // the send reached through the message
  EXPECT_DOUBLE_EQ(share(p, "forward"), 20);
  EXPECT_DOUBLE_EQ(share(p, "idle"), 10);
  EXPECT_DOUBLE_EQ(share(p, "send"), 2);
  EXPECT_DOUBLE_EQ(share(p, "recv"), 3);  // the message in flight after the send
  EXPECT_DOUBLE_EQ(p.length_us(), 35);
}

TEST(CriticalPath, ACollectiveWaitsForItsLastMember) {
  core::Trace t;
  t.ranks = {{0, 0, 0}, {0, 1, 0}};  // one tp group
  t.events = {op(0, "forward", 0, 10), op(0, "allreduce", 10, 10, 0, core::Lane::TpCollective),
              op(1, "forward", 0, 15), op(1, "allreduce", 15, 5, 0, core::Lane::TpCollective)};
  const Timeline tl(t);
  const CriticalPath p = critical_path(tl, 0);
  // Both end at 20; rank 0's all-reduce waited from 10 to 15 for rank 1's forward.
  EXPECT_DOUBLE_EQ(share(p, "forward"), 15);
  EXPECT_DOUBLE_EQ(share(p, "allreduce"), 5);
  EXPECT_TRUE(p.contains(2));   // rank 1's forward
  EXPECT_FALSE(p.contains(0));  // rank 0's was not critical
  EXPECT_EQ(p.segments.back().via, PathSegment::Via::End);
}

TEST(CriticalPath, TimeInsideALongerComputeOpIsChargedToIt) {
  core::Trace t;
  // A forward with two tensor-parallel all-reduces inside it (the executor's trace shape).
  t.events = {op(0, "forward", 0, 30), op(0, "allreduce", 5, 5, 0, core::Lane::TpCollective),
              op(0, "allreduce", 20, 5, 0, core::Lane::TpCollective), op(0, "backward", 30, 10)};
  const Timeline tl(t);
  const CriticalPath p = critical_path(tl, 0);
  EXPECT_DOUBLE_EQ(share(p, "idle"), 0);
  EXPECT_DOUBLE_EQ(share(p, "forward"), 30);
  EXPECT_DOUBLE_EQ(p.length_us(), 40);
}
