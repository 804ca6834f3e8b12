// Fused vs unfused vs eager, for the tracing JIT's workloads. Every figure is
// read against probes run in the same binary: a STREAM-style triad for
// bandwidth (counter "of_triad": achieved / triad bandwidth) and OpenBLAS
// alone for the MLP's matmuls.
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include "bench/bandwidth.h"
#include "frontend/device_ops.h"
#include "frontend/dispatch.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "codegen/cpu_backend.h"
#include "codegen/eager_kernel.h"
#include "runtime/blas.h"
#include "runtime/storage.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <vector>

using namespace kiln;

namespace {

// The 8-op chain: arithmetic only, so it is bound by memory bandwidth.
Tensor chain(const Tensor& x) { return ((x * 1.5f + 2) - x * x).abs().clamp(0.5, 4) * 0.25f; }
// An 8-op chain with three transcendentals: bound by arithmetic on this CPU.
Tensor chain_transcendental(const Tensor& x) {
  return ((x * 1.5f + 2).tanh().exp() - x.sigmoid()).relu() / (x * x + 1);
}
Tensor layer_norm(const Tensor& x) {
  Tensor mu = x.mean(1, true);
  Tensor d = x - mu;
  return d / ((d * d).mean(1, true) + 1e-5).sqrt();
}

enum Mode { kEager = 0, kUnfused = 1, kFused = 2 };
const char* mode_name(int m) { return m == kEager ? "eager" : m == kUnfused ? "unfused" : "fused"; }

// BM_Triad's own bandwidth in this run (bytes/s), measured as every row is: the
// mean over its timed loop. 0 until BM_Triad has run.
double g_bm_triad_bytes_per_second = 0;

// Reports bandwidth and the fraction of the triad bandwidth for `bytes` moved per
// iteration: "of_triad" against the probe (the best of ten passes at start-up),
// "of_BM_Triad" against BM_Triad's mean in the same run (like with like: both
// timed loops, both with ordinary stores, a store's line read before it is
// written; so a memory-bound unary op, 12 bytes moved for 8 counted against the
// triad's 16 for 12, reads at most 0.89); "cores": the share of parallel_for's
// cores the process held while the loop ran (bandwidth.h: CoresHeld).
void report_bytes(benchmark::State& state, double bytes, const bench::CoresHeld& held) {
  const double moved = bytes * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["of_triad"] =
      benchmark::Counter(moved / bench::triad_bytes_per_second(), benchmark::Counter::kIsRate);
  if (g_bm_triad_bytes_per_second > 0)
    state.counters["of_BM_Triad"] =
        benchmark::Counter(moved / g_bm_triad_bytes_per_second, benchmark::Counter::kIsRate);
  state.counters["cores"] = held.fraction();
}

// "of_paired_triad": the median, over kPairs rounds of one triad pass (16M
// floats, BM_Triad's) followed at once by one call of `call`, of the call's
// bandwidth over that pass's (bytes counted as report_bytes counts them). A
// ratio of two neighbours in time: on this shared VM the triad moves 2x within
// minutes (other tenants, other helpers' builds), so of_BM_Triad, against a
// mean taken minutes earlier, moves 0.1-0.2 between runs where this does not.
template <class F>
void report_paired_triad(benchmark::State& state, double bytes, F call) {
  constexpr int kPairs = 7;
  static bench::TriadBuffers buf(1 << 24);
  using Clock = std::chrono::steady_clock;
  std::vector<double> ratios;
  for (int r = 0; r < kPairs; ++r) {
    auto t0 = Clock::now();
    bench::triad(buf);
    const double triad = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    call();
    const double op = std::chrono::duration<double>(Clock::now() - t0).count();
    ratios.push_back(bytes / op / (3.0 * 4 * static_cast<double>(buf.n) / triad));
  }
  std::nth_element(ratios.begin(), ratios.begin() + kPairs / 2, ratios.end());
  state.counters["of_paired_triad"] = ratios[kPairs / 2];
}

// Runs `body` on x in the benchmark's mode; returns seconds per iteration.
template <class F>
double run_mode(benchmark::State& state, F body, const Tensor& x, double bytes) {
  int mode = static_cast<int>(state.range(1));
  auto traced = jit(body, "bench");
  traced.set_fusion(mode == kFused);
  state.SetLabel(mode_name(mode));
  if (mode != kEager) traced(x);  // compile outside the timed loop
  const bench::CoresHeld held;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Tensor y = mode == kEager ? body(x) : traced(x);
    benchmark::DoNotOptimize(y.impl());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  report_bytes(state, bytes, held);
  report_paired_triad(state, bytes, [&] {
    Tensor y = mode == kEager ? body(x) : traced(x);
    benchmark::DoNotOptimize(y.impl());
  });
  return seconds;
}

void BM_Triad(benchmark::State& state) {
  const int64_t n = state.range(0);
  bench::TriadBuffers buf(n);
  const bench::CoresHeld held;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) bench::triad(buf);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_bm_triad_bytes_per_second =
      3.0 * 4 * static_cast<double>(n) * static_cast<double>(state.iterations()) / seconds;
  report_bytes(state, 3.0 * 4 * static_cast<double>(n), held);
  state.SetLabel("ordinary stores, base x86-64 ISA (SSE2)");
}
BENCHMARK(BM_Triad)->Arg(1 << 24)->UseRealTime()->Unit(benchmark::kMillisecond);

// The seed chain fused by hand: one C++ loop, compiled with the project's
// flags (the base x86-64 ISA), into a preallocated result, on one core (what
// such a loop is: arg 1) or split over Kiln's pool (arg 2). The fused
// BM_Chain8 row's "x_hand_fused" is the one-core loop's time over its own.
std::map<int64_t, double> g_hand_fused_seconds;  // one core, by size

void BM_Chain8HandFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool pool = state.range(1) == 2;
  manual_seed(0);
  Tensor x = randn({n});
  std::vector<float> y(static_cast<size_t>(n));
  const float* in = x.data_ptr<float>();
  float* out = y.data();
  auto loop = [in, out](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = in[i];
      const float t = std::fabs(v * 1.5f + 2.f - v * v);
      out[i] = std::min(std::max(t, 0.5f), 4.f) * 0.25f;
    }
  };
  const bench::CoresHeld held;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (pool)
      parallel_for(n, 1 << 16, loop);
    else
      loop(0, n);
    benchmark::DoNotOptimize(out);
  }
  if (!pool)
    g_hand_fused_seconds[n] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                              static_cast<double>(state.iterations());
  state.SetLabel(pool ? "hand-fused C++, Kiln's pool" : "hand-fused C++, one core");
  report_bytes(state, 2.0 * 4 * static_cast<double>(n), held);
}
BENCHMARK(BM_Chain8HandFused)
    ->ArgsProduct({{1 << 24}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_Chain8(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({state.range(0)});
  const double seconds = run_mode(state, chain, x, 2.0 * 4 * static_cast<double>(x.numel()));
  const auto hand = g_hand_fused_seconds.find(state.range(0));
  if (state.range(1) == kFused && hand != g_hand_fused_seconds.end())
    state.counters["x_hand_fused"] = hand->second / seconds;
}
BENCHMARK(BM_Chain8)
    ->ArgsProduct({{1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24}, {kEager, kUnfused, kFused}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_Chain8Transcendental(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({state.range(0)});
  run_mode(state, chain_transcendental, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
BENCHMARK(BM_Chain8Transcendental)
    ->ArgsProduct({{1 << 24}, {kEager, kUnfused, kFused}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One math op over 16M floats: eager (the op's own kernel) against the same op
// traced. Registered in main() for every math op of the op table (ir/ops.def):
// BM_Unary/<op>, and BM_Binary/<op> whose second operand (captured) is as large.
// "znver3, AVX2, 256-bit vectors": the host's CPU and the vector ISA its kernels use.
std::string cpu_target_name() {
  const std::string d = cpu_target_description();
  return d.substr(0, d.find(" +"));
}

// The label of an eager row names the kernel that ran: the op's compiled kernel
// (for the CPU and vector ISA of the context's jit_target line) or its reference
// kernel.
void BM_Math(benchmark::State& state, OpKind k) {
  manual_seed(0);
  Tensor x = randn({state.range(0)});
  std::vector<Tensor> operands{x};
  if (op_info(k).arity == 1) {
    run_mode(
        state, [k](const Tensor& t) { return detail::apply(k, {t}, {}, SourceLoc{}); }, x,
        2.0 * 4 * static_cast<double>(x.numel()));
  } else {
    Tensor y = randn({state.range(0)});
    operands.push_back(y);
    run_mode(
        state, [k, y](const Tensor& t) { return detail::apply(k, {t, y}, {}, SourceLoc{}); }, x,
        3.0 * 4 * static_cast<double>(x.numel()));
  }
  if (state.range(1) == kEager)
    state.SetLabel(runs_compiled_kernel(k, {}, operands, x.impl()->type)
                       ? "eager, compiled kernel (" + cpu_target_name() + ")"
                       : std::string("eager, reference kernel"));
}

// A composite of the op table (ops.def's decomp) over 16M floats, traced: its
// expansion fused into one kernel. Counter `of_handwritten`: its time over that
// of the same formula written by hand as one C++ loop (-O3, split over the same
// threads), measured in the same run; 1 means as fast as the hand-written op.
float softsign_by_hand(float x) { return x / (1.0f + std::fabs(x)); }
float mish_by_hand(float x) {
  return x * std::tanh(std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))));
}

void BM_Composite(benchmark::State& state, OpKind k) {
  manual_seed(0);
  Tensor x = randn({state.range(0)});
  float (*by_hand)(float) = k == OpKind::softsign ? softsign_by_hand
                            : k == OpKind::mish   ? mish_by_hand
                                                  : nullptr;
  if (!by_hand) {
    state.SkipWithError("no hand-written loop for this composite in the bench");
    return;
  }
  // The hand-written loop, best of 5.
  std::vector<float> out(size_t(x.numel()));
  const float* in = static_cast<const float*>(x.data_ptr());
  double hand = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[size_t(i)] = by_hand(in[i]);
    });
    hand = std::min(hand, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  benchmark::DoNotOptimize(out.data());
  const int mode = static_cast<int>(state.range(1));
  auto traced = jit([k](const Tensor& t) { return detail::apply(k, {t}, {}, SourceLoc{}); }, "bench");
  traced.set_fusion(mode == kFused);
  state.SetLabel(mode_name(mode));
  if (mode != kEager) traced(x);
  const bench::CoresHeld held;
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor y = mode == kEager ? detail::apply(k, {x}, {}, SourceLoc{}) : traced(x);
    benchmark::DoNotOptimize(y.impl());
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  report_bytes(state, 2.0 * 4 * static_cast<double>(x.numel()), held);
  state.counters["handwritten_ms"] = hand * 1e3;
  state.counters["of_handwritten"] = total / static_cast<double>(state.iterations()) / hand;
}

// Core clock cycles per second, from a chain of dependent one-cycle integer
// additions (the VM has no cycle counters): best of 50 timings of 0.7 ms each
// (short, so that on a shared machine some run unpreempted), once.
double cycles_per_second() {
  static const double hz = [] {
    double best = 0;
    for (int r = 0; r < 50; ++r) {
      uint64_t v = 0;
      constexpr int64_t kIters = 1 << 18;
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < kIters; ++i)
        asm volatile(
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
            : "+r"(v));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 8.0 * double(kIters) / s);
    }
    return best;
  }();
  return hz;
}

// The triad bandwidth rows are read against: BM_Triad's in this run where it
// ran first, else the start-up probe's.
double triad_for_rows() {
  return g_bm_triad_bytes_per_second > 0 ? g_bm_triad_bytes_per_second
                                         : bench::triad_bytes_per_second();
}

// The roofline's arithmetic side: a unary math op's eager kernel (the one traced
// plans share) on arg 0 threads of the pool at once (1, and all of the pool's,
// as the triad runs: on this 2-vCPU VM two cores, each with its own FMA pipes:
// two threads take half one's time an element, exp 0.33 -> 0.17 ns, erf 0.72 ->
// 0.36), each calling it over its own 4096 floats (16 KiB in, 16
// KiB out: L1 for one thread, L1 and L2 for two), so that memory plays no part.
// Each thread calls the kernel until a common deadline 10 ms after the iteration
// starts and times every call. A call counts where every other thread ran the
// kernel throughout it (ran_throughout; co_run: the share of calls that
// counted, 1 on one thread), so that on a machine other processes share, the
// core's throughput is read from calls during which all of it ran this kernel;
// the time is the 5th percentile of those calls (a call preempted, or sharing
// its core with another process, is slower; the figure
// errs fast, so max_of_triad errs high: an op under 0.8 by it is). Counters:
// ns_per_element (the threads together: a call's time over threads x 4096),
// cycles_per_element (core cycles, cycles_per_second), co_run, cores
// (bandwidth.h: CoresHeld), and max_of_triad: the fraction of the triad a row of
// BM_Unary would read if arithmetic alone bounded it, counted as those rows
// count it: 8 bytes an element (4 read, 4 written) against the triad's 12 (two
// floats read, one written; write-allocate counted by neither), so 0.8 of the
// triad needs an element every 10 / triad_bytes_per_ns ns. A memory-bound row
// reads at most 0.89 of the triad (report_bytes), so an op whose max_of_triad on
// all threads is under 0.8 cannot reach 0.8 here however its loads and its
// arithmetic overlap. max_of_probe: the same against the start-up probe (best
// of ten triad passes, steadier than BM_Triad's mean on a shared machine).
struct KernelCall {
  int64_t begin, end;  // ns since the iteration started
};

// Whether a thread whose calls (in order) are `calls` was running the kernel
// throughout c, another thread's call, both unpreempted: calls cover c with no
// gap and each took between half and twice c's time (a thread preempted within
// a call, or between two, would have left c's core to c's thread alone; c
// preempted is far longer than the calls beside it).
bool ran_throughout(const std::vector<KernelCall>& calls, const KernelCall& c) {
  const int64_t length = c.end - c.begin, slack = length / 8;
  auto it = std::lower_bound(calls.begin(), calls.end(), c.begin,
                             [](const KernelCall& a, int64_t t) { return a.end <= t; });
  if (it == calls.end() || it->begin > c.begin + slack) return false;
  for (int64_t covered = it->begin; it != calls.end() && it->begin < c.end; ++it) {
    const int64_t other = it->end - it->begin;
    if (it->begin > covered + slack || other > 2 * length || 2 * other < length) return false;
    covered = it->end;
    if (covered >= c.end - slack) return true;
  }
  return false;
}

void BM_UnaryInCache(benchmark::State& state, OpKind k) {
  constexpr int64_t kN = 4096;
  const int threads = static_cast<int>(state.range(0));
  if (threads > num_threads()) {
    state.SkipWithError("more threads than the pool runs");
    return;
  }
  manual_seed(0);
  Tensor x = randn({threads * kN});
  std::vector<float> out(static_cast<size_t>(threads * kN));
  const auto kernel =
      eager_cpu_kernel(k, {}, {DType::f32}, DType::f32, cpu_compile_options(compile_options()));
  if (!kernel || !kernel->fn) {
    state.SkipWithError("no compiled kernel for this op");
    return;
  }
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<KernelCall>> calls(static_cast<size_t>(threads));
  std::vector<double> counted;  // ns of the calls that count
  double all_calls = 0;
  const bench::CoresHeld held;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::milliseconds(10);
    auto ns = [t0](Clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count();
    };
    parallel_for(threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        void* ptrs[] = {static_cast<float*>(x.data_ptr()) + t * kN, out.data() + t * kN};
        std::vector<KernelCall>& mine = calls[static_cast<size_t>(t)];
        mine.clear();
        for (Clock::time_point now = Clock::now(); now < deadline;) {
          const int64_t begin = ns(now);
          kernel->fn(ptrs, 0, kN);
          now = Clock::now();
          mine.push_back({begin, ns(now)});
        }
      }
    });
    for (size_t t = 0; t < calls.size(); ++t) {
      // Both threads preempted at once would leave calls that cover each other:
      // a call counts only within 3x its thread's fastest (a thread alone on the
      // core is at most twice as fast as beside another).
      int64_t fastest = INT64_MAX;
      for (const KernelCall& c : calls[t]) fastest = std::min(fastest, c.end - c.begin);
      for (const KernelCall& c : calls[t]) {
        bool all_ran = c.end - c.begin <= 3 * fastest;
        for (size_t o = 0; o < calls.size() && all_ran; ++o)
          if (o != t) all_ran = ran_throughout(calls[o], c);
        all_calls += 1;
        if (all_ran) counted.push_back(static_cast<double>(c.end - c.begin));
      }
    }
  }
  benchmark::DoNotOptimize(out.data());
  if (counted.empty()) {
    state.SkipWithError("the threads never ran together");
    return;
  }
  auto at = counted.begin() + static_cast<ptrdiff_t>(counted.size() / 20);
  std::nth_element(counted.begin(), at, counted.end());
  const double per_element = *at * 1e-9 / static_cast<double>(threads * kN);
  state.counters["ns_per_element"] = per_element * 1e9;
  state.counters["cycles_per_element"] = per_element * cycles_per_second();
  state.counters["co_run"] = static_cast<double>(counted.size()) / all_calls;
  state.counters["cores"] = held.fraction();
  state.counters["max_of_triad"] = 8.0 / per_element / triad_for_rows();
  state.counters["max_of_probe"] = 8.0 / per_element / bench::triad_bytes_per_second();
  state.SetLabel(std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " in cache, " +
                 cpu_target_name());
}

void register_table_benchmarks() {
  for (OpKind k : all_ops())
    if (is_composite(k))
      benchmark::RegisterBenchmark((std::string("BM_Composite/") + op_name(k)).c_str(), BM_Composite, k)
          ->ArgsProduct({{1 << 24}, {kEager, kUnfused, kFused}})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  for (OpKind k : all_ops())
    if (is_math(k))
      benchmark::RegisterBenchmark(
          (std::string(op_info(k).arity == 1 ? "BM_Unary/" : "BM_Binary/") + op_name(k)).c_str(),
          BM_Math, k)
          ->ArgsProduct({{1 << 24}, {kEager, kFused}})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  for (OpKind k : all_ops())
    if (is_math(k) && op_info(k).arity == 1) {
      auto* row = benchmark::RegisterBenchmark(
                      (std::string("BM_UnaryInCache/") + op_name(k)).c_str(), BM_UnaryInCache, k)
                      ->ArgName("threads")
                      ->Arg(1)
                      ->UseRealTime();
      if (num_threads() > 1) row->Arg(num_threads());
    }
}

// A small broadcast inner dimension: a [4] bias over [4M, 4], then relu.
void BM_SmallBroadcast(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({state.range(0) / 4, 4});
  run_mode(state, [](Tensor t) { return (t + tensor({0.5f, -1.f, 2.f, 0.f})).relu(); }, x,
           2.0 * 4 * static_cast<double>(x.numel()));
}
BENCHMARK(BM_SmallBroadcast)
    ->ArgsProduct({{1 << 24}, {kEager, kFused}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_SoftmaxRows(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({state.range(0), state.range(0)});
  run_mode(state, [](Tensor t) { return t.softmax(1); }, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
BENCHMARK(BM_SoftmaxRows)
    ->ArgsProduct({{256, 512, 1024, 2048, 4096}, {kEager, kUnfused, kFused}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_LayerNormRows(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({state.range(0), 1024});
  run_mode(state, layer_norm, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
BENCHMARK(BM_LayerNormRows)
    ->ArgsProduct({{256, 1024, 4096, 16384}, {kEager, kUnfused, kFused}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// A sum over the rows of [rows, cols] (a bias's gradient), traced: chunks of
// rows into partial sums, then the partials (passes/split_column_sums.h), where
// the shape splits. Bytes: the input once.
void BM_ColumnSum(benchmark::State& state) {
  manual_seed(0);
  const Tensor x = randn({state.range(0), state.range(1)});
  auto traced = jit([](Tensor t) { return t.sum(0); }, "bench");
  traced(x);
  const bench::CoresHeld held;
  for (auto _ : state) {
    Tensor y = traced(x);
    benchmark::DoNotOptimize(y.impl());
  }
  const double bytes = 4.0 * static_cast<double>(x.numel());
  report_bytes(state, bytes, held);
  report_paired_triad(state, bytes, [&] {
    Tensor y = traced(x);
    benchmark::DoNotOptimize(y.impl());
  });
}
BENCHMARK(BM_ColumnSum)
    ->Args({256, 1024})
    ->Args({4096, 1024})
    ->Args({16384, 256})
    ->Args({4099, 33})
    ->Args({2049, 33})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// BM_UnaryInCache's roofline for the row kernels: softmax rows of 4096 and
// layer-norm rows of 1024 (BM_SoftmaxRows, BM_LayerNormRows), traced and fused,
// over 256 KiB of rows (in and out: L2) on the pool, so that memory plays no
// part. Every call is timed and the 5th percentile taken (as BM_UnaryInCache
// does: a call whose threads did not all run, or shared their core with another
// process, is slower). A call's time includes its own cost (an output from the
// caching allocator, the pool's fork and join: about BM_TinyCall's time, a few
// percent of a call here), so max_of_triad (as BM_UnaryInCache's, 8 bytes an
// element) is a little under the arithmetic's own bound.
void BM_RowsInCache(benchmark::State& state, bool softmax) {
  const int64_t cols = softmax ? 4096 : 1024;
  manual_seed(0);
  Tensor x = randn({(int64_t(1) << 15) / cols, cols});
  auto traced =
      softmax ? jit([](Tensor t) { return t.softmax(1); }, "bench") : jit(layer_norm, "bench");
  traced(x);
  std::vector<double> seconds;
  const bench::CoresHeld held;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor y = traced(x);
    benchmark::DoNotOptimize(y.impl());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  auto at = seconds.begin() + static_cast<ptrdiff_t>(seconds.size() / 20);
  std::nth_element(seconds.begin(), at, seconds.end());
  const double per_element = *at / static_cast<double>(x.numel());
  state.counters["ns_per_element"] = per_element * 1e9;
  state.counters["cycles_per_element"] = per_element * cycles_per_second();
  state.counters["cores"] = held.fraction();
  state.counters["max_of_triad"] = 8.0 / per_element / triad_for_rows();
  state.counters["max_of_probe"] = 8.0 / per_element / bench::triad_bytes_per_second();
  state.SetLabel(std::string(softmax ? "softmax rows of 4096" : "layer-norm rows of 1024") +
                 ", fused, in cache, " + std::to_string(num_threads()) + " threads");
}
BENCHMARK_CAPTURE(BM_RowsInCache, softmax, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_RowsInCache, layer_norm, false)->UseRealTime();

// MLP forward, batch 256, 784-1024-1024-10, against OpenBLAS alone for its three matmuls.
struct Mlp {
  nn::Sequential net{nn::Linear(784, 1024), nn::ReLU(), nn::Linear(1024, 1024), nn::ReLU(),
                     nn::Linear(1024, 10)};
  Tensor x;
  Mlp() {
    manual_seed(0);
    x = randn({256, 784});
  }
};

void BM_MlpForward(benchmark::State& state) {
  NoGradGuard no_grad;
  static Mlp mlp;
  run_mode(state, [](Tensor t) { return mlp.net(t); }, mlp.x, 0);
  state.counters.erase("of_triad");
  state.SetBytesProcessed(0);
  double flops = 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpForward)->ArgsProduct({{256}, {kEager, kUnfused, kFused}})->UseRealTime();

void BM_MlpMatmulsOnly(benchmark::State& state) {
  NoGradGuard no_grad;
  static Mlp mlp;
  auto params = mlp.net->parameters();
  // Weights transposed once into [in, out], as the traced plan reads them.
  Tensor w1 = params[0].t().contiguous(), w2 = params[2].t().contiguous(), w3 = params[4].t().contiguous();
  Tensor h1 = zeros({256, 1024}), h2 = zeros({256, 1024}), out = zeros({256, 10});
  auto view = [](const Tensor& t) { return dense_view(t.data_ptr<float>(), kFloat32, t.sizes()); };
  for (auto _ : state) {
    matmul_cpu(view(mlp.x), view(w1), view(h1));
    matmul_cpu(view(h1), view(w2), view(h2));
    matmul_cpu(view(h2), view(w3), view(out));
    benchmark::ClobberMemory();
  }
  state.SetLabel("openblas");
  double flops = 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpMatmulsOnly)->Arg(256)->UseRealTime();

// Overhead of calling a cached traced function: 4 elements, 3 ops.
void BM_TinyCall(benchmark::State& state) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f});
  auto f = jit([](Tensor t) { return (t * 2 + 1).relu(); }, "tiny");
  f(x);
  for (auto _ : state) {
    Tensor y = f(x);
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetLabel("traced, cache hit");
}
BENCHMARK(BM_TinyCall);

void BM_TinyEager(benchmark::State& state) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f});
  for (auto _ : state) {
    Tensor y = (x * 2 + 1).relu();
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetLabel("eager");
}
BENCHMARK(BM_TinyEager);

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, register_table_benchmarks);
}
