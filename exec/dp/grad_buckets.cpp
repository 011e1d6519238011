#include "exec/dp/grad_buckets.h"

#include "exec/dp/zero_shards.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace quintnet::exec {
namespace {

struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(GradBuckets* owner, int slot) : owner(owner), slot(slot) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    owner->mark_ready(slot);
    return outputs;
  }
  GradBuckets* owner;
  int slot;
};

}  // namespace

GradBuckets::GradBuckets(FlatParameters& flat, Communicator& comm, Group& dp, double bucket_mb)
    : flat_(flat), comm_(comm), dp_(dp) {
  const auto cap = static_cast<std::int64_t>(bucket_mb * 1024 * 1024);
  const auto& slots = flat.slots();
  const int64_t elem = flat.grads().element_size();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (buckets_.empty() || (buckets_.back().numel + slots[i].numel) * elem > cap) {
      buckets_.emplace_back();
      buckets_.back().offset = slots[i].offset;
    }
    buckets_.back().numel += slots[i].numel;
    ++buckets_.back().slots;
    bucket_of_.push_back(static_cast<int>(buckets_.size()) - 1);
  }
  for (auto& b : buckets_) b.view = flat.grads().narrow(0, b.offset, b.numel);
  if (dp_.size() == 1) return;  // nothing to average: no hooks
  for (size_t i = 0; i < slots.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(slots[i].param);
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<ReadyHook>(this, static_cast<int>(i))));
    accumulators_.push_back(std::move(acc));
  }
}

GradBuckets::~GradBuckets() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

std::vector<GradBuckets::Range> GradBuckets::ranges() const {
  std::vector<Range> out;
  for (const Bucket& b : buckets_) out.push_back({b.offset, b.numel});
  return out;
}

void GradBuckets::sync_next_backward(bool sync) { sync_ = sync; }

void GradBuckets::reduce_scatter_to(std::shared_ptr<const ZeroShards> shards, const std::vector<torch::Tensor>& whole) {
  shards_ = std::move(shards);
  for (Bucket& b : buckets_) b.scatter = true;
  const auto& slots = flat_.slots();
  for (size_t i = 0; i < slots.size(); ++i)
    for (const torch::Tensor& w : whole)
      if (slots[i].param.is_same(w)) buckets_[bucket_of_[i]].scatter = false;
}

void GradBuckets::mark_ready(int slot) {
  if (!sync_) return;
  const int b = bucket_of_[slot];
  if (++buckets_[b].ready == buckets_[b].slots) launch(b);
}

void GradBuckets::launch(int b) {
  Bucket& bucket = buckets_[b];
  torch::NoGradGuard no_grad;
  bucket.view.div_(dp_.size());
  launches_.push_back({b, bucket.numel * bucket.view.element_size(), std::chrono::steady_clock::now(), {}});
  if (bucket.scatter) {
    const std::int64_t part = shards_->piece_size(b), padding = part * dp_.size() - bucket.numel;
    bucket.send = padding == 0 ? bucket.view : torch::cat({bucket.view, torch::zeros({padding}, bucket.view.options())});
    bucket.piece = torch::empty({part}, bucket.view.options());
    bucket.work = comm_.reduce_scatter_sum_async(dp_, bucket.send, bucket.piece);
  } else {
    bucket.work = comm_.all_reduce_sum_async(dp_, bucket.view);
  }
  bucket.launched = true;
}

void GradBuckets::finish() {
  if (dp_.size() == 1) return;
  for (int b = 0; b < num_buckets(); ++b)
    if (!buckets_[b].launched) launch(b);
  torch::NoGradGuard no_grad;
  for (auto& launch : launches_) {
    Bucket& bucket = buckets_[launch.bucket];
    comm_.wait(*bucket.work, std::string("data-parallel gradient ") + (bucket.scatter ? "reduce-scatter" : "all-reduce") +
                                 " (bucket " + std::to_string(launch.bucket) + ")");
    if (bucket.scatter) {  // this rank's averaged piece back into the gradient buffer
      const auto r = shards_->piece(launch.bucket, dp_.rank);
      flat_.grads().narrow(0, r.offset, r.numel).copy_(bucket.piece.narrow(0, 0, r.numel));
    }
    launch.end = std::chrono::steady_clock::now();
  }
  finished_ = std::move(launches_);
  launches_.clear();
  for (auto& bucket : buckets_)
    bucket.ready = 0, bucket.launched = false, bucket.work.reset(), bucket.send.reset(), bucket.piece.reset();
}

}  // namespace quintnet::exec
