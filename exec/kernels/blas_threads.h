#pragma once
// The BLAS library's own thread pool, held to the thread count LibTorch computes with.
//
// Why: Debian's libtorch calls the generic libblas.so.3, and where libopenblas-dev is
// installed (python3-matplotlib pulls it in through scipy) that is OpenBLAS's pthreads
// build, whose pool has as many threads as cores and does not hear
// torch::set_num_threads (which reaches OpenMP only). A "one-thread" run then multiplies
// on every core, and two microbatch threads (or two ranks on a machine) each start a
// pool of their own: measured on a 2-vCPU machine, the serial ViT at --threads 2 ran at
// 0.28-0.45x its rate with the pool held to one thread (docs/PERFORMANCE.md). OpenBLAS's
// OpenMP build follows each thread's OpenMP count, which LibTorch already sets; other
// BLAS libraries (MKL in PyTorch's wheels) likewise: nothing to hold there.
//
// No LibTorch here: the BLAS is found among the process's loaded symbols.
#include <string>

namespace quintnet::exec::kernels {

// The loaded BLAS as a person reads it, e.g. "OpenBLAS 0.3.21 (pthreads pool)", or
// "no OpenBLAS" where the symbols are absent.
std::string blas_description();

// Holds a pthreads OpenBLAS pool to `threads` (process-wide) and returns true; returns
// false, changing nothing, where the BLAS has no pool of its own.
bool set_blas_threads(int threads);

// The pool's thread count, or 0 where the BLAS has no pool of its own.
int blas_threads();

}  // namespace quintnet::exec::kernels
