#include "exec/dp/zero_shards.h"

#include <algorithm>

namespace quintnet::exec {

ZeroShards::ZeroShards(std::vector<Range> buckets, Communicator& comm, Group& dp)
    : buckets_(std::move(buckets)), comm_(comm), dp_(dp) {
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    piece_size_.push_back((buckets_[b].numel + dp_.size() - 1) / dp_.size());
    padded_ += piece_size_.back();
    numel_ += piece(b, dp_.rank).numel;
  }
}

ZeroShards::Range ZeroShards::piece(std::size_t b, int dp_rank) const {
  const std::int64_t start = std::min(buckets_[b].numel, dp_rank * piece_size_[b]);
  const std::int64_t end = std::min(buckets_[b].numel, start + piece_size_[b]);
  return {buckets_[b].offset + start, end - start};
}

torch::Tensor ZeroShards::take(const torch::Tensor& flat) const {
  std::vector<torch::Tensor> pieces;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Range r = piece(b, dp_.rank);
    pieces.push_back(flat.narrow(0, r.offset, r.numel));
  }
  return torch::cat(pieces);
}

std::vector<ZeroShards::Range> ZeroShards::pieces() const {
  std::vector<Range> mine;
  for (std::size_t b = 0; b < buckets_.size(); ++b) mine.push_back(piece(b, dp_.rank));
  return mine;
}

void ZeroShards::gather_into(const torch::Tensor& shard, torch::Tensor& out) const {
  torch::NoGradGuard no_grad;
  // Every rank sends the same number of elements: its pieces, each padded to the piece size.
  torch::Tensor mine = torch::zeros({padded_}, shard.options());
  std::int64_t from = 0, to = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::int64_t n = piece(b, dp_.rank).numel;
    mine.narrow(0, to, n).copy_(shard.narrow(0, from, n));
    from += n;
    to += piece_size_[b];
  }
  const torch::Tensor all = comm_.all_gather(dp_, mine, 0);  // [dp · padded], in dp order
  for (int r = 0; r < dp_.size(); ++r) {
    std::int64_t at = r * padded_;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const Range p = piece(b, r);
      out.narrow(0, p.offset, p.numel).copy_(all.narrow(0, at, p.numel));
      at += piece_size_[b];
    }
  }
}

}  // namespace quintnet::exec
