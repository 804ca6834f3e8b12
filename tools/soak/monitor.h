// The soak's observers (tools/soak): memory samples and the verdict on whether
// memory stayed flat, and a tap on stderr that counts Kiln's reports of
// damaged cache entries while passing everything else through.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace kiln::soak {

struct MemorySample {
  double t_s = 0;
  double rss_mib = 0;         // resident set, after malloc_trim
  double alloc_mib = 0;       // Kiln's CPU allocator: bytes in use (tensors alive)
  double cached_mib = 0;      // Kiln's CPU allocator: freed blocks kept for reuse (capped)
  double heap_mib = 0;        // malloc's bytes in use (mallinfo2)
  size_t custom_calls = 0;    // live custom-call registry entries
  size_t loaded_kernels = 0;  // objects loaded in the LLVM JIT
};

/// One sample now (t_s: seconds since the start).
MemorySample sample_memory(double t_s);

/// Whether memory stayed flat after the warm-up: the median of the last fifth of
/// the samples after warm-up minus the median of the first fifth, below the limit
/// for RSS less the caching allocator's free blocks, and for the tensors alive.
/// The free blocks are reported, not judged: a cache that grows to each size
/// class's high-water mark (capped by KILN_CPU_CACHE_MB), not memory in use.
/// Windows shorter than `min_judged_s` are reported, not judged.
struct Flatness {
  bool judged = false, flat = true;
  double warmup_s = 0, window_s = 0, limit_mib = 0;
  double rss_first = 0, rss_after_warmup = 0, rss_last = 0, rss_growth = 0, rss_slope_mib_per_h = 0;
  double held_after_warmup = 0, held_last = 0, held_growth = 0;  // RSS less cached blocks
  double cached_after_warmup = 0, cached_last = 0, cached_growth = 0;
  double alloc_after_warmup = 0, alloc_last = 0, alloc_growth = 0;
  size_t calls_after_warmup = 0, calls_last = 0, calls_max = 0;
  size_t kernels_after_warmup = 0, kernels_last = 0, kernels_max = 0;
  std::string str() const;
};
Flatness judge_memory(const std::vector<MemorySample>& samples, double warmup_s, double limit_mib,
                      double min_judged_s);

/// Redirects fd 2 into a pipe while alive: lines saying "kiln: damaged cache
/// entry" are counted (the first few shown), the rest pass through unchanged.
class StderrTap {
 public:
  StderrTap();
  ~StderrTap();
  StderrTap(const StderrTap&) = delete;
  StderrTap& operator=(const StderrTap&) = delete;
  /// Puts fd 2 back and reads what is left; the counts are final after it.
  void restore();
  int64_t damaged_reports() const { return damaged_.load(); }
  int64_t write_failures() const { return write_failures_.load(); }

 private:
  void loop();
  void line(const std::string& s);
  void forward(const std::string& s);
  int saved_ = -1, read_fd_ = -1;
  std::thread reader_;
  std::atomic<int64_t> damaged_{0}, write_failures_{0};
};

}  // namespace kiln::soak
