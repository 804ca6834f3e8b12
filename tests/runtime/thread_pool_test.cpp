// parallel_for: coverage, grain, exceptions, nesting, concurrent callers.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/thread_pool.h"

using namespace kiln;

namespace {

// The chunks one call hands out, sorted.
std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t grain) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

}  // namespace

TEST_CASE("num_threads is at least one") {
  CHECK(num_threads() >= 1);
}

TEST_CASE("chunks cover [0, n) exactly once and respect the grain") {
  for (auto [n, grain] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1, 1}, {10, 3}, {1000, 1}, {1000, 999}, {1 << 20, 1 << 16}, {12345, 100}}) {
    CAPTURE(n);
    CAPTURE(grain);
    auto chunks = chunks_of(n, grain);
    int64_t next = 0;
    for (auto [b, e] : chunks) {
      CHECK(b == next);
      CHECK(e > b);
      if (chunks.size() > 1) CHECK(e - b >= grain);
      next = e;
    }
    CHECK(next == n);
  }
}

TEST_CASE("a sum over chunks equals the closed form") {
  const int64_t n = 10'000'000;
  std::atomic<int64_t> total{0};
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    int64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += i;
    total += s;
  });
  CHECK(total.load() == n * (n - 1) / 2);
}

TEST_CASE("an exception in a chunk reaches the caller; the pool keeps working") {
  CHECK_THROWS_AS(parallel_for(1 << 20, 1 << 10,
                               [](int64_t b, int64_t e) {
                                 if (b <= 777777 && 777777 < e) throw std::runtime_error("boom");
                               }),
                  std::runtime_error);
  std::atomic<int64_t> count{0};
  parallel_for(1 << 20, 1 << 10, [&](int64_t b, int64_t e) { count += e - b; });
  CHECK(count.load() == 1 << 20);
}

TEST_CASE("nested parallel_for runs inline and still covers everything") {
  std::atomic<int64_t> total{0};
  parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      parallel_for(1000, 10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  CHECK(total.load() == 64 * 1000);
}

TEST_CASE("many short jobs in a row and from several threads") {
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 20000; ++rep)
    parallel_for(64, 8, [&](int64_t b, int64_t e) { total += e - b; });
  CHECK(total.load() == 20000 * 64);

  std::atomic<int64_t> shared{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 2000; ++rep)
        parallel_for(1000, 10, [&](int64_t b, int64_t e) { shared += e - b; });
    });
  for (auto& t : callers) t.join();
  CHECK(shared.load() == 3 * 2000 * 1000);
}

TEST_CASE("workers that went to sleep wake for the next job") {
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 30; ++rep) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // past the spin window
    parallel_for(1 << 12, 1 << 8, [&](int64_t b, int64_t e) { total += e - b; });
  }
  CHECK(total.load() == 30 * (1 << 12));
}

TEST_CASE("set_num_threads changes the pool size") {
  const int before = num_threads();
  set_num_threads(1);
  CHECK(num_threads() == 1);
  CHECK(chunks_of(1 << 20, 1).size() == 1);
  set_num_threads(3);
  CHECK(num_threads() == 3);
  std::atomic<int64_t> count{0};
  parallel_for(1 << 20, 1 << 10, [&](int64_t b, int64_t e) { count += e - b; });
  CHECK(count.load() == 1 << 20);
  set_num_threads(before);
  CHECK(num_threads() == before);
}
