#include "exec/dp/grad_buckets.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace quintnet::exec {
namespace {

struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(GradBuckets* owner, int index) : owner(owner), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    owner->mark_ready(index);
    return outputs;
  }
  GradBuckets* owner;
  int index;
};

}  // namespace

GradBuckets::GradBuckets(std::vector<torch::Tensor> params, Communicator& comm, Group& dp, double bucket_mb)
    : params_(std::move(params)), comm_(comm), dp_(dp) {
  const auto cap = static_cast<std::int64_t>(bucket_mb * 1024 * 1024);
  bucket_of_.assign(params_.size(), -1);
  std::int64_t bytes = 0;
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    if (!params_[i].requires_grad()) continue;
    const std::int64_t b = params_[i].numel() * params_[i].element_size();
    if (buckets_.empty() || (bytes + b > cap && !buckets_.back().params.empty())) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(i);
    bucket_of_[i] = static_cast<int>(buckets_.size()) - 1;
    bytes += b;
  }
  if (dp_.size() == 1) return;  // nothing to average: no hooks
  for (size_t i = 0; i < params_.size(); ++i) {
    if (bucket_of_[i] < 0) continue;
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<ReadyHook>(this, static_cast<int>(i))));
    accumulators_.push_back(std::move(acc));
  }
}

GradBuckets::~GradBuckets() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void GradBuckets::sync_next_backward(bool sync) { sync_ = sync; }

void GradBuckets::mark_ready(int param_index) {
  if (!sync_) return;
  const int b = bucket_of_[param_index];
  Bucket& bucket = buckets_[b];
  if (++bucket.ready == static_cast<int>(bucket.params.size())) launch(b);
}

void GradBuckets::launch(int b) {
  Bucket& bucket = buckets_[b];
  std::vector<torch::Tensor> grads;
  for (int i : bucket.params) {
    torch::Tensor& p = params_[i];
    grads.push_back(p.grad().defined() ? p.grad().reshape(-1) : torch::zeros({p.numel()}, p.options()));
  }
  bucket.flat = torch::cat(grads).div_(dp_.size());
  launches_.push_back({b, bucket.flat.numel() * bucket.flat.element_size(), std::chrono::steady_clock::now(), {}});
  bucket.work = comm_.all_reduce_sum_async(dp_, bucket.flat);
  bucket.launched = true;
}

void GradBuckets::finish() {
  if (dp_.size() == 1) return;
  for (int b = 0; b < num_buckets(); ++b)
    if (!buckets_[b].launched) launch(b);
  torch::NoGradGuard no_grad;
  for (auto& launch : launches_) {
    Bucket& bucket = buckets_[launch.bucket];
    comm_.wait(*bucket.work, "data-parallel gradient all-reduce (bucket " + std::to_string(launch.bucket) + ")");
    launch.end = std::chrono::steady_clock::now();
    std::int64_t offset = 0;
    for (int i : bucket.params) {
      torch::Tensor& p = params_[i];
      torch::Tensor avg = bucket.flat.narrow(0, offset, p.numel()).view_as(p);
      if (p.grad().defined())
        p.mutable_grad().copy_(avg);
      else
        p.mutable_grad() = avg.clone();
      offset += p.numel();
    }
  }
  finished_ = std::move(launches_);
  launches_.clear();
  for (auto& bucket : buckets_) bucket.ready = 0, bucket.launched = false, bucket.work.reset();
}

}  // namespace quintnet::exec
