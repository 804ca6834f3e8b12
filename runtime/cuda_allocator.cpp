// The caching CUDA allocator (see allocator.h). Per device, freed blocks are
// kept in per-size-class free lists and handed out again without a driver
// call. All of a device's work runs on its one stream, so reuse is ordered
// after every earlier use of the block and needs no event. When cuMemAlloc
// runs out, the cache is returned to the driver and the allocation retried.
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/cuda_driver.h"

namespace kiln {
namespace {

struct DeviceCache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;
  AllocatorStats stats;
};

constexpr int kMaxDevices = 64;

DeviceCache& cache(int device) {
  // Never destroyed: storages held by static objects may be freed after main returns.
  static auto* caches = new DeviceCache[kMaxDevices];
  KILN_CHECK(device >= 0 && device < kMaxDevices, "cuda:", device, " is not a valid device index");
  return caches[device];
}

void release_cached(DeviceCache& c, int device) {
  std::unordered_map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.free);
    c.stats.bytes_cached = 0;
  }
  if (blocks.empty()) return;
  // cuMemFree would free a block queued work may still read: wait for the stream first.
  cuda::synchronize(device);
  for (auto& [size, list] : blocks)
    for (void* p : list) cuda::mem_free(p, device);
}

std::string gib(size_t bytes) {
  return std::to_string(static_cast<double>(bytes) / (1024.0 * 1024 * 1024)).substr(0, 5) + " GiB";
}

}  // namespace

void* cuda_alloc(size_t bytes, int device) {
  cuda::require("allocating CUDA memory", device);
  DeviceCache& c = cache(device);
  size_t size = alloc_size_class(bytes == 0 ? 1 : bytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.allocations++;
    auto it = c.free.find(size);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cache_hits++;
      c.stats.bytes_cached -= size;
      c.stats.bytes_in_use += size;
      return p;
    }
  }
  void* p = cuda::mem_alloc(size, device);
  if (!p) {
    release_cached(c, device);
    p = cuda::mem_alloc(size, device);
  }
  if (!p) {
    auto [free, total] = cuda::mem_info(device);
    std::lock_guard<std::mutex> lock(c.mu);
    throw Error("out of memory on cuda:" + std::to_string(device) + ": could not allocate " +
                std::to_string(bytes) + " bytes (" + gib(c.stats.bytes_in_use) +
                " in use by Kiln; the driver reports " + gib(free) + " free of " + gib(total) +
                ")");
  }
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.system_allocs++;
  c.stats.bytes_in_use += size;
  return p;
}

void cuda_free(void* p, size_t bytes, int device) {
  if (!p) return;
  DeviceCache& c = cache(device);
  size_t size = alloc_size_class(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.bytes_in_use -= size;
  c.stats.bytes_cached += size;
  c.free[size].push_back(p);
}

void cuda_empty_cache(int device) {
  if (!cuda::available()) return;
  if (device >= 0) return release_cached(cache(device), device);
  for (int d = 0; d < cuda::device_count() && d < kMaxDevices; ++d) release_cached(cache(d), d);
}

AllocatorStats cuda_allocator_stats(int device) {
  DeviceCache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

}  // namespace kiln
