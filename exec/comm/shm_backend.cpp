#include "exec/comm/shm_backend.h"

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "exec/comm/shm_messages.h"
#include "exec/comm/shm_segment.h"

namespace quintnet::exec {
namespace {

// Each group's collective area: two sets of (one slot per member + the result area).
// 4 MiB keeps a 2 × 2 × 2 run's fifteen groups' collectives under 64 MiB of memory; a
// two-rank group moves the ViT's 1.6 MB bucket in three pieces.
constexpr std::size_t kCollectiveBytes = 4u << 20;

// Up to this size every member sums the whole tensor itself (one barrier) instead of its
// part (two barriers: parts summed, then gathered).  A tensor-parallel activation — the
// ViT's 100 KB, four per block and microbatch — costs a few microseconds to sum; each
// barrier, where ranks outnumber cores, is a sleep and a wake-up of every member.
constexpr std::int64_t kEveryoneSumsBytes = 256 << 10;

using Piece = std::function<void(std::byte* set, std::int64_t start, std::int64_t n)>;

class ShmBackend : public CommBackend {
 public:
  ShmBackend(std::unique_ptr<ShmSegment> segment, c10::intrusive_ptr<CommBackend> gloo, int rank, int size,
             bool messages)
      : CommBackend(rank, size),
        segment_(std::move(segment)),
        gloo_(std::move(gloo)),
        // 64-byte multiples: every dtype's elements, and no two members on one cache line.
        slot_bytes_(kCollectiveBytes / (2 * (size + 1)) / 64 * 64) {
    if (messages)
      messages_ = std::make_unique<ShmMessages>(*segment_, segment_->data() + kCollectiveBytes, rank, size);
  }

  const std::string getBackendName() const override { return kShmBackendName; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    const bool op = opts.reduceOp == c10d::ReduceOp::SUM || opts.reduceOp == c10d::ReduceOp::MAX;
    if (tensors.size() != 1 || !in_memory(tensors[0]) || !numeric(tensors[0]) || !op) return gloo_->allreduce(tensors, opts);
    all_reduce(tensors[0], opts.reduceOp);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    if (tensors.size() != 1 || opts.rootTensor != 0 || !in_memory(tensors[0])) return gloo_->broadcast(tensors, opts);
    broadcast(tensors[0], static_cast<int>(opts.rootRank));
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    if (!gatherable(outputs, inputs)) return gloo_->allgather(outputs, inputs, opts);
    all_gather(outputs[0], inputs[0]);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    if (!by_message(tensors, dst)) return gloo_->send(tensors, dst, tag);
    messages_->send(tensors[0], dst, tag);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    if (!by_message(tensors, src)) return gloo_->recv(tensors, src, tag);
    messages_->recv(tensors[0], src, tag);
    return c10::make_intrusive<DoneWork>();
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    if (opts.reduceOp != c10d::ReduceOp::SUM || !scatterable(outputs, inputs))
      return gloo_->reduce_scatter(outputs, inputs, opts);  // LibTorch 1.13's Gloo has none: it throws
    reduce_scatter(outputs[0], inputs[0]);
    return c10::make_intrusive<DoneWork>();
  }

 private:
  // What goes through shared memory depends only on the call, so every member chooses alike.
  static bool in_memory(const at::Tensor& t) { return t.device().is_cpu() && t.is_contiguous(); }
  static bool numeric(const at::Tensor& t) {
    return at::isFloatingType(t.scalar_type()) || at::isIntegralType(t.scalar_type(), /*includeBool=*/false);
  }
  bool gatherable(const std::vector<std::vector<at::Tensor>>& outputs, const std::vector<at::Tensor>& inputs) const {
    if (inputs.size() != 1 || outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_ || !in_memory(inputs[0]))
      return false;
    for (const at::Tensor& o : outputs[0])
      if (!in_memory(o) || o.numel() != inputs[0].numel() || o.scalar_type() != inputs[0].scalar_type()) return false;
    return true;
  }
  bool scatterable(const std::vector<at::Tensor>& outputs, const std::vector<std::vector<at::Tensor>>& inputs) const {
    if (outputs.size() != 1 || inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_ ||
        !in_memory(outputs[0]) || !numeric(outputs[0]))
      return false;
    for (const at::Tensor& part : inputs[0])
      if (!in_memory(part) || part.numel() != outputs[0].numel() || part.scalar_type() != outputs[0].scalar_type())
        return false;
    return true;
  }
  // A message goes through the mailboxes where this group has them and they carry it:
  // the sender's tensor and the receiver's buffer are the same size, so both ends agree.
  bool by_message(const std::vector<at::Tensor>& tensors, int peer) const {
    return messages_ && tensors.size() == 1 && tensors[0].device().is_cpu() &&
           messages_->carries(peer, tensors[0].numel() * tensors[0].element_size());
  }

  at::Tensor slot(std::byte* set, int k, std::int64_t n, const at::Tensor& like) const {
    return torch::from_blob(set + k * slot_bytes_, {n}, like.options());
  }

  // A collective over `numel` elements in pieces of at most `piece_bytes`: for each piece, every
  // member runs fill() (writes its slot), the barrier, then use() (reads the slots).
  // Pieces alternate between the two sets of slots, so use() needs no barrier after it: a
  // member writes a set again only after everyone has passed the next piece's barrier,
  // which each reaches once it has read this one.
  void in_pieces(std::int64_t numel, std::int64_t element_size, std::int64_t piece_bytes, const std::string& what,
                 const Piece& fill, const Piece& use) {
    torch::NoGradGuard no_grad;
    const std::int64_t per_piece = piece_bytes / element_size;
    // An empty tensor still takes one (empty) piece: every member meets the others.
    const std::int64_t pieces = std::max<std::int64_t>(1, (numel + per_piece - 1) / per_piece);
    for (std::int64_t i = 0; i < pieces; ++i) {
      const std::int64_t start = i * per_piece, n = std::min(per_piece, numel - start);
      std::byte* set = segment_->data() + (pieces_++ % 2) * (size_ + 1) * slot_bytes_;
      fill(set, start, n);
      if (start == 0) segment_->announce(numel);
      segment_->barrier();
      if (start == 0) check_same_size(numel, what);
      use(set, start, n);
    }
  }

  void all_reduce(at::Tensor& t, c10d::ReduceOp op) {
    const at::Tensor flat = t.view({-1});
    const bool everyone_sums = flat.numel() * t.element_size() <= kEveryoneSumsBytes;
    in_pieces(
        flat.numel(), t.element_size(), slot_bytes_, "all-reduce",
        [&](std::byte* set, std::int64_t start, std::int64_t n) { slot(set, rank_, n, t).copy_(flat.narrow(0, start, n)); },
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          at::Tensor mine = flat.narrow(0, start, n);
          if (everyone_sums) {  // every member sums the whole piece, straight into its tensor
            reduce_into(mine, [&](int k) { return slot(set, k, n, t); }, op);
            return;
          }
          // Part m of the piece, [n m / size, n (m + 1) / size), into the result area;
          // once all parts are there, the whole area into every member's tensor.
          const std::int64_t lo = n * rank_ / size_, hi = n * (rank_ + 1) / size_;
          at::Tensor result = slot(set, size_, n, t).narrow(0, lo, hi - lo);
          reduce_into(result, [&](int k) { return slot(set, k, n, t).narrow(0, lo, hi - lo); }, op);
          segment_->barrier();
          mine.copy_(slot(set, size_, n, t));
        });
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

  // The root's tensor through its slot: one barrier per piece.
  void broadcast(at::Tensor& t, int root) {
    const at::Tensor flat = t.view({-1});
    in_pieces(
        flat.numel(), t.element_size(), slot_bytes_, "broadcast",
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          if (rank_ == root) slot(set, root, n, t).copy_(flat.narrow(0, start, n));
        },
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          if (rank_ != root) flat.narrow(0, start, n).copy_(slot(set, root, n, t));
        });
  }

  // Every member copies all its parts into its slot, one after another; member m sums part
  // m over the slots, in member order, into its output: one barrier per piece, and the
  // same bits as the all-reduce's part m.
  void reduce_scatter(at::Tensor& output, const std::vector<at::Tensor>& parts) {
    const at::Tensor out = output.view({-1});
    const std::int64_t part_bytes_in_slot = static_cast<std::int64_t>(slot_bytes_) / size_ / 64 * 64;
    in_pieces(
        out.numel(), output.element_size(), part_bytes_in_slot, "reduce-scatter",
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          at::Tensor mine = slot(set, rank_, n * size_, output).view({size_, n});
          for (int k = 0; k < size_; ++k) mine[k].copy_(parts[k].view({-1}).narrow(0, start, n));
        },
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          at::Tensor result = out.narrow(0, start, n);
          reduce_into(result, [&](int k) { return slot(set, k, n * size_, output).view({size_, n})[rank_]; },
                      c10d::ReduceOp::SUM);
        });
  }

  // Every member's input through its own slot into everyone's outputs: one barrier per piece.
  void all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
    const at::Tensor flat = input.view({-1});
    in_pieces(
        flat.numel(), input.element_size(), slot_bytes_, "all-gather",
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          slot(set, rank_, n, input).copy_(flat.narrow(0, start, n));
        },
        [&](std::byte* set, std::int64_t start, std::int64_t n) {
          for (int k = 0; k < size_; ++k) outputs[k].view({-1}).narrow(0, start, n).copy_(slot(set, k, n, input));
        });
  }

  // Members that disagree on the size would take different numbers of pieces and fall
  // out of step: every member sees the disagreement after the first barrier and stops.
  void check_same_size(std::int64_t mine, const std::string& what) const {
    for (int m = 0; m < size_; ++m)
      if (segment_->announced(m) != mine)
        throw std::runtime_error("shared-memory " + what + ": this member has " + std::to_string(mine) +
                                 " elements, member " + std::to_string(m) + " has " +
                                 std::to_string(segment_->announced(m)) + " (ranks disagree on a tensor's shape)");
  }

  std::unique_ptr<ShmSegment> segment_;
  c10::intrusive_ptr<CommBackend> gloo_;
  std::size_t slot_bytes_;
  std::uint64_t pieces_ = 0;
  std::unique_ptr<ShmMessages> messages_;  // null: this group's messages go through Gloo
};

}  // namespace

c10::intrusive_ptr<CommBackend> with_shared_memory(c10::intrusive_ptr<CommBackend> gloo, c10d::Store& store,
                                                   const std::vector<int>& ranks, int member,
                                                   std::chrono::milliseconds timeout, bool spin, bool messages) {
  const int size = static_cast<int>(ranks.size());
  const std::size_t bytes = kCollectiveBytes + (messages ? ShmMessages::bytes(size) : 0);
  std::unique_ptr<ShmSegment> segment = ShmSegment::open(store, member, ranks, bytes, timeout, spin);
  if (!segment) return gloo;
  return c10::make_intrusive<ShmBackend>(std::move(segment), std::move(gloo), member, size, messages);
}

}  // namespace quintnet::exec
