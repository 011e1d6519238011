#pragma once
// A CPU allocator for LibTorch that keeps large freed blocks for reuse.
//
// Why: glibc serves every allocation above 32 MiB (and, depending on history, above
// 128 KiB) with a fresh mmap and returns it with munmap, so a tensor that is freed and
// allocated again each microbatch — GPT-2's [tokens, 50,257] logits and their
// gradients, ~100 MB each — costs page faults that zero every page again: measured
// here, a third of a small GPT-2's training step was spent in the kernel doing that.
// A training step allocates the same sizes every time, so blocks of at least 1 MiB are
// kept by exact size and handed out again, up to a cap; smaller ones come from the C
// heap, as LibTorch's own allocator takes them (glibc already reuses those).  The CUDA caching allocator does
// the same on the GPU.
//
// It also counts the bytes of every tensor it hands out (small ones from the C heap, by
// size) and their peak: the trainer's peak memory split (parameters, gradients,
// optimizer state, activations) is measured with it.
#include <cstddef>

namespace quintnet::exec {

// Installs the allocator for all CPU tensors allocated from now on (those allocated
// before keep their own deleter).  At most `cache_cap_bytes` of freed blocks are kept.
void install_caching_cpu_allocator(std::size_t cache_cap_bytes);

// What the installed allocator did so far (all zeros before install).
struct CpuAllocatorStats {
  std::size_t large_allocations = 0, reused = 0, cached_bytes = 0;
  // Bytes of CPU tensors allocated and not freed yet (cached blocks not counted), and
  // the most there were since install or the last reset_cpu_peak_bytes().
  std::size_t live_bytes = 0, peak_live_bytes = 0;
};
CpuAllocatorStats caching_cpu_allocator_stats();
void reset_cpu_peak_bytes();  // the peak starts again from what is live now

}  // namespace quintnet::exec
