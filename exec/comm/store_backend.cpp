#include "exec/comm/store_backend.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace quintnet::exec {
namespace {

std::vector<std::uint8_t> bytes_of(const at::Tensor& t) {
  const at::Tensor host = t.detach().to(torch::kCPU).contiguous();
  const auto* p = static_cast<const std::uint8_t*>(host.data_ptr());
  return std::vector<std::uint8_t>(p, p + host.numel() * host.element_size());
}

// A host tensor shaped like `like` from bytes a peer wrote.
at::Tensor tensor_of(const std::vector<std::uint8_t>& bytes, const at::Tensor& like) {
  at::Tensor out = torch::empty(like.sizes(), like.options().device(torch::kCPU));
  if (bytes.size() != static_cast<size_t>(out.numel() * out.element_size()))
    throw std::runtime_error("store backend: a peer sent " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(out.numel() * out.element_size()) + " (ranks disagree on a tensor's shape)");
  std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
  return out;
}

class StoreBackend : public CommBackend {
 public:
  StoreBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
      : CommBackend(rank, size), store_(std::move(store)) {}

  const std::string getBackendName() const override { return "store"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    at::Tensor& t = one(tensors);
    const std::vector<at::Tensor> parts = exchange(t);
    at::Tensor result = parts[0].clone();
    for (int r = 1; r < size_; ++r) {
      if (opts.reduceOp == c10d::ReduceOp::SUM)
        result.add_(parts[r]);
      else if (opts.reduceOp == c10d::ReduceOp::MAX)
        result = at::maximum(result, parts[r]);
      else
        throw std::runtime_error("store backend: all-reduce supports SUM and MAX only");
    }
    t.copy_(result);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    at::Tensor& t = one(tensors);
    const int root = static_cast<int>(opts.rootRank);
    // The others write an empty key: that they read the root's says they have started.
    const std::vector<std::vector<std::uint8_t>> all = exchange_bytes(rank_ == root ? bytes_of(t) : std::vector<std::uint8_t>{});
    if (rank_ != root) t.copy_(tensor_of(all[root], t));
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& = c10d::AllgatherOptions()) override {
    const std::vector<at::Tensor> parts = exchange(one(inputs));
    for (int r = 0; r < size_; ++r) outputs.at(0).at(r).copy_(parts[r]);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    if (opts.reduceOp != c10d::ReduceOp::SUM) throw std::runtime_error("store backend: reduce-scatter sums only");
    // Every rank's pieces, back to back; each keeps the sum of its own piece.
    const std::vector<at::Tensor> parts = exchange(torch::stack(inputs.at(0)));
    at::Tensor sum = parts[0][rank_].clone();
    for (int r = 1; r < size_; ++r) sum.add_(parts[r][rank_]);
    one(outputs).copy_(sum);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    store_->set(message_key(rank_, dst, tag), bytes_of(one(tensors)));
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    at::Tensor& t = one(tensors);
    const std::string key = message_key(src, rank_, tag);
    t.copy_(tensor_of(store_->get(key), t));
    store_->deleteKey(key);
    return c10::make_intrusive<DoneWork>();
  }

 private:
  static at::Tensor& one(std::vector<at::Tensor>& tensors) {
    if (tensors.size() != 1) throw std::runtime_error("store backend: one tensor per call");
    return tensors[0];
  }

  // Collective n: every rank writes its key "c/<n>/<rank>" and reads everybody's.  Having
  // read them all, a rank knows every rank has started n, so finished n - 1: it deletes
  // its own key of n - 1 (nobody reads it any more).
  std::vector<std::vector<std::uint8_t>> exchange_bytes(const std::vector<std::uint8_t>& mine) {
    const std::string prefix = "c/" + std::to_string(collectives_++) + "/";
    store_->set(prefix + std::to_string(rank_), mine);
    std::vector<std::vector<std::uint8_t>> all;
    for (int r = 0; r < size_; ++r) all.push_back(r == rank_ ? mine : store_->get(prefix + std::to_string(r)));
    if (!previous_key_.empty()) store_->deleteKey(previous_key_);
    previous_key_ = prefix + std::to_string(rank_);
    return all;
  }

  // Every rank's `t` (on the host), this rank's included, in rank order.
  std::vector<at::Tensor> exchange(const at::Tensor& t) {
    const std::vector<std::vector<std::uint8_t>> all = exchange_bytes(bytes_of(t));
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size_; ++r) parts.push_back(tensor_of(all[r], t));
    return parts;
  }

  // Messages from src to dst with one tag are numbered, so that a tag may be reused.
  std::string message_key(int src, int dst, int tag) {
    const int n = messages_[{src, dst, tag}]++;
    return "m/" + std::to_string(src) + ">" + std::to_string(dst) + "/" + std::to_string(tag) + "/" + std::to_string(n);
  }

  c10::intrusive_ptr<c10d::Store> store_;
  long collectives_ = 0;
  std::string previous_key_;  // this rank's key of the last collective
  std::map<std::tuple<int, int, int>, int> messages_;
};

}  // namespace

c10::intrusive_ptr<CommBackend> make_store_backend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                                   std::chrono::milliseconds timeout) {
  store->setTimeout(timeout);
  return c10::make_intrusive<StoreBackend>(std::move(store), rank, size);
}

}  // namespace quintnet::exec
