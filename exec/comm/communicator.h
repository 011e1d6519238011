#pragma once
// Communicator — the process groups of one rank, built from core::Mesh.
//
// One c10d group per mesh axis (tp, dp, pp) and per axis set asked for (e.g. {tp, pp}
// for the gradient norm), each on its own prefix of one TCPStore.  Gloo has no
// communicator split, so every member of a group constructs it and non-members skip
// it.  A group of size 1 has no backend at all: its collectives are no-ops.
// Every operation has the timeout given at construction: a dead or silent peer
// becomes an exception (CommError), never a hang; its message says at which step and,
// from the ranks' heartbeats (exec/comm/heartbeat.h), which rank went silent.
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mesh.h"
#include "exec/comm/c10d_compat.h"
#include "exec/comm/heartbeat.h"
#include "exec/launch/rank_env.h"

namespace quintnet::exec {

// A peer died, timed out or the network failed.  Not a user error: exit 1.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Group {
  std::string name;          // "tp", "dp", "pp", "tp+pp", "world"
  std::vector<int> ranks;    // global ranks, ordered by coordinate
  int rank = 0;              // this process's index in `ranks`
  c10::intrusive_ptr<CommBackend> backend;  // null when size() == 1

  int size() const { return static_cast<int>(ranks.size()); }
};

class TraceRecorder;

class Communicator {
 public:
  // Rendezvous with every rank of `env` and build the groups of `mesh` (whose world
  // size must equal env.world_size: check with Plan validation first).
  Communicator(const RankEnv& env, const core::Mesh& mesh, core::Device device, std::chrono::milliseconds timeout);

  const RankEnv& env() const { return env_; }
  const core::Mesh& mesh() const { return mesh_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }

  Group& world() { return world_; }
  // The recorder of this rank's trace (null when not tracing); collectives report to it.
  TraceRecorder* tracer() const { return tracer_; }
  void set_tracer(TraceRecorder* tracer) { tracer_ = tracer; }
  // The training step in progress (1-based; 0 during set-up), for failure messages and
  // the heartbeat the other ranks read.
  void set_step(std::int64_t step);
  Group& axis(core::Axis axis);
  Group& axes(const std::vector<core::Axis>& axes);  // e.g. {Axis::Tp, Axis::Pp}
  // The first and last rank of this rank's pp group, which hold the end stages and a
  // parameter they share (a tied embedding; Megatron-LM's embedding group): the pp group
  // itself for pp 2.  Built on first use by those two ranks, the only ones that may ask.
  Group& pipeline_ends();
  // The ranks that hold this rank's weights and average their gradients: the dp group,
  // or dp × cp where the mesh has a cp axis (each cp rank saw its part of the same samples).
  Group& replicas();

  // Collectives; each waits and turns a c10d failure into CommError naming the group.
  void all_reduce_sum(Group& g, torch::Tensor& t);
  void all_reduce_max(Group& g, torch::Tensor& t);
  c10::intrusive_ptr<c10d::Work> all_reduce_sum_async(Group& g, torch::Tensor& t);  // null for size 1
  // Reduce-scatter: `input`, g.size() equal parts in group order, summed over the group;
  // this member's part into `output`.  Only where can_reduce_scatter(g, input).
  c10::intrusive_ptr<c10d::Work> reduce_scatter_sum_async(Group& g, torch::Tensor& input, torch::Tensor& output);
  // NCCL, the store backend, shared memory on one host (exec/comm/shm_backend.h) and
  // LibTorch 2's Gloo have one; bf16 on the CPU goes the all-reduce's fp32 way instead.
  bool can_reduce_scatter(const Group& g, const torch::Tensor& t) const;
  // The groups' backend: NCCL (CUDA), Gloo (CPU) or Store (through host memory and the
  // rendezvous store, exec/comm/store_backend.h: where several ranks share a GPU, which
  // NCCL refuses, or QN_COMM_BACKEND=store).
  enum class Backend { Gloo, Nccl, Store };
  Backend backend() const { return backend_; }
  // One line for the run's header: which transport this rank's groups use (empty for one
  // process, and for the store backend, whose note the constructor prints).
  std::string describe() const;
  void broadcast(Group& g, torch::Tensor& t, int root_index);
  // Concatenates each member's `t` along `dim`, in group order.
  torch::Tensor all_gather(Group& g, const torch::Tensor& t, int64_t dim);
  void barrier(Group& g);
  // Point-to-point inside a group (peer = index in the group); tags tell messages apart.
  c10::intrusive_ptr<c10d::Work> send_async(Group& g, torch::Tensor& t, int peer, int tag);
  void recv(Group& g, torch::Tensor& t, int peer, int tag);
  void wait(c10d::Work& work, const std::string& what);
  // Every rank passes a string; rank 0 gets all of them in rank order (others: empty).
  // Goes through the rendezvous store: for end-of-run data such as traces.
  std::vector<std::string> gather_strings(const std::string& mine);

 private:
  void connect_store();  // rendezvous; a single process needs none
  void join_run(const std::string& where);  // QN_RUN_TOKEN: refuse a rank of another run
  Group build_group(const std::string& name, const std::vector<int>& ranks);
  bool gloo_lacks_dtype(const torch::Tensor& t) const;  // bfloat16 on Gloo: collectives run on an fp32 copy
  // "<what> failed on rank R at step S: <reason>; <which rank went silent>".
  CommError failed(const std::string& what, const std::exception& e) const;

  RankEnv env_;
  core::Mesh mesh_;
  core::Device device_;
  Backend backend_;
  bool shared_memory_;  // a Gloo group's collectives and messages through shared memory on one host (not QN_COMM_BACKEND=gloo)
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  Group world_;
  std::map<std::string, Group> groups_;
  int gathers_ = 0;  // distinct store keys per gather
  TraceRecorder* tracer_ = nullptr;
  std::int64_t step_ = 0;
  std::unique_ptr<Heartbeat> heartbeat_;  // null for a single process
};

}  // namespace quintnet::exec
