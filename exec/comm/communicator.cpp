#include "exec/comm/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "exec/comm/gloo_endpoint.h"
#include "exec/comm/shm_backend.h"
#include "exec/comm/store_backend.h"

namespace quintnet::exec {
namespace {

// What went wrong, without the C++ stack trace LibTorch appends to its own errors.
std::string reason(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

std::string join(const std::vector<core::Axis>& axes) {
  std::string out;
  for (core::Axis a : axes) out += (out.empty() ? "" : "+") + core::name_of(a);
  return out;
}

// The groups that send point-to-point messages: the pipeline's stages, the cp ring.
bool sends_messages(const std::string& group) { return group == "pp" || group == "cp"; }

std::string backend_asked() {
  const char* asked = std::getenv("QN_COMM_BACKEND");
  const std::string wanted = asked ? asked : "";
  if (!wanted.empty() && wanted != "store" && wanted != "gloo" && wanted != "auto")
    throw core::UserError("QN_COMM_BACKEND=" + wanted + ": choose auto, gloo (no shared memory) or store");
  return wanted;
}

// NCCL for CUDA and Gloo for the CPU, except where NCCL cannot serve — more ranks on a
// node than it has GPUs ("Duplicate GPU detected") — or where asked (QN_COMM_BACKEND=store).
Communicator::Backend choose_backend(const RankEnv& env, core::Device device) {
  using Backend = Communicator::Backend;
  if (backend_asked() == "store") return Backend::Store;
  if (device != core::Device::Cuda) return Backend::Gloo;
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  return gpus > 0 && env.local_world_size > gpus ? Backend::Store : Backend::Nccl;
}

}  // namespace

Communicator::Communicator(const RankEnv& env, const core::Mesh& mesh, core::Device device,
                           std::chrono::milliseconds timeout)
    : env_(env),
      mesh_(mesh),
      device_(device),
      backend_(choose_backend(env, device)),
      shared_memory_(backend_asked() != "gloo"),
      timeout_(timeout) {
  mesh_.check_world_size(env.world_size);
  if (backend_ == Backend::Store && env.rank == 0 && env.world_size > 1)
    std::cout << "note: collectives and pipeline messages go through host memory and the rendezvous store ("
              << (device == core::Device::Cuda ? std::to_string(env.local_world_size) + " ranks share " +
                                              std::to_string(torch::cuda::device_count()) +
                                              " GPU(s) on this node, which NCCL refuses"
                                        : std::string("QN_COMM_BACKEND=store"))
              << "): exact, and slow" << std::endl;
  if (env.world_size > 1) connect_store();
  std::vector<int> all(env.world_size);
  for (int r = 0; r < env.world_size; ++r) all[r] = r;
  world_ = build_group("world", all);
  for (core::Axis a : {core::Axis::Tp, core::Axis::Dp, core::Axis::Pp}) axis(a);
  if (mesh_.size(core::Axis::Cp) > 1) axis(core::Axis::Cp), replicas();
}

void Communicator::connect_store() {
  // One node started by quintnet launch: a FileStore in the launcher's private (0700)
  // folder, so nothing listens on the network for the rendezvous (Gloo's own pairs bind
  // 127.0.0.1).  Otherwise c10d's TCPStore at MASTER_ADDR:MASTER_PORT.
  const std::string where = env_.store_dir.empty() ? env_.master_addr + ":" + std::to_string(env_.master_port)
                                                   : env_.store_dir;
  try {
    store_ = env_.store_dir.empty()
                 ? make_tcp_store(env_.master_addr, env_.master_port, env_.rank, env_.world_size, timeout_)
                 : make_file_store(env_.store_dir + "/store", env_.world_size);
  } catch (const std::exception& e) {
    throw CommError("rendezvous at " + where + " failed for rank " + std::to_string(env_.rank) + " (are all " +
                    std::to_string(env_.world_size) + " ranks started? is the port free? set MASTER_PORT): " + reason(e));
  }
  if (!env_.run_token.empty()) join_run(where);
  heartbeat_ = std::make_unique<Heartbeat>(
      env_.store_dir.empty() ? beat_board_in_store(store_) : beat_board_in_folder(env_.store_dir), env_.rank,
      env_.world_size);
}

void Communicator::set_step(std::int64_t step) {
  step_ = step;
  if (heartbeat_) heartbeat_->set_step(step);
}

CommError Communicator::failed(const std::string& what, const std::exception& e) const {
  const std::string when = step_ > 0 ? " at step " + std::to_string(step_) : " during set-up";
  const std::string who = heartbeat_ ? "; " + heartbeat_->diagnose() : "";
  return CommError(what + " failed on rank " + std::to_string(env_.rank) + when + ": " + reason(e) + who);
}

void Communicator::join_run(const std::string& where) {
  // Rank 0 publishes a fingerprint of the run's token at the store's root; every other
  // rank compares it with its own, so a rank of another run (or a stray process) is
  // refused at once instead of waiting for keys it will never see.  The run's keys then
  // live under the token, out of reach of anyone who does not know it.
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a: the fingerprint does not give the token away
  for (unsigned char c : env_.run_token) hash = (hash ^ c) * 1099511628211ull;
  const std::string fingerprint = std::to_string(hash);
  const std::string key = "quintnet/run-fingerprint";
  if (env_.rank == 0) {
    store_->set(key, std::vector<std::uint8_t>(fingerprint.begin(), fingerprint.end()));
  } else {
    try {
      store_->wait({key}, timeout_);
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(env_.rank) + ": no rank 0 published its run at " + where +
                      " within the timeout: " + reason(e));
    }
    const std::vector<std::uint8_t> theirs = store_->get(key);
    if (std::string(theirs.begin(), theirs.end()) != fingerprint)
      throw core::UserError("rank " + std::to_string(env_.rank) + ": its QN_RUN_TOKEN is not the run's at " + where +
                            " (rank 0's); a rank of another run or a stray process cannot join it");
  }
  store_ = make_prefix_store("run/" + env_.run_token, store_);
}

Group Communicator::build_group(const std::string& name, const std::vector<int>& ranks) {
  Group g;
  g.name = name;
  g.ranks = ranks;
  g.rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), env_.rank) - ranks.begin());
  if (ranks.size() == 1) return g;
  // The group's smallest rank names it: unique among the groups of one axis set.
  const std::string prefix = "group/" + name + "/" + std::to_string(ranks.front());
  auto store = make_prefix_store(prefix, store_);
  // A waiting rank spins only where every local rank can have a core of its own.
  const bool spin = env_.local_world_size <= static_cast<int>(std::thread::hardware_concurrency());
  try {
    if (backend_ == Backend::Store)
      g.backend = make_store_backend(store, g.rank, g.size(), timeout_);
    else if (backend_ == Backend::Nccl)
      g.backend = make_nccl(store, g.rank, g.size(), timeout_);
    else if (!shared_memory_)
      g.backend = make_gloo(store, g.rank, g.size(), timeout_, gloo_endpoint(env_));
    else  // collectives (and the pipeline's and the cp ring's messages) through shared memory on one host
      g.backend = with_shared_memory(make_gloo(store, g.rank, g.size(), timeout_, gloo_endpoint(env_)), *store, ranks,
                                     g.rank, timeout_, spin, sends_messages(name));
  } catch (const core::UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw failed("creating the " + name + " process group", e);
  }
  return g;
}

std::string Communicator::describe() const {
  if (world_size() == 1 || backend_ == Backend::Store) return "";
  if (backend_ == Backend::Nccl) return "communication: NCCL";
  std::string shared, messages;  // the groups whose collectives, and messages, go through shared memory
  const auto note = [&](const Group& g) {
    if (!g.backend || g.backend->getBackendName() != kShmBackendName) return;
    shared += (shared.empty() ? "" : ", ") + g.name;
    if (sends_messages(g.name)) messages += (messages.empty() ? "" : ", ") + g.name;
  };
  for (const auto& entry : groups_) note(entry.second);
  note(world_);
  if (shared.empty()) return "communication: Gloo over TCP";
  return "communication: shared memory (one host) for the collectives of " + shared +
         (messages.empty() ? "" : " and the messages of " + messages) + "; Gloo over TCP for the rest";
}

Group& Communicator::axis(core::Axis axis) { return axes({axis}); }

Group& Communicator::axes(const std::vector<core::Axis>& axes) {
  const std::string key = join(axes);
  auto it = groups_.find(key);
  if (it != groups_.end()) return it->second;
  std::vector<int> ranks = axes.size() == 1 ? mesh_.group(env_.rank, axes[0]) : mesh_.group(env_.rank, axes);
  return groups_.emplace(key, build_group(key, ranks)).first->second;
}

Group& Communicator::pipeline_ends() {
  const std::vector<int> pp = mesh_.group(env_.rank, core::Axis::Pp);
  if (pp.size() <= 2) return axis(core::Axis::Pp);
  if (env_.rank != pp.front() && env_.rank != pp.back())
    throw std::logic_error("pipeline_ends: rank " + std::to_string(env_.rank) + " holds a middle stage");
  const std::string key = "pp-ends";
  auto it = groups_.find(key);
  if (it != groups_.end()) return it->second;
  return groups_.emplace(key, build_group(key, {pp.front(), pp.back()})).first->second;
}

Group& Communicator::replicas() {
  return mesh_.size(core::Axis::Cp) > 1 ? axes({core::Axis::Dp, core::Axis::Cp}) : axis(core::Axis::Dp);
}

void Communicator::wait(c10d::Work& work, const std::string& what) {
  try {
    work.wait(timeout_);
  } catch (const std::exception& e) {
    throw failed(what, e);
  }
}

c10::intrusive_ptr<c10d::Work> Communicator::all_reduce_sum_async(Group& g, torch::Tensor& t) {
  if (!g.backend) return {};
  std::vector<at::Tensor> ts{t};
  try {
    return g.backend->allreduce(ts);
  } catch (const std::exception& e) {
    throw failed("all-reduce on the " + g.name + " group", e);
  }
}

c10::intrusive_ptr<c10d::Work> Communicator::reduce_scatter_sum_async(Group& g, torch::Tensor& input,
                                                                      torch::Tensor& output) {
  if (!g.backend) {
    output.copy_(input);
    return {};
  }
  std::vector<at::Tensor> outputs{output};
  std::vector<std::vector<at::Tensor>> inputs{input.chunk(g.size())};
  try {
    return g.backend->reduce_scatter(outputs, inputs);
  } catch (const std::exception& e) {
    throw failed("reduce-scatter on the " + g.name + " group", e);
  }
}

bool Communicator::can_reduce_scatter(const Group& g, const torch::Tensor& t) const {
  if (backend_ == Backend::Store) return true;
  const bool shared_memory = g.backend && g.backend->getBackendName() == kShmBackendName;
  return (shared_memory || has_reduce_scatter(backend_ == Backend::Nccl)) && !gloo_lacks_dtype(t);
}

bool Communicator::gloo_lacks_dtype(const torch::Tensor& t) const {
  // Gloo (LibTorch 1.13) has no bfloat16 arithmetic ("Invalid scalar type"); NCCL has.
  return device_ != core::Device::Cuda && t.scalar_type() == torch::kBFloat16;
}

void Communicator::all_reduce_sum(Group& g, torch::Tensor& t) {
  if (gloo_lacks_dtype(t)) {  // mixed precision on CPU: reduce an fp32 copy
    torch::Tensor wide = t.to(torch::kFloat32);
    all_reduce_sum(g, wide);
    t.copy_(wide);
    return;
  }
  auto work = all_reduce_sum_async(g, t);
  if (work) wait(*work, "all-reduce on the " + g.name + " group");
}

void Communicator::all_reduce_max(Group& g, torch::Tensor& t) {
  if (!g.backend) return;
  std::vector<at::Tensor> ts{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  try {
    auto work = g.backend->allreduce(ts, opts);
    wait(*work, "all-reduce (max) on the " + g.name + " group");
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw failed("all-reduce (max) on the " + g.name + " group", e);
  }
}

void Communicator::broadcast(Group& g, torch::Tensor& t, int root_index) {
  if (!g.backend) return;
  std::vector<at::Tensor> ts{t};
  c10d::BroadcastOptions opts;
  opts.rootRank = root_index;
  try {
    auto work = g.backend->broadcast(ts, opts);
    wait(*work, "broadcast on the " + g.name + " group");
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw failed("broadcast on the " + g.name + " group", e);
  }
}

torch::Tensor Communicator::all_gather(Group& g, const torch::Tensor& t, int64_t dim) {
  if (!g.backend) return t;
  // Gloo has no bfloat16, yet a gather moves bytes only: gathered as those (viewing
  // keeps each element's bytes together along `dim`, the last one too).
  if (gloo_lacks_dtype(t)) return all_gather(g, t.contiguous().view(torch::kUInt8), dim).view(t.scalar_type());
  std::vector<at::Tensor> input{t.contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int i = 0; i < g.size(); ++i) output[0].push_back(torch::empty_like(input[0]));
  try {
    auto work = g.backend->allgather(output, input);
    wait(*work, "all-gather on the " + g.name + " group");
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw failed("all-gather on the " + g.name + " group", e);
  }
  return torch::cat(output[0], dim);
}

c10::intrusive_ptr<c10d::Work> Communicator::send_async(Group& g, torch::Tensor& t, int peer, int tag) {
  std::vector<at::Tensor> ts{t};
  try {
    return g.backend->send(ts, peer, tag);
  } catch (const std::exception& e) {
    throw failed("send to rank " + std::to_string(g.ranks[peer]), e);
  }
}

void Communicator::recv(Group& g, torch::Tensor& t, int peer, int tag) {
  std::vector<at::Tensor> ts{t};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = g.backend->recv(ts, peer, tag);
  } catch (const std::exception& e) {
    throw failed("receive from rank " + std::to_string(g.ranks[peer]), e);
  }
  wait(*work, "receive from rank " + std::to_string(g.ranks[peer]));
}

std::vector<std::string> Communicator::gather_strings(const std::string& mine) {
  if (world_size() == 1) return {mine};
  const std::string prefix = "gather/" + std::to_string(gathers_++) + "/";
  store_->set(prefix + std::to_string(rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> out;
  if (rank() == 0)
    for (int r = 0; r < world_size(); ++r) {
      const std::vector<uint8_t> v = store_->get(prefix + std::to_string(r));
      out.emplace_back(v.begin(), v.end());
    }
  barrier(world_);  // nobody leaves before rank 0 has read everything
  return out;
}

void Communicator::barrier(Group& g) {
  if (!g.backend) return;
  // An all-reduce of one element: works the same on Gloo and NCCL.
  auto t = torch::zeros({1}, device_ == core::Device::Cuda ? torch::kCUDA : torch::kCPU);
  all_reduce_sum(g, t);
}

}  // namespace quintnet::exec
