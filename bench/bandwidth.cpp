// The triad bandwidth probe (see bandwidth.h).
#include "bench/bandwidth.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>

#include "bench/steady_code.h"
#include "codegen/cpu_backend.h"
#include "runtime/blas.h"

#include "runtime/allocator.h"
#include "runtime/thread_pool.h"

namespace kiln::bench {

TriadBuffers::TriadBuffers(int64_t n) : n(n) {
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  a = static_cast<float*>(cpu_alloc(bytes));
  b = static_cast<float*>(cpu_alloc(bytes));
  c = static_cast<float*>(cpu_alloc(bytes));
  parallel_for(n, 1 << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  });
}

TriadBuffers::~TriadBuffers() {
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cpu_free(a, bytes);
  cpu_free(b, bytes);
  cpu_free(c, bytes);
}

void triad(TriadBuffers& buf) {
  float* __restrict a = buf.a;
  const float* __restrict b = buf.b;
  const float* __restrict c = buf.c;
  parallel_for(buf.n, 1 << 16, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
  });
}

double measure_triad_bytes_per_second(TriadBuffers& buf, int passes) {
  double best = 1e30;
  for (int rep = 0; rep < passes; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    triad(buf);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return 3.0 * 4.0 * static_cast<double>(buf.n) / best;
}

double triad_bytes_per_second() {
  static const double bw = [] {
    TriadBuffers buf(1 << 24);
    return measure_triad_bytes_per_second(buf, 10);
  }();
  return bw;
}

namespace {
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

CoresHeld::CoresHeld() : cpu0_(process_cpu_seconds()), wall0_(wall_seconds()) {}

double CoresHeld::fraction() const {
  const double wall = wall_seconds() - wall0_;
  return wall > 0 ? (process_cpu_seconds() - cpu0_) / wall / num_threads() : 0;
}

int run_benchmarks(int argc, char** argv, void (*registered)()) {
  blas_init();
  benchmark::AddCustomContext("openblas", blas_info());
  benchmark::AddCustomContext("jit_target", cpu_target_description());
  benchmark::AddCustomContext("triad_GBps", std::to_string(triad_bytes_per_second() / 1e9));
  time_steady_code();
  registered();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace kiln::bench
