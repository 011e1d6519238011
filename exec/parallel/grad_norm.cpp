#include "exec/parallel/grad_norm.h"

#include <algorithm>

namespace quintnet::exec {

namespace {

// Elements squared at a time: a 16 MB scratch tensor, whatever the buffer's size.
constexpr std::int64_t kPiece = std::int64_t{1} << 22;

}  // namespace

torch::Tensor sum_of_squares(const torch::Tensor& flat, const std::vector<FlatRange>& ranges) {
  torch::NoGradGuard no_grad;
  torch::Tensor sum = torch::zeros({}, flat.options().dtype(torch::kFloat64));
  for (const FlatRange& r : ranges)
    for (std::int64_t at = r.offset; at < r.offset + r.numel; at += kPiece) {
      const torch::Tensor piece = flat.narrow(0, at, std::min(kPiece, r.offset + r.numel - at));
      sum += piece.square().sum().to(torch::kFloat64);
    }
  return sum;
}

std::vector<FlatRange> intersect(const std::vector<FlatRange>& a, const std::vector<FlatRange>& b) {
  std::vector<FlatRange> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::int64_t begin = std::max(a[i].offset, b[j].offset);
    const std::int64_t end_a = a[i].offset + a[i].numel, end_b = b[j].offset + b[j].numel;
    const std::int64_t end = std::min(end_a, end_b);
    if (begin < end) out.push_back({begin, end - begin});
    (end_a < end_b ? i : j)++;
  }
  return out;
}

}  // namespace quintnet::exec
