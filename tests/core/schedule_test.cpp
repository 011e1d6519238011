// Pins the schedule generators and the validator to closed-form results.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/schedule_generators.h"
#include "core/schedule_validator.h"

using namespace quintnet::core;

namespace {

OpCosts unit_costs(double tf, double tb, double tw) {
  OpCosts c;
  c.forward = tf;
  c.backward_input = tb;
  c.backward_weight = tw;
  return c;
}

// Finds action `a` on rank r and returns its index (the test fails when missing).
size_t index_of(const Schedule& s, int r, const Action& a) {
  auto it = std::find(s.ranks[r].begin(), s.ranks[r].end(), a);
  EXPECT_NE(it, s.ranks[r].end()) << to_string(a);
  return static_cast<size_t>(it - s.ranks[r].begin());
}

std::string error_of(const Schedule& s) {
  try {
    validate_schedule(s);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ScheduleGenerators, EveryGeneratorPassesTheValidatorOverTheGrid) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 32; ++m) {
      for (auto kind : {ScheduleKind::Afab, ScheduleKind::OneFOneB, ScheduleKind::ZbH1})
        EXPECT_NO_THROW(validate_schedule(make_schedule(kind, pp, m)))
            << schedule_kind_name(kind) << " pp " << pp << " m " << m;
      for (int v = 1; v <= 4; ++v)
        EXPECT_NO_THROW(validate_schedule(make_interleaved(pp, m, v)))
            << "interleaved pp " << pp << " m " << m << " v " << v;
    }
}

TEST(ScheduleStats, AfabAnd1F1BBubbleIsClosedForm) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 32; ++m)
      for (auto kind : {ScheduleKind::Afab, ScheduleKind::OneFOneB}) {
        auto st = simulate_schedule(make_schedule(kind, pp, m), unit_costs(1, 2, 0));
        EXPECT_NEAR(st.bubble_fraction, double(pp - 1) / (m + pp - 1), 1e-12)
            << schedule_kind_name(kind) << " pp " << pp << " m " << m;
        EXPECT_NEAR(st.step_time, (m + pp - 1) * 3.0, 1e-9);
      }
}

TEST(ScheduleStats, InterleavedBubbleIsClosedFormWhenMicrobatchesAreAMultipleOfPp) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int v = 1; v <= 4; ++v)
      for (int m = pp; m <= 32; m += pp) {
        auto st = simulate_schedule(make_interleaved(pp, m, v), unit_costs(1, 2, 0));
        EXPECT_NEAR(st.bubble_fraction, double(pp - 1) / (v * m + pp - 1), 1e-9)
            << "pp " << pp << " m " << m << " v " << v;
      }
}

TEST(ScheduleStats, ZeroBubbleH1IsStrictlyBelow1F1B) {
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = 1; m <= 32; ++m) {
      auto zb = simulate_schedule(make_zb_h1(pp, m), unit_costs(1, 1, 1));
      auto ob = simulate_schedule(make_1f1b(pp, m), unit_costs(1, 1, 1));
      EXPECT_LT(zb.bubble_fraction, ob.bubble_fraction) << "pp " << pp << " m " << m;
      // Same peak of full activation sets as 1F1B.
      EXPECT_EQ(zb.peak_activations, ob.peak_activations) << "pp " << pp << " m " << m;
      // With m >= p it reaches the paper's bubble: (p-1)(tf+tb-tw) per rank.
      if (m >= pp) {
        EXPECT_NEAR(zb.bubble_fraction, (pp - 1.0) / (3.0 * m + pp - 1), 1e-12) << "pp " << pp << " m " << m;
      }
    }
}

TEST(ScheduleStats, PeakActivationsOf1F1BAndAfab) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 32; ++m) {
      auto ob = simulate_schedule(make_1f1b(pp, m));
      auto af = simulate_schedule(make_afab(pp, m));
      for (int s = 0; s < pp; ++s) {
        EXPECT_EQ(ob.peak_activations[s], std::min(pp - s, m)) << "pp " << pp << " m " << m << " s " << s;
        EXPECT_EQ(af.peak_activations[s], m);
      }
    }
}

TEST(ScheduleStats, OneFOneBPp4M8Is3Over11) {
  auto st = simulate_schedule(make_1f1b(4, 8));
  EXPECT_NEAR(st.bubble_fraction, 3.0 / 11.0, 1e-12);
}

TEST(ScheduleStats, P2PLatencyDelaysTheReceiver) {
  OpCosts c = unit_costs(1, 1, 0);
  c.p2p = 0.5;
  auto st = simulate_schedule(make_afab(2, 1), c);
  // F on rank 0 [0,1], message arrives at 1.5, F on rank 1 [1.5,2.5], B [2.5,3.5],
  // gradient arrives at 4, B on rank 0 [4,5].
  EXPECT_NEAR(st.step_time, 5.0, 1e-12);
}

TEST(ScheduleValidator, RejectsASwappedReceive) {
  Schedule s = make_1f1b(2, 4);
  // Rank 1 receives microbatch 1 before microbatch 0: both arrive eventually, but the
  // forward of mb 0 then has nothing — swap the two RECV_ACTs' microbatches.
  auto& list = s.ranks[1];
  size_t a = index_of(s, 1, {ActionKind::RecvAct, 0, 0, 0});
  size_t b = index_of(s, 1, {ActionKind::RecvAct, 1, 0, 0});
  std::swap(list[a].mb, list[b].mb);
  std::string err = error_of(s);
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("F(mb 0"), std::string::npos) << err;
}

TEST(ScheduleValidator, RejectsADroppedSendNamingTheReceive) {
  Schedule s = make_1f1b(4, 8);
  auto& list = s.ranks[2];
  list.erase(list.begin() + index_of(s, 2, {ActionKind::SendAct, 5, 0, 3}));
  std::string err = error_of(s);
  EXPECT_NE(err.find("rank 3"), std::string::npos) << err;
  EXPECT_NE(err.find("RECV_ACT(mb 5"), std::string::npos) << err;
  EXPECT_NE(err.find("no matching SEND_ACT(mb 5"), std::string::npos) << err;
}

TEST(ScheduleValidator, RejectsBackwardBeforeForward) {
  Schedule s = make_afab(1, 2);
  auto& list = s.ranks[0];
  std::swap(list[index_of(s, 0, {ActionKind::Forward, 1, 0, -1})],
            list[index_of(s, 0, {ActionKind::Backward, 1, 0, -1})]);
  std::string err = error_of(s);
  EXPECT_NE(err.find("rank 0"), std::string::npos) << err;
  EXPECT_NE(err.find("B(mb 1"), std::string::npos) << err;
  EXPECT_NE(err.find("backward before the forward"), std::string::npos) << err;
}

TEST(ScheduleValidator, RejectsWeightGradBeforeInputGrad) {
  Schedule s = make_zb_h1(2, 2);
  auto& list = s.ranks[1];
  std::swap(list[index_of(s, 1, {ActionKind::BackwardInput, 0, 0, -1})],
            list[index_of(s, 1, {ActionKind::BackwardWeight, 0, 0, -1})]);
  std::string err = error_of(s);
  EXPECT_NE(err.find("weight-gradient before its input-gradient"), std::string::npos) << err;
}

TEST(ScheduleValidator, RejectsADeadlock) {
  // Rank 0 waits for the gradient of mb 0 before it sends the activation of mb 0.
  Schedule s = make_afab(2, 1);
  auto& r0 = s.ranks[0];
  std::swap(r0[index_of(s, 0, {ActionKind::SendAct, 0, 0, 1})],
            r0[index_of(s, 0, {ActionKind::RecvGrad, 0, 0, 1})]);
  std::string err = error_of(s);
  EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
}

TEST(ScheduleValidator, RejectsAMissingMicrobatch) {
  Schedule s = make_afab(1, 3);
  auto& list = s.ranks[0];
  list.erase(list.begin() + index_of(s, 0, {ActionKind::Backward, 2, 0, -1}));
  std::string err = error_of(s);
  EXPECT_NE(err.find("microbatch 2"), std::string::npos) << err;
}

TEST(ScheduleValidator, RejectsASendToTheWrongPeer) {
  Schedule s = make_1f1b(4, 4);
  s.ranks[0][index_of(s, 0, {ActionKind::SendAct, 0, 0, 1})].peer = 2;
  std::string err = error_of(s);
  EXPECT_NE(err.find("lives on rank 1, not on rank 2"), std::string::npos) << err;
}
