#include "exec/data/batch_sampler.h"

#include <numeric>
#include <random>

namespace quintnet::exec {

BatchSampler::BatchSampler(int64_t dataset_size, int64_t global_batch, std::uint64_t seed, bool shuffle)
    : dataset_size_(dataset_size), global_batch_(global_batch), seed_(seed), shuffle_(shuffle) {}

const std::vector<int64_t>& BatchSampler::order(int epoch) const {
  if (epoch != cached_epoch_) {
    order_.resize(static_cast<size_t>(dataset_size_));
    std::iota(order_.begin(), order_.end(), 0);
    if (shuffle_) {
      // Fisher-Yates with our own generator: the same order on every platform.
      std::mt19937_64 rng(seed_ * 1000003ULL + static_cast<std::uint64_t>(epoch));
      for (int64_t i = dataset_size_ - 1; i > 0; --i) {
        const auto j = static_cast<int64_t>(rng() % static_cast<std::uint64_t>(i + 1));
        std::swap(order_[i], order_[j]);
      }
    }
    cached_epoch_ = epoch;
  }
  return order_;
}

std::vector<int64_t> BatchSampler::global_batch(int epoch, int64_t batch) const {
  const auto& o = order(epoch);
  return {o.begin() + batch * global_batch_, o.begin() + (batch + 1) * global_batch_};
}

std::vector<int64_t> BatchSampler::microbatch(int epoch, int64_t batch, int dp_rank, int dp, int mb,
                                              int microbatches) const {
  const auto& o = order(epoch);
  const int64_t shard = global_batch_ / dp, micro = shard / microbatches;
  const int64_t start = batch * global_batch_ + dp_rank * shard + mb * micro;
  return {o.begin() + start, o.begin() + start + micro};
}

}  // namespace quintnet::exec
