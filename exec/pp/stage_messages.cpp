#include "exec/pp/stage_messages.h"

#include "core/schedule_delivery.h"

namespace quintnet::exec {

StageMessages::StageMessages(Communicator& comm, Group& pp, const core::Schedule& schedule, int rank, int64_t tokens,
                             int64_t hidden)
    : comm_(comm),
      pp_(pp),
      schedule_(schedule),
      tokens_(tokens),
      hidden_(hidden),
      delivered_before_(core::delivered_before(schedule, rank)) {}

int64_t StageMessages::send(const core::Message& m, int peer, const torch::Tensor& t) {
  torch::Tensor sent = t.contiguous();
  pending_[m] = PendingSend{comm_.send_async(pp_, sent, peer, tag(m)), sent};
  return sent.numel() * sent.element_size();
}

torch::Tensor StageMessages::recv(const core::Message& m, int peer, const torch::Tensor& like) {
  torch::Tensor t = torch::empty({like.size(0), tokens_, hidden_}, like.options().dtype(torch::kFloat32));
  comm_.recv(pp_, t, peer, tag(m));
  return t;
}

void StageMessages::release_delivered(std::size_t step_index) {
  for (const core::Message& m : delivered_before_[step_index]) {
    const auto sent = pending_.find(m);
    comm_.wait(*sent->second.work, "pipeline send");  // delivered: returns at once
    pending_.erase(sent);
  }
}

void StageMessages::finish() {
  for (auto& [message, send] : pending_) comm_.wait(*send.work, "pipeline send");
  pending_.clear();
}

}  // namespace quintnet::exec
