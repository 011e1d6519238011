#include "exec/comm/c10d_compat.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// Gloo's own headers come with PyPI's wheels and Debian's libtorch-dev, not with every
// PyTorch installation (a GPU image's torch 2.11 had none): without them the CPU process
// groups are switched off (NCCL still works) and make_gloo says so.
#if __has_include(<gloo/algorithm.h>)
#define QN_HAVE_GLOO_HEADERS 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef QN_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <future>
#include <memory>
#include <thread>

#include "core/error.h"
#include "exec/comm/gloo_endpoint.h"

namespace quintnet::exec {

c10::intrusive_ptr<c10d::Store> make_tcp_store(const std::string& host, int port, int rank, int world_size,
                                               std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = rank == 0;
  opts.numWorkers = static_cast<std::size_t>(world_size);
  opts.waitWorkers = true;
  opts.timeout = timeout;
  // LibTorch 1.13's client reads the server's replies with no timeout of its own: on a port
  // where something other than rank 0's store listens (the master's port taken by another
  // program, or a wrong --master-port), the constructor would wait forever.  It runs on a
  // thread of its own, given the timeout (and a margin for the store's own); past it this
  // rank gives up with the reason.  The thread, blocked in a read, stays behind: the
  // process then exits with the error.
  using Result = c10::intrusive_ptr<c10d::Store>;
  auto made = std::make_shared<std::promise<Result>>();
  std::future<Result> store = made->get_future();
  std::thread([host, opts, made] {
    try {
      made->set_value(c10::make_intrusive<c10d::TCPStore>(host, opts));
    } catch (...) {
      made->set_exception(std::current_exception());
    }
  }).detach();
  if (store.wait_for(timeout + std::chrono::seconds(5)) == std::future_status::timeout)
    throw std::runtime_error("something listens at " + host + ":" + std::to_string(port) +
                             " but no rendezvous store answered within " +
                             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                             " s (another program holds the master's port, or the address or port is wrong)");
  return store.get();
}

c10::intrusive_ptr<c10d::Store> make_file_store(const std::string& path, int world_size) {
  return c10::make_intrusive<c10d::FileStore>(path, world_size);
}

c10::intrusive_ptr<c10d::Store> make_prefix_store(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store) {
  return c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store));
}

c10::intrusive_ptr<CommBackend> make_gloo(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                          std::chrono::milliseconds timeout, const GlooEndpoint& where) {
#ifdef QN_HAVE_GLOO_HEADERS
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  opts->devices.push_back(where.interface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(where.address)
                                                  : c10d::ProcessGroupGloo::createDeviceForInterface(where.interface));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(std::move(store), rank, size, opts);
#else
  (void)store, (void)rank, (void)size, (void)timeout, (void)where;
  throw core::UserError("this build's PyTorch installation ships no Gloo headers, so CPU process groups are not "
                        "built in; train on CUDA (NCCL) or build against a PyTorch wheel or Debian's libtorch-dev");
#endif
}

c10::intrusive_ptr<CommBackend> make_nccl(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                          std::chrono::milliseconds timeout) {
#ifdef QN_WITH_CUDA
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(std::move(store), rank, size, opts);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw core::UserError("device_type cuda: this build has no CUDA/NCCL support (configure with a CUDA LibTorch "
                        "and NCCL, see experiments/gpu/check.sh), or set device_type: cpu");
#endif
}

}  // namespace quintnet::exec
