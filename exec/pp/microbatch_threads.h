#pragma once
// MicrobatchThreads — a one-rank run computes several microbatches of a step at once.
//
// Why: the ViT's matrices (and a small GPT-2's) are too small for LibTorch to split one
// product between two threads with profit: plain PyTorch gains nothing from a second
// intra-op thread on the ViT, and libgomp's barriers eat what it would (measured,
// docs/PERFORMANCE.md).  The microbatches of a step are independent until their
// gradients are summed, so a rank with T threads computes T microbatches side by side,
// each on its own thread with one intra-op thread, and the runner adds their gradients
// in microbatch order: the same sum, bit for bit, as the sequential loop at one thread.
//
// The threads live as long as the pool: LibTorch's thread count is set once per thread
// (setting it also clears oneDNN's primitive cache, which must not happen while
// another thread computes). A pthreads OpenBLAS's one pool is held to one thread
// meanwhile: each worker's products run on the worker (exec/kernels/blas_threads.h).
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace quintnet::exec {

class MicrobatchThreads {
 public:
  // `threads` workers, each with `intra_op_threads` LibTorch (OpenMP, BLAS) threads.
  // The calling thread keeps its own count.
  MicrobatchThreads(int threads, int intra_op_threads);
  ~MicrobatchThreads();
  MicrobatchThreads(const MicrobatchThreads&) = delete;
  MicrobatchThreads& operator=(const MicrobatchThreads&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }

  // Runs job(i) on worker i for i in [0, n), n ≤ size(), and returns when all are done;
  // an exception from a job is rethrown here (the lowest i's).
  void run(int n, const std::function<void(int)>& job);

 private:
  void work(int index, int intra_op_threads);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int jobs_ = 0;         // workers [0, jobs_) take part in the current round
  int pending_ = 0;      // of those, still working (or, at start-up: not yet ready)
  long round_ = 0;       // bumped for each run(): a worker wakes once per round
  bool stopping_ = false;
  int caller_blas_threads_ = 0;  // the BLAS pool's size before (0: no pool of its own)
  std::vector<std::exception_ptr> errors_;
};

}  // namespace quintnet::exec
