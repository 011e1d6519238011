#include "exec/pp/microbatch_threads.h"

#include <ATen/Parallel.h>

#include "exec/kernels/blas_threads.h"

namespace quintnet::exec {

MicrobatchThreads::MicrobatchThreads(int threads, int intra_op_threads) : errors_(threads) {
  // The caller's own count is settled first: LibTorch sets a thread's count lazily from
  // a process-wide value, which the workers below change.
  const int caller_threads = at::get_num_threads();
  pending_ = threads;
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i, intra_op_threads] { work(i, intra_op_threads); });
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });  // every worker has set its count
  }
  at::set_num_threads(caller_threads);  // the process-wide value back to the caller's
  // A pthreads OpenBLAS has one pool for the process: held to one thread while the workers
  // compute side by side, so each worker's products run on the worker itself (two callers
  // of a larger pool wait on each other, and its threads fight the workers' for the cores).
  caller_blas_threads_ = kernels::blas_threads();
  kernels::set_blas_threads(1);
}

MicrobatchThreads::~MicrobatchThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  if (caller_blas_threads_ > 0) kernels::set_blas_threads(caller_blas_threads_);
}

void MicrobatchThreads::run(int n, const std::function<void(int)>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    jobs_ = std::min(n, size());
    pending_ = jobs_;
    ++round_;
  }
  wake_.notify_all();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  for (int i = 0; i < jobs_; ++i)
    if (errors_[i]) {
      std::exception_ptr e = errors_[i];
      for (auto& error : errors_) error = nullptr;
      std::rethrow_exception(e);
    }
}

void MicrobatchThreads::work(int index, int intra_op_threads) {
  long seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);  // one worker at a time: setting the count clears shared caches
  at::get_num_threads();                      // LibTorch's lazy per-thread set-up, before ours
  at::set_num_threads(intra_op_threads);
  if (--pending_ == 0) done_.notify_one();
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || round_ != seen; });
    if (stopping_) return;
    seen = round_;
    if (index >= jobs_) continue;
    const std::function<void(int)>& job = *job_;
    lock.unlock();
    try {
      job(index);
    } catch (...) {
      errors_[index] = std::current_exception();
    }
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace quintnet::exec
