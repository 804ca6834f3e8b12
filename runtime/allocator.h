// The caching CPU allocator. First-touching fresh memory costs ~10 us per
// 4 KiB page here, so freed blocks are kept (bucketed by size) and handed out
// again; blocks of 2 MiB and more ask for transparent huge pages.
#pragma once

#include <cstddef>

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
void cpu_free(void* p, size_t bytes);
/// Returns all cached blocks to the system.
void cpu_empty_cache();
AllocatorStats cpu_allocator_stats();

}  // namespace kiln
