// Eager CPU kernels against ceilings measured on this machine: elementwise
// ops and reductions as a fraction of a STREAM-style triad's bandwidth
// (counter `of_triad`), matmul as a fraction of a measured FMA peak (counter
// `of_peak`). The ceilings run first and count their best iteration; kernels
// count their mean, so the ratios are conservative. Filter the ceilings out
// and the ratios go too.
//
//   bench_eager --benchmark_min_time=0.2
//   env -u OPENBLAS_CORETYPE bench_eager --benchmark_filter='Peak|Matmul'
//   OPENBLAS_CORETYPE=Haswell bench_eager --benchmark_filter='Peak|Matmul'
//
// The context block names the BLAS kernels that ran (blas_info()).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ir/op.h"
#include "runtime/blas.h"
#include "runtime/reference.h"
#include "runtime/small_gemm.h"
#include "runtime/storage.h"
#include "runtime/thread_pool.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double g_triad_bytes_per_s = 0;  // set by BM_Triad
double g_peak_flops = 0;         // set by BM_PeakFlops

// A dense f32 buffer, first-touched in parallel (so pages land before timing).
struct Buffer {
  std::shared_ptr<Storage> storage;
  View view;
};

Buffer make_buffer(const Shape& shape, float seed) {
  Buffer b;
  const int64_t n = numel(shape);
  b.storage = Storage::allocate(size_t(n) * sizeof(float));
  b.view = dense_view(b.storage->data(), DType::f32, shape);
  float* p = b.view.ptr<float>();
  parallel_for(n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] = seed + float(i % 1000) * 1e-3f;
  });
  return b;
}

// Times the benchmark loop in wall-clock seconds, for the ratio counters.
struct Stopwatch {
  Clock::time_point start = Clock::now();
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

void report_bandwidth(benchmark::State& state, double bytes_per_iter, double seconds) {
  const double bytes = bytes_per_iter * double(state.iterations());
  state.SetBytesProcessed(int64_t(bytes));
  if (g_triad_bytes_per_s > 0 && seconds > 0)
    state.counters["of_triad"] = bytes / seconds / g_triad_bytes_per_s;
}

// ---- Ceilings ----

__attribute__((noinline)) void triad(float* __restrict a, const float* __restrict b,
                                     const float* __restrict c, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// STREAM triad a = b + s*c over all cores; 12 bytes per element, as STREAM
// counts. The ceiling is the best iteration (as STREAM reports), since other
// processes on a shared machine only ever slow an iteration down.
void BM_Triad(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer a = make_buffer({n}, 0), b = make_buffer({n}, 1), c = make_buffer({n}, 2);
  float* pa = a.view.ptr<float>();
  const float* pb = b.view.ptr<float>();
  const float* pc = c.view.ptr<float>();
  double best = 1e30;
  for (auto _ : state) {
    Stopwatch sw;
    parallel_for(n, kElementwiseGrain,
                 [&](int64_t lo, int64_t hi) { triad(pa + lo, pb + lo, pc + lo, 3.0f, hi - lo); });
    benchmark::ClobberMemory();
    best = std::min(best, sw.seconds());
  }
  state.SetBytesProcessed(int64_t(12.0 * double(n) * double(state.iterations())));
  g_triad_bytes_per_s = 12.0 * double(n) / best;
  state.counters["best_B/s"] = g_triad_bytes_per_s;
}
BENCHMARK(BM_Triad)->Arg(1 << 24)->UseRealTime();

#if defined(__x86_64__)
// Independent FMA chains, enough to cover latency x pipes; returns a value so
// nothing is optimised away. FLOPs: iters * chains * lanes * 2.
constexpr int kChains = 12;

__attribute__((target("avx2,fma"), noinline)) float fma_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(float(j) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

__attribute__((target("avx512f"), noinline)) float fma_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}

bool has_avx512() {
  return __builtin_cpu_supports("avx512f");
}
bool has_fma() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

// fp32 FMA peak over all cores, with the widest vectors the CPU has.
void BM_PeakFlops(benchmark::State& state) {
#if defined(__x86_64__)
  if (!has_fma()) {
    state.SkipWithError("no AVX2/FMA");
    return;
  }
  const bool wide = has_avx512();
  const int64_t iters = 4'000'000;  // ~10 ms per thread
  const int threads = num_threads();
  const double lanes = wide ? 16 : 8;
  const double flops_per_iter = double(threads) * double(iters) * kChains * lanes * 2;
  std::vector<float> sink(size_t(threads), 0.0f);
  double best = 1e30;
  for (auto _ : state) {
    Stopwatch sw;
    parallel_for(threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t)
        sink[size_t(t)] += wide ? fma_avx512(iters) : fma_avx2(iters);
    });
    best = std::min(best, sw.seconds());
  }
  benchmark::DoNotOptimize(sink.data());
  g_peak_flops = std::max(g_peak_flops, flops_per_iter / best);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["best_FLOP/s"] = g_peak_flops;
  state.SetLabel(wide ? "avx512 fp32" : "avx2+fma fp32");
#else
  state.SkipWithError("peak probe is x86-64 only");
#endif
}
BENCHMARK(BM_PeakFlops)->UseRealTime()->Iterations(20);

// ---- Reference kernels ----

void run_kernel(benchmark::State& state, OpKind k, const Attrs& attrs,
                const std::vector<View>& inputs, const View& out, double bytes_per_iter) {
  Stopwatch sw;
  for (auto _ : state) {
    reference_kernel(k, attrs, inputs, out);
    benchmark::ClobberMemory();
  }
  report_bandwidth(state, bytes_per_iter, sw.seconds());
}

void BM_Binary(benchmark::State& state, OpKind k) {
  const int64_t n = state.range(0);
  Buffer a = make_buffer({n}, 1), b = make_buffer({n}, 2), out = make_buffer({n}, 0);
  run_kernel(state, k, {}, {a.view, b.view}, out.view, 12.0 * double(n));
}
BENCHMARK_CAPTURE(BM_Binary, add, OpKind::add)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();
BENCHMARK_CAPTURE(BM_Binary, mul, OpKind::mul)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

// A row vector broadcast down a matrix (bias add): [4096, 4096] + [4096].
void BM_BroadcastAdd(benchmark::State& state) {
  const int64_t n = 4096;
  Buffer a = make_buffer({n, n}, 1), b = make_buffer({n}, 2), out = make_buffer({n, n}, 0);
  run_kernel(state, OpKind::add, {}, {a.view, b.view}, out.view, 8.0 * double(n * n));
}
BENCHMARK(BM_BroadcastAdd)->UseRealTime();

void BM_Exp(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer a = make_buffer({n}, -1), out = make_buffer({n}, 0);
  run_kernel(state, OpKind::exp, {}, {a.view}, out.view, 8.0 * double(n));
}
BENCHMARK(BM_Exp)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

void BM_Sum(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer a = make_buffer({n}, 1), out = make_buffer({}, 0);
  Attrs attrs{{AttrKey::dims, std::vector<int64_t>{0}}, {AttrKey::keepdim, int64_t{0}}};
  run_kernel(state, OpKind::sum, attrs, {a.view}, out.view, 4.0 * double(n));
}
BENCHMARK(BM_Sum)->Arg(1 << 24)->UseRealTime();

// Reductions of a 4096 x 4096 matrix along rows (dim 1, inner) and down
// columns (dim 0, outer).
void BM_Reduce2D(benchmark::State& state, OpKind k) {
  const int64_t n = 4096, dim = state.range(0);
  Buffer a = make_buffer({n, n}, 1), out = make_buffer({n}, 0);
  Attrs attrs{{AttrKey::dims, std::vector<int64_t>{dim}}, {AttrKey::keepdim, int64_t{0}}};
  run_kernel(state, k, attrs, {a.view}, out.view, 4.0 * double(n * n));
  state.SetLabel(dim == 1 ? "along rows" : "down columns");
}
BENCHMARK_CAPTURE(BM_Reduce2D, max, OpKind::max)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK_CAPTURE(BM_Reduce2D, sum, OpKind::sum)->Arg(1)->Arg(0)->UseRealTime();

// Softmax over rows of 4096 x 4096 as eager ops: max, sub, exp, sum, div.
void BM_EagerSoftmax(benchmark::State& state) {
  const int64_t n = 4096;
  Buffer x = make_buffer({n, n}, 1), m = make_buffer({n, 1}, 0), d = make_buffer({n, n}, 0),
         e = make_buffer({n, n}, 0), s = make_buffer({n, 1}, 0), y = make_buffer({n, n}, 0);
  Attrs rows{{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t{1}}};
  Stopwatch sw;
  for (auto _ : state) {
    reference_kernel(OpKind::max, rows, std::vector<View>{x.view}, m.view);
    reference_kernel(OpKind::sub, {}, std::vector<View>{x.view, m.view}, d.view);
    reference_kernel(OpKind::exp, {}, std::vector<View>{d.view}, e.view);
    reference_kernel(OpKind::sum, rows, std::vector<View>{e.view}, s.view);
    reference_kernel(OpKind::div, {}, std::vector<View>{e.view, s.view}, y.view);
    benchmark::ClobberMemory();
  }
  // Memory traffic of the five kernels: 1 + 2 + 2 + 1 + 2 passes over 64 MiB.
  report_bandwidth(state, 8.0 * 4.0 * double(n * n), sw.seconds());
}
BENCHMARK(BM_EagerSoftmax)->UseRealTime();

// ---- Matmul ----

void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer a = make_buffer({n, n}, 1), b = make_buffer({n, n}, 2), c = make_buffer({n, n}, 0);
  const double flops = 2.0 * double(n) * double(n) * double(n);
  Stopwatch sw;
  for (auto _ : state) {
    matmul_cpu(a.view, b.view, c.view);
    benchmark::ClobberMemory();
  }
  const double secs = sw.seconds();
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  if (g_peak_flops > 0)
    state.counters["of_peak"] = flops * double(state.iterations()) / secs / g_peak_flops;
}
BENCHMARK(BM_Matmul)->Arg(256)->Arg(512)->Arg(1000)->Arg(2000)->UseRealTime()->Unit(
    benchmark::kMillisecond);

// Small products, as a conv and small layers make them, through matmul_cpu
// with libxsmm's kernels where it takes them (first Arg 1) and with OpenBLAS
// alone (first Arg 0, set_small_gemm_enabled(false)), one after the other; `speedup` is the
// OpenBLAS row's time over this row's. Batched cases are one call (the batch
// split over the pool either way).
struct SmallCase {
  const char* name;
  Shape a, b;
  bool trans_a = false, trans_b = false;  // a (b) is a dense buffer of this shape, read transposed
  double beta = 0;
};
const SmallCase kSmallCases[] = {
    {"digits conv1 y=WP [16,9]x[64,9,64]", {16, 9}, {64, 9, 64}},
    {"digits conv1 dP=W^T dY [16,9]^T x[64,16,64]", {16, 9}, {64, 16, 64}, true},
    {"digits conv1 dW tall [16,4096]x[9,4096]^T", {16, 4096}, {9, 4096}, false, true},
    {"digits conv2 y=WP [32,144]x[64,144,16]", {32, 144}, {64, 144, 16}},
    {"digits conv2 dP=W^T dY [32,144]^T x[64,32,16]", {32, 144}, {64, 32, 16}, true},
    {"digits conv2 tall [1024,144]x[144,32]", {1024, 144}, {144, 32}},
    {"5x5 conv y=WP [32,75]x[32,75,784]", {32, 75}, {32, 75, 784}},
    {"64ch conv y=WP [64,576]x[32,576,1024]", {64, 576}, {32, 576, 1024}},
    {"64ch conv tall [32768,576]x[576,64]", {32768, 576}, {576, 64}},
    {"5x5 conv tall [25088,75]x[75,32]", {25088, 75}, {75, 32}},
    {"digits conv1 tall [4096,9]x[9,16]", {4096, 9}, {9, 16}},
    {"square 8", {8, 8}, {8, 8}},
    {"square 16", {16, 16}, {16, 16}},
    {"square 32", {32, 32}, {32, 32}},
    {"square 64", {64, 64}, {64, 64}},
    {"square 128", {128, 128}, {128, 128}},
    {"square 256", {256, 256}, {256, 256}},
    {"square 64, a^T, beta 1", {64, 64}, {64, 64}, true, false, 1},
    {"MLP layer [256,784]x[784,1024]", {256, 784}, {784, 1024}},
    {"MLP head [256,1024]x[1024,10]", {256, 1024}, {1024, 10}},
    {"MLP head dW [256,1024]^T x[256,10]", {256, 1024}, {256, 10}, true},
};

std::map<int64_t, double> g_openblas_seconds;  // by case, from the Arg 0 row

void BM_SmallMatmul(benchmark::State& state) {
  const SmallCase& c = kSmallCases[state.range(1)];
  const bool small = state.range(0) != 0;
  auto operand = [](Shape s, bool trans, float seed) {
    Buffer buf = make_buffer(s, seed);
    if (trans) {  // the buffer holds [.., y, x]: read it as [.., x, y]
      const int64_t r = int64_t(s.size());
      std::swap(buf.view.shape[r - 2], buf.view.shape[r - 1]);
      std::swap(buf.view.strides[r - 2], buf.view.strides[r - 1]);
    }
    return buf;
  };
  Buffer a = operand(c.a, c.trans_a, 1), b = operand(c.b, c.trans_b, 2);
  const Shape& as = a.view.shape;
  const Shape& bs = b.view.shape;
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  const int64_t products = std::max(numel(as) / (n * k), numel(bs) / (k * m));
  Shape out_shape = as.size() > bs.size() ? as : bs;
  out_shape[out_shape.size() - 2] = n;
  out_shape.back() = m;
  Buffer out = make_buffer(out_shape, 0);
  const bool saved = small_gemm_enabled();
  set_small_gemm_enabled(small);
  const double flops = 2.0 * double(products) * double(n) * double(m) * double(k);
  Stopwatch sw;
  for (auto _ : state) {
    matmul_cpu(a.view, b.view, out.view, 1.0, c.beta);
    benchmark::ClobberMemory();
  }
  const double secs = sw.seconds() / double(state.iterations());
  set_small_gemm_enabled(saved);
  state.SetLabel(std::string(c.name) + (small ? ", small kernels" : ", OpenBLAS"));
  state.counters["GFLOP/s"] = flops / secs / 1e9;
  if (!small)
    g_openblas_seconds[state.range(1)] = secs;
  else if (g_openblas_seconds.count(state.range(1)))
    state.counters["speedup"] = g_openblas_seconds[state.range(1)] / secs;
}
BENCHMARK(BM_SmallMatmul)
    ->ArgsProduct({{0, 1}, benchmark::CreateDenseRange(0, std::size(kSmallCases) - 1, 1)})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kiln::blas_init();
  benchmark::AddCustomContext("blas", kiln::blas_info());
  benchmark::AddCustomContext("kiln_threads", std::to_string(kiln::num_threads()));
#if defined(__x86_64__)
  benchmark::AddCustomContext("fma_isa",
                              has_avx512() ? "avx512f" : (has_fma() ? "avx2+fma" : "none"));
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
