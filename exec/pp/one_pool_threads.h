#pragma once
// OnePoolThreads — a rank computing one microbatch at a time on several threads, where the
// BLAS has a thread pool of its own (a pthreads OpenBLAS, exec/kernels/blas_threads.h).
//
// Why: LibTorch's OpenMP threads spin after each parallel region and the BLAS pool's
// threads after each product; two pools of the rank's size on the same cores fight for
// them. Measured on 2 vCPUs (docs/PERFORMANCE.md, "The BLAS pool"), one microbatch at a
// time at two threads: the ViT at 139 samples/s with both pools at two threads, 437 with
// the BLAS pool at one, 701 with the BLAS pool at two and LibTorch's OpenMP at one; GPT-2
// 23.8, 52.7 and 64.3. So the pool keeps the rank's threads for the matrix products — most
// of a step's arithmetic — and LibTorch's other ops run on the calling thread while this
// object lives. Where the BLAS follows OpenMP (MKL, OpenBLAS's OpenMP build) or one thread
// was asked for, nothing changes. Microbatches side by side hold the pool to one thread
// instead (exec/pp/microbatch_threads.h).
namespace quintnet::exec {

class OnePoolThreads {
 public:
  OnePoolThreads();
  ~OnePoolThreads();
  OnePoolThreads(const OnePoolThreads&) = delete;
  OnePoolThreads& operator=(const OnePoolThreads&) = delete;

 private:
  int libtorch_threads_ = 0;  // LibTorch's count before (0: left as it was)
};

}  // namespace quintnet::exec
