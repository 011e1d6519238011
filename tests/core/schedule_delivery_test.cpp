// core::delivered_before: when a pipeline rank may free what it sent.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/schedule_delivery.h"
#include "core/schedule_generators.h"
#include "core/schedule_validator.h"

using namespace quintnet::core;

namespace {

// The most sends of `rank` waiting to be known delivered at any one time.
int most_outstanding(const Schedule& s, int rank) {
  const std::vector<Step> steps = interpret(s, rank);
  const std::vector<std::vector<Message>> delivered = delivered_before(s, rank);
  int outstanding = 0, most = 0;
  for (const Step& st : steps) {
    outstanding -= static_cast<int>(delivered[st.index].size());
    if (is_send(st.action.kind)) most = std::max(most, ++outstanding);
  }
  return most;
}

}  // namespace

// Each message is released once, after its send and after a receive of this rank (the
// only way a rank learns anything), and what waits never exceeds the microbatches the
// schedule keeps in flight plus two: it does not grow with the step's microbatches.
TEST(ScheduleDelivery, SendsAreReleasedOnceAfterAReceiveAndNeverPileUp) {
  for (ScheduleKind kind : {ScheduleKind::Afab, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZbH1})
    for (int pp : {2, 4})
      for (int m : {8, 16}) {
        const Schedule s = make_schedule(kind, pp, m, kind == ScheduleKind::Interleaved ? 2 : 1);
        const ScheduleStats stats = simulate_schedule(s);
        for (int r = 0; r < pp; ++r) {
          const std::string what = s.name + " pp " + std::to_string(pp) + " m " + std::to_string(m) + " rank " +
                                   std::to_string(r);
          const std::vector<Step> steps = interpret(s, r);
          const std::vector<std::vector<Message>> delivered = delivered_before(s, r);
          ASSERT_EQ(delivered.size(), steps.size()) << what;
          std::map<Message, std::size_t> sent_at;
          std::size_t last_recv = 0;
          bool any_recv = false;
          for (const Step& st : steps) {
            for (const Message& msg : delivered[st.index]) {
              ASSERT_TRUE(sent_at.count(msg)) << what << ": released before it was sent";
              EXPECT_TRUE(any_recv && last_recv > sent_at[msg]) << what << ": released with no receive since";
              sent_at.erase(msg);
            }
            if (is_send(st.action.kind)) sent_at[*st.message] = st.index;
            if (is_recv(st.action.kind)) last_recv = st.index, any_recv = true;
          }
          const int most = most_outstanding(s, r);
          EXPECT_LE(most, stats.peak_activations[r] * s.chunks + 2) << what;
          if (kind != ScheduleKind::Afab) {  // AFAB keeps every microbatch in flight by design
            const Schedule twice = make_schedule(kind, pp, 2 * m, s.chunks);
            EXPECT_EQ(most_outstanding(twice, r), most) << what << ": grows with the microbatches";
          }
        }
      }
}

// Evaluation's schedule (core::make_forward_only): forwards only, every stage once per
// microbatch in stage order, each RECV_ACT matched by the SEND_ACT of the rank before with
// the same message; it runs (delivered_before throws for a RECV whose SEND never comes).
TEST(ScheduleDelivery, TheForwardOnlyScheduleSendsEveryActivationOnceAndRuns) {
  for (int pp : {1, 2, 4})
    for (int chunks : {1, 2}) {
      const Schedule s = make_forward_only(pp, 3, chunks);
      const std::string what = "pp " + std::to_string(pp) + " chunks " + std::to_string(chunks);
      std::map<Message, int> sent, received;
      for (int r = 0; r < pp; ++r) {
        int forwards = 0;
        for (const Step& st : interpret(s, r)) {
          EXPECT_TRUE(st.action.kind == ActionKind::Forward || st.action.kind == ActionKind::SendAct ||
                      st.action.kind == ActionKind::RecvAct)
              << what << ": " << st.name;
          forwards += st.action.kind == ActionKind::Forward;
          if (st.action.kind == ActionKind::SendAct) ++sent[*st.message];
          if (st.action.kind == ActionKind::RecvAct) ++received[*st.message];
        }
        EXPECT_EQ(forwards, 3 * chunks) << what;
        EXPECT_NO_THROW(delivered_before(s, r)) << what;
      }
      EXPECT_EQ(sent, received) << what;
      // With pp > 1 every stage boundary crosses to another rank (stage s lives on rank
      // s mod pp); on one rank none does.
      const int boundaries = pp > 1 ? 3 * (pp * chunks - 1) : 0;
      EXPECT_EQ(static_cast<int>(sent.size()), boundaries) << what;
      for (const auto& [m, n] : sent) EXPECT_EQ(n, 1) << what;
    }
}
