#pragma once
// StageMessages — the point-to-point messages between pipeline stages of one schedule:
// activations forward, their gradients backward, over the pp group.
//
// It owns what a message is on the wire: its c10d tag (core::Message::tag, the same on
// both sides), its receive buffer ([micro-batch, tokens, hidden], fp32 — what crosses a
// stage boundary under autocast too) and the life of a sent tensor: a send is posted
// and returns; the tensor stays alive until the schedule shows the message delivered
// (core/schedule_delivery.h) — release_delivered() after each action — or the step ends
// (finish()).  The pipeline runner (exec/pp/pipeline_runner.h) calls it for the
// training schedule and for the forward-only schedule of evaluation.
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <vector>

#include "core/schedule.h"
#include "core/schedule_interpreter.h"
#include "exec/comm/communicator.h"

namespace quintnet::exec {

class StageMessages {
 public:
  // `rank`: this process's pipeline rank; tokens, hidden: the activation's shape.
  StageMessages(Communicator& comm, Group& pp, const core::Schedule& schedule, int rank, int64_t tokens,
                int64_t hidden);

  // Posts `t` (contiguous) to pipeline rank `peer`; returns its bytes.
  int64_t send(const core::Message& m, int peer, const torch::Tensor& t);
  // Blocks until the message from `peer` has arrived; `like` gives the micro-batch size
  // and the device.
  torch::Tensor recv(const core::Message& m, int peer, const torch::Tensor& like);
  // After the action at `step_index` of this rank's list: frees the sends the schedule
  // shows were received before it (their waits return at once).
  void release_delivered(std::size_t step_index);
  // The end of the step: waits for every send still pending.
  void finish();

  int tag(const core::Message& m) const { return m.tag(schedule_); }

 private:
  struct PendingSend {
    c10::intrusive_ptr<c10d::Work> work;
    torch::Tensor tensor;
  };
  Communicator& comm_;
  Group& pp_;
  const core::Schedule& schedule_;
  int64_t tokens_, hidden_;
  std::vector<std::vector<core::Message>> delivered_before_;  // per action of this rank
  std::map<core::Message, PendingSend> pending_;
};

}  // namespace quintnet::exec
