// core::interpret and core::run_schedule: the one reading of a schedule that the
// validator, the executor and the simulator share.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/schedule_generators.h"
#include "core/schedule_interpreter.h"

using namespace quintnet::core;

namespace {

std::vector<Schedule> every_schedule() {
  std::vector<Schedule> out;
  for (ScheduleKind kind : {ScheduleKind::Afab, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZbH1})
    for (int pp : {1, 2, 4})
      out.push_back(make_schedule(kind, pp, 8, kind == ScheduleKind::Interleaved ? 2 : 1));
  return out;
}

}  // namespace

TEST(ScheduleInterpreter, EverySendMeetsExactlyOneReceiveWithTheSameMessageAndTag) {
  for (const Schedule& s : every_schedule()) {
    std::map<Message, int> sent_by, received_by;
    std::set<int> tags;
    for (int r = 0; r < s.pp; ++r)
      for (const Step& st : interpret(s, r)) {
        if (!st.message) {
          EXPECT_FALSE(is_p2p(st.action.kind)) << s.name << " " << st.name;
          continue;
        }
        const Message& m = *st.message;
        EXPECT_EQ(std::abs(m.to_stage - m.from_stage), 1) << st.name;
        EXPECT_EQ(m.grad, m.to_stage < m.from_stage) << st.name;  // gradients flow backwards
        const bool sends = is_send(st.action.kind);
        EXPECT_EQ(sends ? m.from_stage : m.to_stage, st.stage) << st.name;
        EXPECT_TRUE((sends ? sent_by : received_by).emplace(m, r).second) << s.name << ": twice: " << st.name;
        if (sends) {
          EXPECT_TRUE(tags.insert(m.tag(s)).second) << s.name << ": tag reused by " << st.name;
        }
      }
    ASSERT_EQ(sent_by.size(), received_by.size()) << s.name;
    for (const auto& [m, from] : sent_by) {
      ASSERT_TRUE(received_by.count(m)) << s.name;
      EXPECT_EQ(s.rank_of_stage(m.from_stage), from);
      EXPECT_EQ(s.rank_of_stage(m.to_stage), received_by[m]);
    }
  }
}

TEST(ScheduleInterpreter, OneBackwardPerChunkCompletesItsGradientsAndItIsTheLast) {
  for (const Schedule& s : every_schedule())
    for (int r = 0; r < s.pp; ++r) {
      const std::vector<Step> steps = interpret(s, r);
      std::map<int, int> completing;          // chunk -> how many steps say they complete it
      std::map<int, std::size_t> last_weight;  // chunk -> index of its last B / BW
      for (const Step& st : steps) {
        if (st.completes_gradients) {
          ++completing[st.action.chunk];
          EXPECT_TRUE(st.action.kind == ActionKind::Backward || st.action.kind == ActionKind::BackwardWeight)
              << st.name;
        }
        if (st.action.kind == ActionKind::Backward || st.action.kind == ActionKind::BackwardWeight)
          last_weight[st.action.chunk] = st.index;
      }
      for (int c = 0; c < s.chunks; ++c) {
        EXPECT_EQ(completing[c], 1) << s.name << " rank " << r << " chunk " << c;
        EXPECT_TRUE(steps[last_weight[c]].completes_gradients) << s.name;
      }
    }
}

TEST(ScheduleInterpreter, NamesKindsAndLanesAreTheTraceOnes) {
  const Schedule s = make_schedule(ScheduleKind::ZbH1, 2, 4);
  std::map<ActionKind, Step> first;
  for (int r = 0; r < s.pp; ++r)
    for (const Step& st : interpret(s, r)) first.try_emplace(st.action.kind, st);
  EXPECT_EQ(first.at(ActionKind::Forward).name, "F0");
  EXPECT_STREQ(first.at(ActionKind::Forward).kind, "forward");
  EXPECT_STREQ(first.at(ActionKind::BackwardInput).kind, "backward-input");
  EXPECT_EQ(first.at(ActionKind::BackwardWeight).lane, Lane::Compute);
  EXPECT_EQ(first.at(ActionKind::SendAct).name, "SEND_ACT(mb 0, chunk 0, to rank 1)");
  EXPECT_STREQ(first.at(ActionKind::SendAct).kind, "send");
  EXPECT_EQ(first.at(ActionKind::RecvGrad).lane, Lane::P2P);
  EXPECT_EQ(first.at(ActionKind::GradSync).name, "GRAD_SYNC(chunk 0)");
  EXPECT_EQ(first.at(ActionKind::GradSync).lane, Lane::DpCollective);
  EXPECT_EQ(first.at(ActionKind::OptimizerStep).name, "OPTIMIZER_STEP");
  EXPECT_STREQ(first.at(ActionKind::OptimizerStep).kind, "optimizer");
}

namespace {

// Writes down what it is handed, in order.
struct Log : ScheduleHandler {
  std::vector<std::string> calls;
  void forward(const Step& st) override { calls.push_back("forward " + st.name); }
  void backward(const Step& st) override { calls.push_back("backward " + st.name); }
  void send(const Step& st) override { calls.push_back("send " + st.name); }
  void recv(const Step& st) override { calls.push_back("recv " + st.name); }
  void grad_sync(const Step& st) override { calls.push_back("grad_sync " + st.name); }
  void optimizer_step(const Step& st) override { calls.push_back("optimizer_step " + st.name); }
};

}  // namespace

TEST(ScheduleInterpreter, RunScheduleHandsEveryActionToItsHandlerInListOrder) {
  const Schedule s = make_schedule(ScheduleKind::OneFOneB, 2, 2);
  Log log;
  run_schedule(interpret(s, 1), log);
  // The last stage of 1F1B with 2 microbatches: one forward, one backward, in turn.
  EXPECT_EQ(log.calls, (std::vector<std::string>{
                           "recv RECV_ACT(mb 0, chunk 0, from rank 0)", "forward F0", "backward B0",
                           "send SEND_GRAD(mb 0, chunk 0, to rank 0)", "recv RECV_ACT(mb 1, chunk 0, from rank 0)",
                           "forward F1", "backward B1", "send SEND_GRAD(mb 1, chunk 0, to rank 0)",
                           "grad_sync GRAD_SYNC(chunk 0)", "optimizer_step OPTIMIZER_STEP"}));
}
