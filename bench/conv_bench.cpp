// conv2d (frontend/nn_conv.cpp: im2col windows from movement ops, then one
// GEMM per image and group, or traced on the CPU the direct form, a fused sum
// over each window) forward, and forward plus the three gradients, eagerly,
// traced without fusion and traced fused (the form KILN_CONV=auto picks for the
// shape, then each form forced), each against a roofline measured in the same
// run:
//
//   GEMM floor    matmul_cpu alone on the conv's own products, best of several
//                 runs, each product the faster of libxsmm's kernels where
//                 matmul_cpu takes them and OpenBLAS alone (KILN_SMALL_GEMM=0
//                 makes both OpenBLAS): forward W [O, K] x P [K, H'W'] per image
//                 (K = C kH kW); the backward adds dY [O, H'W'] x P^T (the
//                 weight gradient) and W^T x dY (the patch gradient). Each
//                 product counts the faster of one GEMM per image and one tall
//                 GEMM over the batch (M or N = N H'W'), whichever layout Kiln
//                 picks. A grouped conv counts its flops at the rate of one
//                 large square product instead (its groups' own products are
//                 too small to be a floor)
//   memory floor  the traffic no algorithm avoids at the triad bandwidth
//                 (bench/bandwidth.h), 4 bytes a float: the forward reads x and
//                 W and writes y; the backward reads dY, x and W again and
//                 writes dx, dW and db. The im2col patch matrix is not counted:
//                 it is one algorithm's traffic, not the conv's
//
// Counters: roofline_ratio = max(GEMM floor, memory floor) / the achieved time
// (1 = at the roofline); cpu_roofline_ratio, the same in the calling thread's
// CPU time, floors and run alike: with KILN_NUM_THREADS=1 all the work runs on
// that thread, and on a loaded machine this ratio stays put while the wall
// clock's does not (other processes' time slices fall outside both sides of
// it); gemm_ratio and mem_ratio, each floor alone over the achieved time;
// GFLOP/s achieved (the mean time) and blas_GFLOP/s (the GEMM floor's rate); on
// traced rows, speedup = the eager row's time / this row's, from this run
// (absent when the eager row was filtered out; with repetitions it uses the
// last eager one, so compare the medians' times).
//
// Both sides of every ratio are a best, since other processes only ever slow a
// run down: the achieved time is the best chunk of the timed loop (chunks of at
// least 1 ms of iterations, each chunk's mean), and the floors are measured
// afresh by each run, before and after its timed loop, each product the best
// of its runs (the triad, which runs by the wall clock, the best of all its
// passes in the process). So one unlucky floor measurement no longer decides a
// row; run it several times and read each ratio's spread (bench/conv_ratios.py
// runs builds in turn and summarises them).
//
//   bench_conv --benchmark_min_time=0.2
//   bench_conv --benchmark_filter='digits' --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <string>
#include <utility>

#include <kiln/kiln.h>

#include "bench/bandwidth.h"
#include "codegen/cpu_backend.h"
#include "frontend/settings.h"
#include "runtime/blas.h"
#include "runtime/small_gemm.h"
#include "runtime/storage.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

// input [n, c, h, w], weight [o, c / groups, k, k], stride 1, padding pad.
struct ConvShape {
  const char* name;
  int64_t n, c, h, w, o, k, pad, groups = 1;
  int64_t oh() const { return h + 2 * pad - k + 1; }
  int64_t ow() const { return w + 2 * pad - k + 1; }
  int64_t rows() const { return c / groups * k * k; }  // K of the GEMM
  int64_t cols() const { return oh() * ow(); }         // N of the GEMM, per image
  int64_t og() const { return o / groups; }            // M of the GEMM
  std::string str() const {
    auto s = [](int64_t v) { return std::to_string(v); };
    return "[" + s(n) + "," + s(c) + "," + s(h) + "," + s(w) + "]x[" + s(o) + "," + s(c / groups) + "," +
           s(k) + "," + s(k) + "] pad " + s(pad) + (groups > 1 ? " groups " + s(groups) : "");
  }
};

const ConvShape kShapes[] = {
    {"digits_conv1", 64, 1, 8, 8, 16, 3, 1},   // examples/digits_cnn.cpp, first layer
    {"digits_conv2", 64, 16, 4, 4, 32, 3, 1},  // and second, after 2x2 pooling
    {"mid_64ch_32px", 32, 64, 32, 32, 64, 3, 1},
    {"rgb_5x5_32px", 32, 3, 32, 32, 32, 5, 0},
    {"depthwise_64ch_32px", 32, 64, 32, 32, 64, 3, 1, 64},  // MobileNet's 3x3 depthwise
};

enum Pass { kForward = 0, kTrain = 1 };
// Traced fused rows: the form KILN_CONV's auto picks for the shape, or each form.
enum Mode { kEager = 0, kUnfused = 1, kFused = 2, kFusedIm2col = 3, kFusedDirect = 4 };
const char* pass_name(int p) {
  return p == kForward ? "forward" : "forward_backward";
}
const char* mode_name(int m) {
  return m == kEager ? "eager" : m == kUnfused ? "unfused" : m == kFused ? "fused"
       : m == kFusedIm2col ? "fused, im2col" : "fused, direct";
}

double gemm_flops(const ConvShape& s, int pass) {
  const double f = 2.0 * double(s.n) * double(s.o) * double(s.rows()) * double(s.cols());
  return pass == kForward ? f : 3 * f;
}

// The traffic no conv algorithm avoids, in bytes (4 a float): the forward
// reads x and W and writes y; the backward reads dY, x again (for dW) and W
// again (for dx), and writes dx, dW and db. (Until the sixteenth session this
// floor counted the im2col patch matrix's write and read as well. That made it
// a floor of one algorithm, not of the conv: a direct kernel that never forms
// the patches read above 1, up to 7.5 for the depthwise forward.)
double compulsory_bytes(const ConvShape& s, int pass) {
  const double x = double(s.n * s.c * s.h * s.w), y = double(s.n * s.o * s.cols()),
               w = double(s.o * s.rows()), b = double(s.o);
  const double forward = x + w + y;
  const double backward = y + x + w + x + w + b;
  return 4 * (pass == kForward ? forward : forward + backward);
}

// The calling thread's CPU time, in seconds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Seconds, by the wall clock and in the calling thread's CPU time.
struct Seconds {
  double wall = 0, cpu = 0;
};
Seconds operator+(Seconds a, Seconds b) {
  return {a.wall + b.wall, a.cpu + b.cpu};
}
Seconds min(Seconds a, Seconds b) {
  return {std::min(a.wall, b.wall), std::min(a.cpu, b.cpu)};
}

// Best time of `f` over at least 5 runs and 0.1 s, after one warm-up run (on a
// shared machine other processes only ever slow a run down), by each clock.
template <class F>
Seconds best_seconds(F f) {
  f();
  Seconds best{1e30, 1e30};
  double total = 0;
  for (int rep = 0; rep < 5 || total < 0.1; ++rep) {
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    f();
    const double c = thread_cpu_seconds() - c0;
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    best = min(best, {t, c});
    total += t;
  }
  return best;
}

View view(const Tensor& t) {
  return dense_view(t.data_ptr<float>(), kFloat32, t.sizes());
}

// matmul_cpu alone on out = a @ b for dense operands of these shapes: the best
// of its runs, with its small-product kernels (libxsmm) and without (OpenBLAS
// alone), whichever is faster.
Seconds product_seconds(const Shape& a, const Shape& b, const Shape& out) {
  manual_seed(1);
  Tensor ta = randn(a), tb = randn(b), to = zeros(out);
  const bool small = small_gemm_enabled();
  const Seconds with = best_seconds([&] { matmul_cpu(view(ta), view(tb), view(to)); });
  set_small_gemm_enabled(false);
  const Seconds without = best_seconds([&] { matmul_cpu(view(ta), view(tb), view(to)); });
  set_small_gemm_enabled(small);
  return min(with, without);
}

// The GEMM floor: each of the conv's products the faster of two ways, one GEMM
// per image (as the im2col layout [N, K, H'W'] gives) or one tall GEMM over the
// whole batch (the layout [N H'W', K]).
// Grouped: the conv's flops at the rate of one large square product (512^3).
// Each group's own products are too small to be a floor: a depthwise group's
// forward is a [1, 9] x [9, N H'W'] product, whose time is mostly the call's,
// and 64 of them read 1.2x slower than Kiln's whole depthwise kernel.
Seconds gemm_floor_seconds(const ConvShape& s, int pass) {
  if (s.groups > 1) {
    constexpr int64_t kSquare = 512;
    const Seconds big = product_seconds({kSquare, kSquare}, {kSquare, kSquare}, {kSquare, kSquare});
    const double scale = gemm_flops(s, pass) / (2.0 * kSquare * kSquare * kSquare);
    return {big.wall * scale, big.cpu * scale};
  }
  const int64_t n = s.n, o = s.og(), kk = s.rows(), cols = s.cols(), all = n * cols;
  // y = W P
  Seconds t = min(product_seconds({o, kk}, {n, kk, cols}, {n, o, cols}),
                  product_seconds({all, kk}, {kk, o}, {all, o}));
  if (pass == kTrain) {
    // dW = dY P^T
    t = t + min(product_seconds({n, o, cols}, {n, cols, kk}, {n, o, kk}),
                product_seconds({o, all}, {all, kk}, {o, kk}));
    // dP = W^T dY
    t = t + min(product_seconds({kk, o}, {n, o, cols}, {n, kk, cols}),
                product_seconds({all, o}, {o, kk}, {all, kk}));
  }
  const double g = double(s.groups);
  return {t.wall * g, t.cpu * g};
}

// Seconds per eager iteration, by shape and pass, for the traced rows' speedup.
std::map<std::string, double> g_eager_seconds;

void BM_Conv2d(benchmark::State& state, ConvShape s, int pass) {
  const int mode = static_cast<int>(state.range(0));
  manual_seed(0);
  const int64_t pad = s.pad;
  Tensor x = randn({s.n, s.c, s.h, s.w}), w = randn({s.o, s.c / s.groups, s.k, s.k}) * 0.1,
         b = randn({s.o});
  Tensor dy = randn({s.n, s.o, s.oh(), s.ow()});
  if (pass == kTrain) {
    x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
  }
  // Forward: the weight and bias captured (parameters of the trace).
  const int64_t groups = s.groups;
  auto forward = [&](Tensor in) { return conv2d(in, w, b, 1, pad, 1, groups); };
  // Forward and backward: the gradients for x, w and b, given dy.
  auto train = [pad, groups](Tensor in, Tensor weight, Tensor bias, Tensor grad) {
    return autograd::grad({conv2d(in, weight, bias, 1, pad, 1, groups)}, {in, weight, bias},
                          {grad});
  };
  auto traced_forward = jit(forward, "conv_forward");
  auto traced_train = jit(train, "conv_train");
  traced_forward.set_fusion(mode != kUnfused);
  traced_train.set_fusion(mode != kUnfused);
  struct ConvScope {  // the form the traced rows compile, for this benchmark only
    ConvAlgo saved = settings().conv;
    explicit ConvScope(int mode) {
      if (mode == kFusedIm2col) settings().conv = ConvAlgo::Im2col;
      if (mode == kFusedDirect) settings().conv = ConvAlgo::Direct;
    }
    ~ConvScope() { settings().conv = saved; }
  } conv_scope(mode);
  auto run = [&] {
    if (pass == kForward) {
      Tensor y = mode == kEager ? forward(x) : traced_forward(x);
      benchmark::DoNotOptimize(y.impl());
    } else {
      std::vector<Tensor> g = mode == kEager ? train(x, w, b, dy) : traced_train(x, w, b, dy);
      benchmark::DoNotOptimize(g[0].impl());
    }
  };
  run();  // compile outside the timed loop
  const auto w0 = Clock::now();
  run();
  const double warm = std::chrono::duration<double>(Clock::now() - w0).count();
  // The floors, measured now: the best of a measurement before the timed loop
  // and one after it.
  static bench::TriadBuffers triad_buffers(1 << 24);
  auto floors_now = [&] {
    const Seconds gemm = gemm_floor_seconds(s, pass);
    return std::pair{gemm, bench::measure_triad_bytes_per_second(triad_buffers, 10)};
  };
  auto [floors, triad] = floors_now();

  // Chunks of at least 1 ms of iterations; the best chunk's mean counts.
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(1e-3 / std::max(warm, 1e-9)) + 1);
  Seconds best{1e30, 1e30};
  int64_t in_chunk = 0;
  auto t0 = Clock::now(), chunk_t0 = t0;
  const double c0 = thread_cpu_seconds();
  double chunk_c0 = c0;
  for (auto _ : state) {
    run();
    if (++in_chunk == chunk) {
      const auto t = Clock::now();
      const double c = thread_cpu_seconds();
      best = min(best, {std::chrono::duration<double>(t - chunk_t0).count() / double(chunk),
                        (c - chunk_c0) / double(chunk)});
      in_chunk = 0, chunk_t0 = t, chunk_c0 = c;
    }
  }
  const double iterations = static_cast<double>(state.iterations());
  const double t = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
  if (best.wall > 1e29) best = {t, (thread_cpu_seconds() - c0) / iterations};  // under one chunk

  const auto [floors_after, triad_after] = floors_now();  // the timer stopped with the loop
  floors = min(floors, floors_after);
  const double floor_gemm = floors.wall;
  // The triad runs by the wall clock, so under load it reads low: the best seen
  // in this process counts.
  static double best_triad = bench::triad_bytes_per_second();
  best_triad = std::max({best_triad, triad, triad_after});
  const double floor_mem = compulsory_bytes(s, pass) / best_triad;

  state.SetLabel(s.str() + ", " + mode_name(mode));
  state.counters["roofline_ratio"] = std::max(floor_gemm, floor_mem) / best.wall;
  state.counters["cpu_roofline_ratio"] = std::max(floors.cpu, floor_mem) / best.cpu;
  state.counters["cpu_floor_us"] = 1e6 * std::max(floors.cpu, floor_mem);
  state.counters["cpu_best_us"] = 1e6 * best.cpu;
  state.counters["gemm_ratio"] = floor_gemm / best.wall;
  state.counters["mem_ratio"] = floor_mem / best.wall;
  state.counters["GFLOP/s"] = gemm_flops(s, pass) / t / 1e9;
  state.counters["blas_GFLOP/s"] = gemm_flops(s, pass) / floor_gemm / 1e9;
  const std::string key = std::string(s.name) + "/" + pass_name(pass);
  if (mode == kEager)
    g_eager_seconds[key] = t;
  else if (g_eager_seconds.count(key))
    state.counters["speedup"] = g_eager_seconds[key] / t;
}

void register_conv_benchmarks() {
  for (const ConvShape& s : kShapes)
    for (int pass : {kForward, kTrain})
      benchmark::RegisterBenchmark(
          (std::string("BM_Conv2d/") + s.name + "/" + pass_name(pass)).c_str(), BM_Conv2d, s, pass)
          ->Arg(kEager)
          ->Arg(kUnfused)
          ->Arg(kFused)
          ->Arg(kFusedIm2col)
          ->Arg(kFusedDirect)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, register_conv_benchmarks);
}
