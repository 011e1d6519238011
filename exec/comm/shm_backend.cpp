#include "exec/comm/shm_backend.h"

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "exec/comm/shm_segment.h"

namespace quintnet::exec {
namespace {

// Each group's segment: two sets of (one slot per member + the result area).  4 MiB
// keeps a 2 × 2 × 2 run's fifteen groups under 64 MiB of memory; a two-rank group
// moves the ViT's 1.6 MB bucket in three pieces.
constexpr std::size_t kSegmentBytes = 4u << 20;

// Up to this size every member sums the whole tensor itself (one barrier) instead of its
// part (two barriers: parts summed, then gathered).  A tensor-parallel activation — the
// ViT's 100 KB, four per block and microbatch — costs a few microseconds to sum; each
// barrier, where ranks outnumber cores, is a sleep and a wake-up of every member.
constexpr std::int64_t kEveryoneSumsBytes = 256 << 10;

class ShmBackend : public CommBackend {
 public:
  ShmBackend(std::unique_ptr<ShmSegment> segment, c10::intrusive_ptr<CommBackend> gloo, int rank, int size)
      : CommBackend(rank, size),
        segment_(std::move(segment)),
        gloo_(std::move(gloo)),
        // 64-byte multiples: every dtype's elements, and no two members on one cache line.
        slot_bytes_(segment_->bytes() / (2 * (size + 1)) / 64 * 64) {}

  const std::string getBackendName() const override { return kShmBackendName; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    if (tensors.size() != 1 || !handles(tensors[0], opts.reduceOp)) return gloo_->allreduce(tensors, opts);
    all_reduce(tensors[0], opts.reduceOp);
    return c10::make_intrusive<DoneWork>();
  }

  // The rest is Gloo's.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    return gloo_->broadcast(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return gloo_->allgather(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    return gloo_->reduce_scatter(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return gloo_->send(tensors, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return gloo_->recv(tensors, src, tag);
  }

 private:
  static bool handles(const at::Tensor& t, c10d::ReduceOp op) {
    const bool numeric = at::isFloatingType(t.scalar_type()) || at::isIntegralType(t.scalar_type(), /*includeBool=*/false);
    return t.device().is_cpu() && t.is_contiguous() && numeric && (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX);
  }

  void all_reduce(at::Tensor& t, c10d::ReduceOp op) {
    torch::NoGradGuard no_grad;
    const at::Tensor flat = t.view({-1});
    const std::int64_t per_piece = static_cast<std::int64_t>(slot_bytes_) / t.element_size();
    // An empty tensor still takes one (empty) piece: every member meets the others.
    const std::int64_t pieces = std::max<std::int64_t>(1, (flat.numel() + per_piece - 1) / per_piece);
    const bool everyone_sums = flat.numel() * t.element_size() <= kEveryoneSumsBytes;
    for (std::int64_t i = 0; i < pieces; ++i) {
      const std::int64_t start = i * per_piece, n = std::min(per_piece, flat.numel() - start);
      std::byte* set = segment_->data() + (pieces_++ % 2) * (size_ + 1) * slot_bytes_;
      const auto area = [&](int k) { return torch::from_blob(set + k * slot_bytes_, {n}, t.options()); };
      at::Tensor mine = flat.narrow(0, start, n);
      area(rank_).copy_(mine);
      if (start == 0) segment_->announce(flat.numel());
      segment_->barrier();
      if (start == 0) check_same_size(flat.numel());
      if (everyone_sums) {  // every member sums the whole piece, straight into its tensor
        reduce_into(mine, [&](int k) { return area(k); }, op);
        continue;
      }
      // Part m of the piece: [n m / size, n (m + 1) / size).
      const std::int64_t lo = n * rank_ / size_, hi = n * (rank_ + 1) / size_;
      at::Tensor result = area(size_).narrow(0, lo, hi - lo);
      reduce_into(result, [&](int k) { return area(k).narrow(0, lo, hi - lo); }, op);
      segment_->barrier();
      mine.copy_(area(size_));
    }
  }

  // out = part(0) op part(1) op ... op part(size - 1), in member order: every member that
  // sums a range gets the same bits for it.
  void reduce_into(at::Tensor& out, const std::function<at::Tensor(int)>& part, c10d::ReduceOp op) const {
    if (op == c10d::ReduceOp::SUM)
      at::add_out(out, part(0), part(1));
    else
      at::maximum_out(out, part(0), part(1));
    for (int k = 2; k < size_; ++k) {
      if (op == c10d::ReduceOp::SUM)
        out.add_(part(k));
      else
        at::maximum_out(out, out, part(k));
    }
  }

  // Members that disagree on the size would take different numbers of pieces and fall
  // out of step: every member sees the disagreement after the first barrier and stops.
  void check_same_size(std::int64_t mine) const {
    for (int m = 0; m < size_; ++m)
      if (segment_->announced(m) != mine)
        throw std::runtime_error("shared-memory all-reduce: this member has " + std::to_string(mine) +
                                 " elements, member " + std::to_string(m) + " has " +
                                 std::to_string(segment_->announced(m)) + " (ranks disagree on a tensor's shape)");
  }

  std::unique_ptr<ShmSegment> segment_;
  c10::intrusive_ptr<CommBackend> gloo_;
  std::size_t slot_bytes_;
  std::uint64_t pieces_ = 0;
};

}  // namespace

c10::intrusive_ptr<CommBackend> with_shared_memory(c10::intrusive_ptr<CommBackend> gloo, c10d::Store& store,
                                                   const std::vector<int>& ranks, int member,
                                                   std::chrono::milliseconds timeout, bool spin) {
  std::unique_ptr<ShmSegment> segment = ShmSegment::open(store, member, ranks, kSegmentBytes, timeout, spin);
  if (!segment) return gloo;
  const int size = static_cast<int>(ranks.size());
  return c10::make_intrusive<ShmBackend>(std::move(segment), std::move(gloo), member, size);
}

}  // namespace quintnet::exec
