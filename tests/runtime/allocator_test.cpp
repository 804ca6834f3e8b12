// The caching CPU allocator and Storage.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/storage.h"

using namespace kiln;

TEST_CASE("cpu_alloc is 64-byte aligned for every size") {
  for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(1000),
                       size_t(4097), size_t(100000), size_t(3) << 20}) {
    CAPTURE(bytes);
    void* p = cpu_alloc(bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    if (bytes >= (size_t(2) << 20)) CHECK(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20) == 0);
    if (bytes) static_cast<char*>(p)[bytes - 1] = 1;  // the whole block is usable
    cpu_free(p, bytes);
  }
}

TEST_CASE("freed blocks are reused from the cache") {
  for (size_t bytes : {size_t(100), size_t(5000), size_t(1) << 20, size_t(16) << 20}) {
    CAPTURE(bytes);
    void* p = cpu_alloc(bytes);
    cpu_free(p, bytes);
    AllocatorStats before = cpu_allocator_stats();
    void* q = cpu_alloc(bytes);
    AllocatorStats after = cpu_allocator_stats();
    CHECK(q == p);
    CHECK(after.cache_hits == before.cache_hits + 1);
    CHECK(after.system_allocs == before.system_allocs);
    CHECK(after.allocations == before.allocations + 1);
    CHECK(after.bytes_in_use >= before.bytes_in_use + bytes);
    cpu_free(q, bytes);
  }
}

TEST_CASE("sizes in one class share blocks; empty_cache returns them") {
  void* p = cpu_alloc(4000);
  cpu_free(p, 4000);
  void* q = cpu_alloc(3900);  // rounds to the same class
  CHECK(q == p);
  cpu_free(q, 3900);
  cpu_empty_cache();
  CHECK(cpu_allocator_stats().bytes_cached == 0);
  AllocatorStats before = cpu_allocator_stats();
  void* r = cpu_alloc(4000);
  CHECK(cpu_allocator_stats().system_allocs == before.system_allocs + 1);
  cpu_free(r, 4000);
}

TEST_CASE("bytes_in_use tracks live blocks") {
  AllocatorStats s0 = cpu_allocator_stats();
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(cpu_alloc(1 << 12));
  CHECK(cpu_allocator_stats().bytes_in_use == s0.bytes_in_use + 10 * (1 << 12));
  for (void* p : blocks) cpu_free(p, 1 << 12);
  CHECK(cpu_allocator_stats().bytes_in_use == s0.bytes_in_use);
}

TEST_CASE("Storage allocates on the CPU, refuses CUDA without a driver, wraps foreign memory") {
  auto s = Storage::allocate(1024);
  CHECK(s->bytes() == 1024);
  CHECK(s->device().is_cpu());
  CHECK(reinterpret_cast<uintptr_t>(s->data()) % 64 == 0);
  if (!cuda::available()) CHECK_THROWS_AS(Storage::allocate(16, Device(kCUDA)), Error);

  int deleted = 0;
  float buf[4] = {1, 2, 3, 4};
  {
    auto w = Storage::wrap(buf, sizeof(buf), Device{}, [&](void* p) {
      CHECK(p == buf);
      ++deleted;
    });
    CHECK(w->data() == buf);
  }
  CHECK(deleted == 1);
  { auto w = Storage::wrap(buf, sizeof(buf), Device{}); }  // not ours: nothing freed
  CHECK(buf[3] == 4);
}

TEST_CASE("impossible sizes are an out-of-memory error, never a wrapped small block") {
  for (size_t bytes : {SIZE_MAX, SIZE_MAX - 100, size_t(1) << 60, size_t(1) << 50}) {
    CAPTURE(bytes);
    CHECK_THROWS_WITH_AS(cpu_alloc(bytes), doctest::Contains("out of CPU memory"), Error);
  }
  CHECK(cpu_allocator_stats().bytes_in_use < (size_t(1) << 40));
}
