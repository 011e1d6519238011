#pragma once
// TraceRecorder — times what one rank does into core::Trace events.
//
// Clocks: every rank takes its origin right after a barrier at the start of
// training; the ranks on rank 0's machine then take rank 0's (share_origin), so their
// timelines line up exactly, others' to within the barrier's skew.  Events
// are recorded only while active (the traced steps).  At the end each rank publishes
// its events through the rendezvous store and rank 0 merges them into one trace,
// pairing each send with its receive (same step, same message tag) as a flow.
#include <chrono>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/mesh.h"
#include "core/trace.h"

namespace quintnet::exec {

class Communicator;

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  TraceRecorder(const core::Mesh& mesh, int rank);

  void set_origin(Clock::time_point t) { origin_ = t; }
  // Collective: ranks on rank 0's machine take its origin exactly — processes of one
  // machine read the same steady clock —, others keep their own (set after a barrier,
  // which aligns them only to within its release skew: milliseconds on a busy CPU).
  void share_origin(Communicator& comm, const torch::Device& device);
  void set_step(int step, bool active) { step_ = step, active_ = active; }
  bool active() const { return active_; }
  // Removes and returns the events of `step` (its message endpoints are dropped too):
  // for measurements that are not training steps (exec/train/op_probe.h).
  std::vector<core::TraceEvent> take_step(int step);

  void event(core::Lane lane, const std::string& kind, const std::string& name, Clock::time_point start,
             Clock::time_point end, int mb = -1, int chunk = -1, std::int64_t bytes = 0, int peer = -1);
  // A message endpoint: `tag` identifies the message within a step between two ranks.
  void send(int tag, int to_rank, Clock::time_point at);
  void recv(int tag, int from_rank, Clock::time_point at);

  // Collective over all ranks: rank 0 writes the merged trace to `path` with
  // `other` (plan, platform, summary) as otherData; returns the merged trace there.
  core::Trace merge_and_write(Communicator& comm, const std::string& path, const nlohmann::json& plan,
                              const nlohmann::json& platform);

 private:
  double us(Clock::time_point t) const { return std::chrono::duration<double, std::micro>(t - origin_).count(); }

  struct Endpoint {
    int step, tag, peer;
    double ts;
  };
  core::Mesh mesh_;
  int rank_;
  Clock::time_point origin_ = Clock::now();
  int step_ = 0;
  bool active_ = false;
  std::vector<core::TraceEvent> events_;
  std::vector<Endpoint> sends_, recvs_;
};

}  // namespace quintnet::exec
