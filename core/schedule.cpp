#include "core/schedule.h"

#include <cctype>

#include "core/error.h"

namespace quintnet::core {

bool is_compute(ActionKind kind) {
  return kind == ActionKind::Forward || kind == ActionKind::Backward ||
         kind == ActionKind::BackwardInput || kind == ActionKind::BackwardWeight;
}

bool is_send(ActionKind kind) { return kind == ActionKind::SendAct || kind == ActionKind::SendGrad; }
bool is_recv(ActionKind kind) { return kind == ActionKind::RecvAct || kind == ActionKind::RecvGrad; }
bool is_p2p(ActionKind kind) { return is_send(kind) || is_recv(kind); }

const char* action_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward: return "F";
    case ActionKind::Backward: return "B";
    case ActionKind::BackwardInput: return "BI";
    case ActionKind::BackwardWeight: return "BW";
    case ActionKind::SendAct: return "SEND_ACT";
    case ActionKind::RecvAct: return "RECV_ACT";
    case ActionKind::SendGrad: return "SEND_GRAD";
    case ActionKind::RecvGrad: return "RECV_GRAD";
    case ActionKind::GradSync: return "GRAD_SYNC";
    case ActionKind::OptimizerStep: return "OPTIMIZER_STEP";
  }
  return "?";
}

ActionKind parse_action_kind(const std::string& name) {
  for (ActionKind k : {ActionKind::Forward, ActionKind::Backward, ActionKind::BackwardInput,
                       ActionKind::BackwardWeight, ActionKind::SendAct, ActionKind::RecvAct,
                       ActionKind::SendGrad, ActionKind::RecvGrad, ActionKind::GradSync,
                       ActionKind::OptimizerStep})
    if (name == action_name(k)) return k;
  throw ScheduleError("unknown schedule action '" + name +
                      "'; expected F, B, BI, BW, SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD, "
                      "GRAD_SYNC or OPTIMIZER_STEP");
}

std::string to_string(const Action& a) {
  std::string out = action_name(a.kind);
  if (a.kind == ActionKind::OptimizerStep) return out;
  if (a.kind == ActionKind::GradSync) return out + "(chunk " + std::to_string(a.chunk) + ")";
  out += "(mb " + std::to_string(a.mb) + ", chunk " + std::to_string(a.chunk);
  if (is_send(a.kind))
    out += ", to rank " + std::to_string(a.peer);
  if (is_recv(a.kind))
    out += ", from rank " + std::to_string(a.peer);
  return out + ")";
}

ScheduleKind parse_schedule_kind(const std::string& raw) {
  std::string name;
  for (char c : raw) name += static_cast<char>((c == '_') ? '-' : std::tolower(static_cast<unsigned char>(c)));
  if (name == "afab" || name == "gpipe" || name == "all-forward-all-backward") return ScheduleKind::Afab;
  if (name == "1f1b" || name == "one-f-one-b") return ScheduleKind::OneFOneB;
  if (name == "interleaved" || name == "interleaved-1f1b" || name == "1f1b-interleaved")
    return ScheduleKind::Interleaved;
  if (name == "zb-h1" || name == "zbh1" || name == "zero-bubble" || name == "zb")
    return ScheduleKind::ZbH1;
  throw ConfigError("schedule: unknown schedule '" + raw +
                    "'; choose one of afab (GPipe), 1f1b, interleaved, zb-h1");
}

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::Afab: return "afab";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
    case ScheduleKind::ZbH1: return "zb-h1";
  }
  return "?";
}

std::vector<std::string> schedule_kind_names() { return {"afab", "1f1b", "interleaved", "zb-h1"}; }

}  // namespace quintnet::core
