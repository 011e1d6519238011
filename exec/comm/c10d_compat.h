#pragma once
// The one place that knows how c10d is spelled in each LibTorch version.
//   1.13 (Debian): ProcessGroupGloo/NCCL derive from c10d::ProcessGroup.
//   2.x (pip wheels on GPU machines): they derive from c10d::Backend.
// The rest of exec talks to `CommBackend` and `c10d::Work` only.
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>

#include <chrono>
#include <string>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace quintnet::exec {

struct GlooEndpoint;

#if TORCH_VERSION_MAJOR >= 2
using CommBackend = c10d::Backend;
#else
using CommBackend = c10d::ProcessGroup;
#endif

// A Work that is done when it is made: for backends that complete a call before returning.
class DoneWork : public c10d::Work {
 public:
  DoneWork() { finish(); }
};

// Rendezvous store: rank 0 serves, the others connect; waits up to `timeout`.
c10::intrusive_ptr<c10d::Store> make_tcp_store(const std::string& host, int port, int rank, int world_size,
                                               std::chrono::milliseconds timeout);
// A namespace inside a store, so every group gets its own keys.
// A store in a file of a folder only this user can read: no network listener at all.
c10::intrusive_ptr<c10d::Store> make_file_store(const std::string& path, int world_size);
c10::intrusive_ptr<c10d::Store> make_prefix_store(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store);

// Gloo over TCP, listening where `where` says (exec/comm/gloo_endpoint.h).
c10::intrusive_ptr<CommBackend> make_gloo(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                          std::chrono::milliseconds timeout, const GlooEndpoint& where);

// Whether the backend of `device_type` ("cpu": Gloo, "cuda": NCCL) has a reduce-scatter:
// NCCL always, Gloo from LibTorch 2 on (1.13's throws "does not support reduce_scatter").
constexpr bool has_reduce_scatter(bool nccl) { return nccl || TORCH_VERSION_MAJOR >= 2; }

// NCCL; only in builds with QN_WITH_CUDA (throws UserError otherwise).
c10::intrusive_ptr<CommBackend> make_nccl(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                          std::chrono::milliseconds timeout);

}  // namespace quintnet::exec
