#include "exec/train/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace quintnet::exec {
namespace {

constexpr std::size_t kMinCached = std::size_t{1} << 20;  // smaller blocks: the C heap
constexpr std::size_t kAlignment = 64;                    // as LibTorch's (AVX-512 loads)

class CachingCpuAllocator final : public c10::Allocator {
 public:
  CachingCpuAllocator(c10::Allocator* fallback, std::size_t cap) : fallback_(fallback), cap_(cap) {}

  // LibTorch 2.3 made allocate() non-const (1.13's is const); both call allocate_block.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(std::size_t n) override { return allocate_block(n); }
#else
  c10::DataPtr allocate(std::size_t n) const override { return allocate_block(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // LibTorch 2.x asks allocators to copy their own blocks; 1.13 does not (no override).
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }

  CpuAllocatorStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() const {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_live_bytes = stats_.live_bytes;
  }

 private:
  c10::DataPtr allocate_block(std::size_t n) const {
    if (n == 0) return fallback_->allocate(0);
    void* p = n >= kMinCached ? take(n) : nullptr;
    if (!p && posix_memalign(&p, kAlignment, n) != 0) throw std::bad_alloc();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[p] = n;
      stats_.live_bytes += n;
      stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
    }
    // The context is the data pointer, as raw_allocate (oneDNN's path) requires.
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  void* take(std::size_t n) const {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.large_allocations;
    auto it = free_.find(n);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    stats_.cached_bytes -= n;
    ++stats_.reused;
    return p;
  }

  static void release(void* ptr);
  // A large block goes to the cache (or back to the system over the cap), a small one
  // back to the C heap; a pointer it does not know came from the fallback.
  void give_back(void* ptr) const {
    std::size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(ptr);
      if (it != live_.end()) {
        size = it->second;
        live_.erase(it);
        stats_.live_bytes -= size;
        if (size >= kMinCached && stats_.cached_bytes + size <= cap_) {
          free_.emplace(size, ptr);
          stats_.cached_bytes += size;
          return;
        }
      }
    }
    if (size > 0)
      std::free(ptr);
    else
      fallback_->raw_deleter()(ptr);
  }

  c10::Allocator* fallback_;
  std::size_t cap_;
  mutable std::mutex mutex_;
  mutable std::multimap<std::size_t, void*> free_;      // cached: size -> block
  mutable std::unordered_map<void*, std::size_t> live_;  // handed out: block -> size (every size)
  mutable CpuAllocatorStats stats_;
};

CachingCpuAllocator* installed = nullptr;

void CachingCpuAllocator::release(void* ptr) { installed->give_back(ptr); }

}  // namespace

void install_caching_cpu_allocator(std::size_t cache_cap_bytes) {
  if (installed) return;
  // Never destroyed: tensors freed during exit still return their blocks to it.
  installed = new CachingCpuAllocator(c10::GetDefaultCPUAllocator(), cache_cap_bytes);
  c10::SetCPUAllocator(installed, /*priority=*/1);
}

CpuAllocatorStats caching_cpu_allocator_stats() { return installed ? installed->stats() : CpuAllocatorStats{}; }

void reset_cpu_peak_bytes() {
  if (installed) installed->reset_peak();
}

}  // namespace quintnet::exec
