// The caching CPU allocator. Requests are rounded up to a size class (64-byte
// steps up to 1 KiB, then four classes per power of two); freed blocks are kept
// in a per-class free list and handed out again, because first-touching fresh
// memory costs far more than the kernels that use it. Blocks of 2 MiB and more
// come from mmap, 2 MiB aligned, with MADV_HUGEPAGE. The cache is capped
// (KILN_CPU_CACHE_MB, default 2048); past the cap freed blocks go back to the system.
#include "runtime/allocator.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "runtime/env.h"

namespace kiln {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kMaxBytes = size_t(1) << 56;

}  // namespace

size_t alloc_size_class(size_t bytes) {
  if (bytes <= 1024) return bytes <= kAlign ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  size_t p = std::bit_floor(bytes - 1);  // bytes in (p, 2p]
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

namespace {

// The machine's memory and swap, read once.
size_t machine_bytes() {
  static const size_t bytes = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return kMaxBytes;
    return static_cast<size_t>(si.totalram + si.totalswap) * si.mem_unit;
  }();
  return bytes;
}

size_t cache_limit_from_env() {
  // Up to 2^36 MiB (2^56 bytes, kMaxBytes): the shift cannot wrap.
  return static_cast<size_t>(env::integer("KILN_CPU_CACHE_MB", 0, int64_t(1) << 36, 2048)) << 20;
}

void* system_alloc(size_t size) {
  if (size < kHugePage) return std::aligned_alloc(kAlign, size);
  // Over-map by one huge page, then trim head and tail so the block starts on a
  // 2 MiB boundary and the kernel can back it with huge pages.
  size_t len = size + kHugePage;
  void* raw = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > base) munmap(raw, aligned - base);
  uintptr_t tail = aligned + size;
  if (base + len > tail) munmap(reinterpret_cast<void*>(tail), base + len - tail);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

void system_free(void* p, size_t size) {
  if (size < kHugePage) {
    std::free(p);
  } else {
    munmap(p, size);
  }
}

}  // namespace

void check_host_bytes(size_t bytes, const std::string& what) {
  // Beyond 2^56 is beyond any machine (and keeps the size-class arithmetic exact).
  KILN_CHECK(bytes <= kMaxBytes && bytes <= machine_bytes(), "out of CPU memory: ", what, " needs ",
             bytes, " bytes, more than this machine's ", machine_bytes(), " bytes of memory and swap");
}

namespace {

class CachingAllocator {
 public:
  void* alloc(size_t bytes) {
    // KILN_CPU_CACHE_MB is read at the first allocation: a bad value is an error
    // there (at each allocation until it is fixed), never in a free.
    std::call_once(limit_once_, [this] { limit_.store(cache_limit_from_env()); });
    check_host_bytes(bytes, "a tensor");
    size_t size = alloc_size_class(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.allocations++;
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats_.cache_hits++;
        stats_.bytes_cached -= size;
        stats_.bytes_in_use += size;
        return p;
      }
    }
    void* p = system_alloc(size);
    if (!p) {
      empty_cache();
      p = system_alloc(size);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!p) {
      KILN_CHECK(false, "out of CPU memory: could not allocate ", bytes, " bytes (",
                 stats_.bytes_in_use, " bytes in use by Kiln)");
    }
    stats_.system_allocs++;
    stats_.bytes_in_use += size;
    return p;
  }

  void free(void* p, size_t bytes) {
    if (!p) return;
    size_t size = alloc_size_class(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= size;
      if (stats_.bytes_cached + size <= limit_.load(std::memory_order_relaxed)) {
        free_[size].push_back(p);
        stats_.bytes_cached += size;
        return;
      }
    }
    system_free(p, size);
  }

  void empty_cache() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      stats_.bytes_cached = 0;
    }
    for (auto& [size, list] : blocks)
      for (void* p : list) system_free(p, size);
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
  std::once_flag limit_once_;
  std::atomic<size_t> limit_{0};
};

// Never destroyed: storages held by static objects may be freed after main returns.
CachingAllocator& allocator() {
  static auto* a = new CachingAllocator();
  return *a;
}

}  // namespace

void* cpu_alloc(size_t bytes) {
  return allocator().alloc(bytes);
}
void cpu_free(void* p, size_t bytes) {
  allocator().free(p, bytes);
}
void cpu_empty_cache() {
  allocator().empty_cache();
}
AllocatorStats cpu_allocator_stats() {
  return allocator().stats();
}

}  // namespace kiln
