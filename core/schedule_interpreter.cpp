#include "core/schedule_interpreter.h"

#include <map>

namespace quintnet::core {

const char* trace_kind(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward: return "forward";
    case ActionKind::Backward: return "backward";
    case ActionKind::BackwardInput: return "backward-input";
    case ActionKind::BackwardWeight: return "backward-weight";
    case ActionKind::SendAct:
    case ActionKind::SendGrad: return "send";
    case ActionKind::RecvAct:
    case ActionKind::RecvGrad: return "recv";
    case ActionKind::GradSync: return "grad-sync";
    case ActionKind::OptimizerStep: return "optimizer";
  }
  return "?";
}

namespace {

// Compute ops are many and short-lived in a viewer: "F3" (kind and microbatch; the
// chunk is the event's own field).  Messages and syncs say everything: to_string.
std::string event_name(const Action& a) {
  if (is_compute(a.kind)) return action_name(a.kind) + std::to_string(a.mb);
  return to_string(a);
}

Lane lane_of(ActionKind kind) {
  if (is_p2p(kind)) return Lane::P2P;
  if (kind == ActionKind::GradSync) return Lane::DpCollective;
  return Lane::Compute;
}

}  // namespace

std::vector<Step> interpret(const Schedule& s, int rank) {
  const std::vector<Action>& actions = s.ranks.at(rank);
  std::vector<Step> steps;
  steps.reserve(actions.size());
  std::map<int, std::size_t> last_gradient;  // chunk -> index of its last B / BW
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    Step st;
    st.action = a;
    st.index = i;
    st.rank = rank;
    st.stage = s.stage(rank, a.chunk);
    switch (a.kind) {
      case ActionKind::SendAct: st.message = Message{false, a.mb, st.stage, st.stage + 1}; break;
      case ActionKind::SendGrad: st.message = Message{true, a.mb, st.stage, st.stage - 1}; break;
      case ActionKind::RecvAct: st.message = Message{false, a.mb, st.stage - 1, st.stage}; break;
      case ActionKind::RecvGrad: st.message = Message{true, a.mb, st.stage + 1, st.stage}; break;
      case ActionKind::Backward:
      case ActionKind::BackwardWeight: last_gradient[a.chunk] = i; break;
      default: break;
    }
    st.name = event_name(a);
    st.kind = trace_kind(a.kind);
    st.lane = lane_of(a.kind);
    steps.push_back(std::move(st));
  }
  for (const auto& [chunk, index] : last_gradient) steps[index].completes_gradients = true;
  return steps;
}

void run_step(const Step& st, ScheduleHandler& handler) {
  switch (st.action.kind) {
    case ActionKind::Forward: handler.forward(st); break;
    case ActionKind::Backward:
    case ActionKind::BackwardInput:
    case ActionKind::BackwardWeight: handler.backward(st); break;
    case ActionKind::SendAct:
    case ActionKind::SendGrad: handler.send(st); break;
    case ActionKind::RecvAct:
    case ActionKind::RecvGrad: handler.recv(st); break;
    case ActionKind::GradSync: handler.grad_sync(st); break;
    case ActionKind::OptimizerStep: handler.optimizer_step(st); break;
  }
}

void run_schedule(const std::vector<Step>& steps, ScheduleHandler& handler) {
  for (const Step& st : steps) run_step(st, handler);
}

}  // namespace quintnet::core
