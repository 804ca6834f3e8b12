// Memory samples, the flatness verdict and the stderr tap (monitor.h).
#include "tools/soak/monitor.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "frontend/function.h"
#include "runtime/allocator.h"
#include "runtime/llvm_jit.h"

namespace kiln::soak {

namespace {

double rss_mib() {
  ::malloc_trim(0);  // freed heap back to the system, so resident memory means live memory
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return double(resident) * double(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

template <class T>
T median(std::vector<T> v) {
  if (v.empty()) return T();
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

MemorySample sample_memory(double t_s) {
  MemorySample s;
  s.t_s = t_s;
  s.rss_mib = rss_mib();
  const AllocatorStats a = cpu_allocator_stats();
  s.alloc_mib = double(a.bytes_in_use) / (1 << 20);
  s.cached_mib = double(a.bytes_cached) / (1 << 20);
  const struct mallinfo2 mi = ::mallinfo2();
  s.heap_mib = double(mi.uordblks + mi.hblkhd) / (1 << 20);
  s.custom_calls = autograd::detail::live_custom_calls();
  s.loaded_kernels = LlvmJit::get().loaded_objects();
  return s;
}

Flatness judge_memory(const std::vector<MemorySample>& samples, double warmup_s, double limit_mib,
                      double min_judged_s) {
  Flatness f;
  f.warmup_s = warmup_s;
  f.limit_mib = limit_mib;
  if (samples.empty()) return f;
  f.rss_first = samples.front().rss_mib;
  std::vector<MemorySample> w;
  for (const MemorySample& s : samples)
    if (s.t_s >= warmup_s) w.push_back(s);
  if (w.size() < 2) return f;
  const double t0 = w.front().t_s, t1 = w.back().t_s;
  f.window_s = t1 - t0;
  std::vector<double> rss_head, rss_tail, alloc_head, alloc_tail, held_head, held_tail, cached_head,
      cached_tail;
  std::vector<size_t> calls_head, calls_tail, kernels_head, kernels_tail;
  for (const MemorySample& s : w) {
    f.calls_max = std::max(f.calls_max, s.custom_calls);
    f.kernels_max = std::max(f.kernels_max, s.loaded_kernels);
    if (s.t_s <= t0 + f.window_s / 5) {
      rss_head.push_back(s.rss_mib);
      held_head.push_back(s.rss_mib - s.cached_mib);
      cached_head.push_back(s.cached_mib);
      alloc_head.push_back(s.alloc_mib);
      calls_head.push_back(s.custom_calls);
      kernels_head.push_back(s.loaded_kernels);
    }
    if (s.t_s >= t1 - f.window_s / 5) {
      rss_tail.push_back(s.rss_mib);
      held_tail.push_back(s.rss_mib - s.cached_mib);
      cached_tail.push_back(s.cached_mib);
      alloc_tail.push_back(s.alloc_mib);
      calls_tail.push_back(s.custom_calls);
      kernels_tail.push_back(s.loaded_kernels);
    }
  }
  f.rss_after_warmup = median(rss_head);
  f.rss_last = median(rss_tail);
  f.rss_growth = f.rss_last - f.rss_after_warmup;
  f.held_after_warmup = median(held_head);
  f.held_last = median(held_tail);
  f.held_growth = f.held_last - f.held_after_warmup;
  f.cached_after_warmup = median(cached_head);
  f.cached_last = median(cached_tail);
  f.cached_growth = f.cached_last - f.cached_after_warmup;
  f.alloc_after_warmup = median(alloc_head);
  f.alloc_last = median(alloc_tail);
  f.alloc_growth = f.alloc_last - f.alloc_after_warmup;
  f.calls_after_warmup = median(calls_head);
  f.calls_last = median(calls_tail);
  f.kernels_after_warmup = median(kernels_head);
  f.kernels_last = median(kernels_tail);
  // Least squares slope of RSS over the window, for the record.
  double st = 0, sr = 0, stt = 0, str = 0;
  for (const MemorySample& s : w) {
    st += s.t_s;
    sr += s.rss_mib;
    stt += s.t_s * s.t_s;
    str += s.t_s * s.rss_mib;
  }
  const double n = double(w.size()), den = n * stt - st * st;
  if (den > 0) f.rss_slope_mib_per_h = (n * str - st * sr) / den * 3600;
  f.judged = f.window_s >= min_judged_s;
  f.flat = !f.judged || (f.held_growth < limit_mib && f.alloc_growth < limit_mib);
  return f;
}

std::string Flatness::str() const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << "RSS less the allocator's free blocks after warm-up " << held_after_warmup << " MiB, last "
     << held_last << ": growth " << held_growth << " MiB (limit " << limit_mib << ")\n"
     << "    tensors alive (Kiln's allocator) after warm-up " << alloc_after_warmup << " MiB, last "
     << alloc_last << ": growth " << alloc_growth << " MiB (limit " << limit_mib << ")\n"
     << "    RSS first " << rss_first << " MiB, after warm-up " << rss_after_warmup << ", last "
     << rss_last << ": growth " << rss_growth << " MiB (slope " << rss_slope_mib_per_h
     << " MiB/h), of which the allocator's free blocks (a cache, not judged) "
     << cached_after_warmup << " -> " << cached_last << " MiB\n"
     << "    live custom calls after warm-up " << calls_after_warmup << ", last " << calls_last
     << " (max " << calls_max << "); loaded kernels after warm-up " << kernels_after_warmup
     << ", last " << kernels_last << " (max " << kernels_max << ")\n"
     << "    window after a warm-up of " << warmup_s << " s: " << window_s
     << " s, medians of its first and last fifths; "
     << (judged ? (flat ? "flat" : "GROWING") : "too short to judge");
  return os.str();
}

StderrTap::StderrTap() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return;  // no tap: nothing is counted
  std::fflush(stderr);
  saved_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  ::dup2(p[1], 2);
  ::close(p[1]);
  read_fd_ = p[0];
  reader_ = std::thread([this] { loop(); });
}

StderrTap::~StderrTap() {
  restore();
}

void StderrTap::restore() {
  if (saved_ < 0) return;
  std::cerr.flush();
  std::fflush(stderr);
  ::dup2(saved_, 2);  // the pipe's last writer goes: the reader sees its end
  reader_.join();
  ::close(read_fd_);
  ::close(saved_);
  saved_ = -1;
}

void StderrTap::loop() {
  std::string pending;
  char buf[4096];
  for (ssize_t n; (n = ::read(read_fd_, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pending.append(buf, size_t(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      line(pending.substr(0, nl + 1));
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) line(pending + "\n");
}

void StderrTap::line(const std::string& s) {
  constexpr int64_t kShown = 3;
  if (s.find("kiln: damaged cache entry") != std::string::npos) {
    const int64_t n = ++damaged_;
    if (n <= kShown) forward(s);
    if (n == kShown) forward("kiln-soak: (further damaged-entry reports are counted, not shown)\n");
    return;
  }
  if (s.find("cannot write kernel cache entry") != std::string::npos) ++write_failures_;
  forward(s);
}

void StderrTap::forward(const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(saved_, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

}  // namespace kiln::soak
