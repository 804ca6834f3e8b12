// The fork/join pool behind parallel_for. num_threads()-1 persistent workers
// plus the calling thread share a job's chunks through an atomic counter, so
// a worker that is slow to wake simply gets fewer chunks. A job is announced
// by bumping a generation counter (odd: open, even: closed); workers spin on
// it for ~100 us before sleeping on a condition variable, since waking a
// sleeping thread costs ~80 us here and parallel regions come in bursts.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "runtime/env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_PAUSE() _mm_pause()
#else
#define KILN_PAUSE() std::this_thread::yield()
#endif

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSpinTime = std::chrono::microseconds(100);

thread_local bool t_in_parallel = false;

int default_threads() {
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(
      env::integer("KILN_NUM_THREADS", 1, kMaxThreads, hw ? std::min<int>(hw, kMaxThreads) : 1));
}

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : threads_(threads) {}

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void set_threads(int n) {
    std::lock_guard<std::mutex> busy(busy_);
    stop_workers();
    threads_.store(n);
  }

  // Runs f over nchunks near-equal chunks covering [0, n). Returns false when
  // the pool is in use by another thread (the caller then runs inline).
  bool run(int64_t n, int64_t nchunks, const std::function<void(int64_t, int64_t)>& f) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    start_workers();

    f_ = &f;
    n_ = n;
    nchunks_ = nchunks;
    next_.store(0, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    generation_.fetch_add(1, std::memory_order_seq_cst);  // odd: open
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mu_);
      wake_.notify_all();
    }

    t_in_parallel = true;
    work();
    t_in_parallel = false;

    wait_until([&] { return done_.load(std::memory_order_acquire) == nchunks_; });
    generation_.fetch_add(1, std::memory_order_seq_cst);  // even: closed
    // A worker that joined the job may still be leaving it; the job's fields
    // stay valid until it has.
    wait_until([&] { return active_.load(std::memory_order_seq_cst) == 0; });
    f_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  template <class Pred>
  static void wait_until(Pred pred) {
    auto start = Clock::now();
    for (int i = 0; !pred(); ++i) {
      if ((i & 63) == 63 && Clock::now() - start > kSpinTime) {
        std::this_thread::yield();
      } else {
        KILN_PAUSE();
      }
    }
  }

  // Claims and runs chunks until none are left.
  void work() {
    for (;;) {
      int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= nchunks_) return;
      if (!failed_.load(std::memory_order_relaxed)) {
        int64_t begin = c * n_ / nchunks_;
        int64_t end = (c + 1) * n_ / nchunks_;
        try {
          (*f_)(begin, end);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true, std::memory_order_relaxed);
        }
      }
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  void worker_loop() {
    t_in_parallel = true;
    uint64_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      uint64_t g = wait_for_job(seen);
      if (stop_.load(std::memory_order_acquire)) return;
      seen = g;
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == g) work();
      active_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // Waits for an open generation other than `seen`: spins, then sleeps.
  uint64_t wait_for_job(uint64_t seen) {
    auto open = [&](uint64_t g) { return g != seen && (g & 1); };
    auto start = Clock::now();
    for (int i = 0;; ++i) {
      uint64_t g = generation_.load(std::memory_order_acquire);
      if (open(g) || stop_.load(std::memory_order_relaxed)) return g;
      if ((i & 63) == 63 && Clock::now() - start > kSpinTime) break;
      KILN_PAUSE();
    }
    std::unique_lock<std::mutex> lock(sleep_mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    uint64_t g = 0;
    wake_.wait(lock, [&] {
      g = generation_.load(std::memory_order_seq_cst);
      return open(g) || stop_.load(std::memory_order_relaxed);
    });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return g;
  }

  void start_workers() {
    int want = threads() - 1;
    if (static_cast<int>(workers_.size()) == want) return;
    stop_workers();
    for (int i = 0; i < want; ++i) {
      try {
        workers_.emplace_back([this] { worker_loop(); });
      } catch (const std::system_error& e) {
        // The system refuses more threads (a process limit): run with the ones
        // it gave, and say so once, rather than fail every parallel region.
        threads_.store(static_cast<int>(workers_.size()) + 1);
        std::fprintf(stderr, "kiln: could start only %d of %d threads for kernels (%s); using %d\n",
                     i + 1, want + 1, e.what(), i + 1);
        return;
      }
    }
  }

  void stop_workers() {
    if (workers_.empty()) return;
    {
      std::lock_guard<std::mutex> lock(sleep_mu_);
      stop_.store(true, std::memory_order_release);
      wake_.notify_all();
    }
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_.store(false, std::memory_order_release);
  }

  std::atomic<int> threads_;
  std::mutex busy_;  // one job at a time; held by the thread that runs it
  std::vector<std::thread> workers_;

  // The current job; written only while the generation is even (closed).
  const std::function<void(int64_t, int64_t)>* f_ = nullptr;
  int64_t n_ = 0, nchunks_ = 0;
  std::atomic<int64_t> next_{0}, done_{0};
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;

  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mu_;
  std::condition_variable wake_;
};

// Never destroyed: sleeping workers simply end with the process.
ThreadPool& pool() {
  static auto* p = new ThreadPool(default_threads());
  return *p;
}

}  // namespace

int num_threads() {
  return pool().threads();
}

void set_num_threads(int n) {
  KILN_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1 to ", kMaxThreads,
             " threads, got ", n);
  pool().set_threads(n);
}

SerialScope::SerialScope() : saved_(std::exchange(t_in_parallel, true)) {}
SerialScope::~SerialScope() { t_in_parallel = saved_; }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  if (n <= grain || threads <= 1 || t_in_parallel) {
    f(0, n);
    return;
  }
  // A few chunks per thread, so a thread that loses its core to another
  // process does not hold up the others; every chunk is at least `grain` long.
  int64_t nchunks = std::min<int64_t>(n / grain, int64_t(threads) * 4);
  if (nchunks <= 1 || !pool().run(n, nchunks, f)) f(0, n);
}

}  // namespace kiln
