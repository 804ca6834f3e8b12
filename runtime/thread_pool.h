// A fork/join thread pool. Workers spin briefly before sleeping, because waking
// a sleeping thread costs ~80 us here and most parallel regions are short.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace kiln {

/// The most threads the pool runs (KILN_NUM_THREADS and set_num_threads refuse more).
inline constexpr int kMaxThreads = 1024;

/// Number of threads parallel_for uses (KILN_NUM_THREADS, default: hardware
/// cores). Where the system refuses to start that many, the pool runs with the
/// ones it started and says so once on stderr.
int num_threads();
/// Sets the number of threads, 1 to kMaxThreads (else a kiln::Error).
void set_num_threads(int n);

/// Calls f(begin, end) over disjoint chunks covering [0, n), on up to num_threads()
/// threads, each chunk at least `grain` long; runs inline when n <= grain or when
/// already inside a parallel region. Returns when all chunks are done. An exception
/// from any chunk is rethrown on the calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

/// While alive, parallel_for on this thread runs inline: a background thread's
/// work (a compile nobody waits for) leaves the pool to the threads that wait.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool saved_;
};

/// Default grain for elementwise work (elements per chunk below which one thread is faster).
inline constexpr int64_t kElementwiseGrain = 1 << 16;

/// Work made of `n` parts laid end to end (part i is size(i) long; a foreach
/// step's kernels, a multi-tensor update's tensors): calls f(i, lo, hi) for
/// each part that [b, e) of the whole covers, [lo, hi) within part i. How one
/// chunk of parallel_for over the whole is cut.
template <class Size, class F>
void for_each_part(size_t n, Size size, int64_t b, int64_t e, F f) {
  int64_t at = 0;
  for (size_t i = 0; i < n && at < e; ++i) {
    const int64_t len = size(i), lo = std::max(b, at), hi = std::min(e, at + len);
    if (lo < hi) f(i, lo - at, hi - at);
    at += len;
  }
}

}  // namespace kiln
