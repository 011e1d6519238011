#include "exec/pp/one_pool_threads.h"

#include <ATen/Parallel.h>

#include "exec/kernels/blas_threads.h"

namespace quintnet::exec {

OnePoolThreads::OnePoolThreads() {
  const int threads = at::get_num_threads();
  if (threads < 2 || kernels::blas_threads() == 0) return;
  kernels::set_blas_threads(threads);
  at::set_num_threads(1);
  libtorch_threads_ = threads;
}

OnePoolThreads::~OnePoolThreads() {
  if (libtorch_threads_ > 0) at::set_num_threads(libtorch_threads_);
}

}  // namespace quintnet::exec
