#include "exec/kernels/blas_threads.h"

#include <dlfcn.h>

namespace quintnet::exec::kernels {
namespace {

// OpenBLAS's extensions to the BLAS interface (cblas.h); looked up, not linked, so the
// build does not depend on which BLAS the machine's libblas.so.3 is.
struct OpenBlas {
  using SetThreads = void (*)(int);
  using GetInt = int (*)();
  using GetString = char* (*)();
  SetThreads set_num_threads = nullptr;
  GetInt get_num_threads = nullptr;
  GetInt get_parallel = nullptr;  // 0: sequential, 1: pthreads pool, 2: OpenMP
  GetString get_config = nullptr;
};

// A symbol of the loaded BLAS: in the global scope where an executable links LibTorch; by
// the library's name where LibTorch came in through dlopen (a Python module), whose
// dependencies stay out of that scope. RTLD_NOLOAD: never loads a BLAS of its own.
void* blas_symbol(const char* name) {
  if (void* found = dlsym(RTLD_DEFAULT, name)) return found;
  for (const char* library : {"libblas.so.3", "libopenblas.so.0"}) {
    void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    void* found = dlsym(handle, name);
    dlclose(handle);  // drops the reference dlopen added; the library stays loaded
    if (found) return found;
  }
  return nullptr;
}

const OpenBlas& openblas() {
  static const OpenBlas found = [] {
    OpenBlas o;
    o.set_num_threads = reinterpret_cast<OpenBlas::SetThreads>(blas_symbol("openblas_set_num_threads"));
    o.get_num_threads = reinterpret_cast<OpenBlas::GetInt>(blas_symbol("openblas_get_num_threads"));
    o.get_parallel = reinterpret_cast<OpenBlas::GetInt>(blas_symbol("openblas_get_parallel"));
    o.get_config = reinterpret_cast<OpenBlas::GetString>(blas_symbol("openblas_get_config"));
    return o;
  }();
  return found;
}

bool has_own_pool(const OpenBlas& o) {
  return o.set_num_threads && o.get_num_threads && o.get_parallel && o.get_parallel() == 1;
}

}  // namespace

std::string blas_description() {
  const OpenBlas& o = openblas();
  if (!o.get_parallel) return "no OpenBLAS";
  // The config string starts "OpenBLAS 0.3.21 ..." followed by build options.
  std::string name = o.get_config ? o.get_config() : "OpenBLAS";
  std::size_t end = name.find(' ', name.find(' ') + 1);
  if (end != std::string::npos) name.resize(end);
  const int parallel = o.get_parallel();
  return name + (parallel == 1 ? " (pthreads pool)" : parallel == 2 ? " (OpenMP)" : " (sequential)");
}

bool set_blas_threads(int threads) {
  const OpenBlas& o = openblas();
  if (!has_own_pool(o)) return false;
  o.set_num_threads(threads < 1 ? 1 : threads);
  return true;
}

int blas_threads() {
  const OpenBlas& o = openblas();
  return has_own_pool(o) ? o.get_num_threads() : 0;
}

}  // namespace quintnet::exec::kernels
