#pragma once
// The one reading of a schedule that every interpreter shares.
//
// core::Schedule says what each pipeline rank does; this file says what each action
// *means*, once, for the validator (core/schedule_validator.cpp), the schedule's own
// trace (core/schedule_trace.cpp), the executor (exec/pp/pipeline_runner.cpp) and the
// simulator (sim/rank_actor.cpp):
//   - which stage an action runs;
//   - which message a SEND/RECV carries — its identity, the same on both sides;
//   - whether a backward completes its chunk's gradients (where DP may start reducing);
//   - its name and category in a trace, and the lane it is drawn on.
// run_schedule() walks one rank's list and hands each action to a ScheduleHandler: the
// executor and the simulator implement its methods, the validator (which advances
// several ranks in lockstep, waiting on receives) reads the same Steps.
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/schedule.h"
#include "core/trace.h"

namespace quintnet::core {

// An activation (forward) or a gradient (backward) between two stages of one microbatch.
struct Message {
  bool grad = false;
  int mb = 0;
  int from_stage = 0, to_stage = 0;

  // A number unique to the message within one step of the schedule (c10d tags).
  int tag(const Schedule& s) const { return ((grad ? 1 : 0) * s.num_stages() + to_stage) * s.microbatches + mb; }
  bool operator<(const Message& o) const {
    return std::tie(grad, mb, to_stage, from_stage) < std::tie(o.grad, o.mb, o.to_stage, o.from_stage);
  }
  bool operator==(const Message& o) const {
    return grad == o.grad && mb == o.mb && to_stage == o.to_stage && from_stage == o.from_stage;
  }
};

// One action of one rank with what it means.
struct Step {
  Action action;
  std::size_t index = 0;  // position in the rank's list
  int rank = 0;           // pipeline rank
  int stage = 0;          // the stage of the action's chunk
  std::optional<Message> message;  // SEND_*/RECV_*
  // B, or BW when the backward is split: the last one of its chunk on this rank, after
  // which the chunk's gradients are complete.
  bool completes_gradients = false;
  std::string name;  // in traces: "F3", "BW0", "SEND_ACT(mb 3, chunk 0, to rank 1)", "GRAD_SYNC(chunk 0)", ...
  const char* kind = "";  // the trace category: forward, backward, ..., send, recv, grad-sync, optimizer
  Lane lane = Lane::Compute;
};

// The trace category of an action kind: forward, backward, backward-input,
// backward-weight, send, recv, grad-sync, optimizer.
const char* trace_kind(ActionKind kind);

// Rank `rank`'s list, read.  Does not check the schedule (simulate_schedule does):
// an invalid one gives Steps whose stages may lie outside the model.
std::vector<Step> interpret(const Schedule& schedule, int rank);

// What runs the actions of one rank.
class ScheduleHandler {
 public:
  virtual ~ScheduleHandler() = default;
  virtual void forward(const Step& step) = 0;
  virtual void backward(const Step& step) = 0;  // B, BI or BW: step.action.kind
  virtual void send(const Step& step) = 0;      // SEND_ACT, SEND_GRAD: asynchronous
  virtual void recv(const Step& step) = 0;      // RECV_ACT, RECV_GRAD: blocks until the data is there
  virtual void grad_sync(const Step& step) = 0;
  virtual void optimizer_step(const Step& step) = 0;
};

// Hands one Step to the handler method for its action.
void run_step(const Step& step, ScheduleHandler& handler);
// Hands each Step of `steps` (one rank's, from interpret()) to the handler, in order.
void run_schedule(const std::vector<Step>& steps, ScheduleHandler& handler);

}  // namespace quintnet::core
