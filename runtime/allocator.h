// The caching allocators. CPU: first-touching fresh memory costs ~10 us per
// 4 KiB page here, so freed blocks are kept (bucketed by size) and handed out
// again; blocks of 2 MiB and more ask for transparent huge pages. CUDA
// (cuda_allocator.cpp): cuMemAlloc/cuMemFree synchronize and cost far more
// than small kernels, so device blocks are cached the same way, per device.
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

struct AllocatorStats {
  size_t bytes_in_use = 0;
  size_t bytes_cached = 0;
  size_t allocations = 0;  // calls to cpu_alloc
  size_t cache_hits = 0;   // served from the cache
  size_t system_allocs = 0;
};

/// 64-byte aligned memory; never returns nullptr (throws kiln::Error on exhaustion).
void* cpu_alloc(size_t bytes);
/// Throws kiln::Error ("out of CPU memory: <what> needs N bytes, more than this
/// machine's M bytes of memory and swap") when `bytes` could never be allocated
/// here. cpu_alloc checks every request this way (with overcommit, a larger
/// mapping could succeed and the process die when it is touched); code that
/// sizes host memory by a user's input checks before it allocates.
void check_host_bytes(size_t bytes, const std::string& what);
void cpu_free(void* p, size_t bytes);
/// Returns all cached blocks to the system.
void cpu_empty_cache();
AllocatorStats cpu_allocator_stats();

/// The size a request of `bytes` is rounded up to (64-byte steps up to 1 KiB,
/// then four classes per power of two); blocks are cached per class.
size_t alloc_size_class(size_t bytes);

/// Device memory on CUDA device `device` (256-byte aligned); never returns nullptr
/// (throws kiln::Error when CUDA is unavailable or the device is out of memory).
/// Blocks are reused in the order of the device's one stream, so a block freed
/// while queued work still reads it is safe to hand out again.
void* cuda_alloc(size_t bytes, int device);
void cuda_free(void* p, size_t bytes, int device);
/// Returns the device's cached blocks to the driver (all devices when device < 0).
void cuda_empty_cache(int device = -1);
AllocatorStats cuda_allocator_stats(int device);

}  // namespace kiln
