// CPU against GPU. The course's matmul experiments (square N=2000; 10000x1024
// times the transpose of 5000x1024) on OpenBLAS and on cuBLAS through Kiln,
// with and without the host<->device transfers; a sweep of N for the size at
// which the GPU starts to win, printed as a table and written as CSV; fused vs
// unfused vs eager on the GPU for the JIT's workloads, read against the
// device's own device-to-device copy bandwidth measured in the same run; and
// Kiln's matmul against one cuBLAS call on raw device buffers; and training
// steps on the GPU, eager vs traced (the course's two-layer net; a
// 784-1024-1024-10 MLP with Adam, as bench_train and tools/gpu/torch_reference.py).
//
// Without a GPU the CPU cases and the CPU column of the sweep still run; the
// GPU cases are not registered and the sweep's GPU columns say "no device".
// A GPU case that throws is reported as an error and the others still run.
//   bench_gpu [--sweep_max=4096] [--sweep_csv=gpu_breakeven.csv] [benchmark flags]
//   bench_gpu --first_call   times only the first call of the traced MLP Adam
//                            step on the GPU (trace, compile, run) and prints
//                            its kernels and how many came from the disk cache
//                            (KILN_CACHE_DIR): run twice with one fresh cache
//                            directory for the cold and the warm first call.
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "bench/steady_code.h"
#include "runtime/allocator.h"
#include "runtime/binary_io.h"
#include "runtime/blas.h"
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"

using namespace kiln;

namespace {

bool gpu() {
  return cuda::available();
}
void sync() {
  cuda::synchronize(0);
}

Tensor on(const Tensor& t, bool cuda_device) {
  return cuda_device ? t.cuda() : t;
}

std::string fmt_ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// ---- the course's matmuls ----

enum Where { kCpu = 0, kGpu = 1, kGpuWithTransfers = 2, kCpuFreshMemory = 3 };
const char* where_name(int w) {
  return w == kCpu              ? "cpu (OpenBLAS via kiln)"
         : w == kGpu            ? "gpu (cuBLAS via kiln)"
         : w == kCpuFreshMemory ? "cpu, result in fresh memory (first touch)"
                                : "gpu + transfers";
}

// Seconds per CPU call with the allocator's cache warm, by case, for the
// fresh-memory row's first-touch cost.
std::map<std::string, double> g_cpu_seconds;

// c = a @ b (or a @ b^T); a and b start on the host for kCpu and kGpuWithTransfers,
// on the device for kGpu. With transfers, each iteration copies a and b in and c out.
void matmul_case(benchmark::State& state, int64_t n, int64_t k, int64_t m, bool b_transposed) {
  int w = static_cast<int>(state.range(0));
  manual_seed(0);
  Tensor a = randn({n, k}), b = b_transposed ? randn({m, k}) : randn({k, m});
  if (w == kGpu) {
    a = a.cuda();
    b = b.cuda();
  }
  auto once = [&] {
    Tensor x = w == kGpuWithTransfers ? a.cuda() : a;
    Tensor y = w == kGpuWithTransfers ? b.cuda() : b;
    Tensor c = x.matmul(b_transposed ? y.t() : y);
    if (w == kGpuWithTransfers) c = c.cpu();
    if (w == kGpu) sync();
    return c;
  };
  once();  // compile and warm up outside the timed loop
  const auto t0 = std::chrono::steady_clock::now();
  double paused = 0;
  for (auto _ : state) {
    if (w == kCpuFreshMemory) {
      // Every cached block back to the system: the result is mapped afresh and
      // its pages first-touched by the product, as in a process's first call.
      state.PauseTiming();
      const auto p0 = std::chrono::steady_clock::now();
      cpu_empty_cache();
      paused += std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(once().impl());
  }
  const double seconds =
      (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - paused) /
      static_cast<double>(state.iterations());
  const std::string key = std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(m);
  if (w == kCpu) g_cpu_seconds[key] = seconds;
  if (w == kCpuFreshMemory && g_cpu_seconds.count(key)) {
    // What first-touching the result's pages adds, per MiB of result.
    const double mib = 4.0 * static_cast<double>(n * m) / (1 << 20);
    state.counters["first_touch_ms"] = (seconds - g_cpu_seconds[key]) * 1e3;
    state.counters["first_touch_us_per_MiB"] = (seconds - g_cpu_seconds[key]) * 1e6 / mib;
  }
  state.SetLabel(where_name(w));
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * n * k * m * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_MatmulSquare2000(benchmark::State& state) {
  matmul_case(state, 2000, 2000, 2000, false);
}
void BM_Matmul10000x1024_by_5000x1024T(benchmark::State& state) {
  matmul_case(state, 10000, 1024, 5000, true);
}

// Kiln's eager matmul (op cache, plan, allocation) against one cuBLAS call on raw buffers.
void BM_MatmulKilnVsCublas(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool direct = state.range(1) == 1;
  manual_seed(0);
  Tensor a = randn({n, n}).cuda(), b = randn({n, n}).cuda(), c = zeros({n, n}).cuda();
  View va = dense_view(a.data_ptr<float>(), kFloat32, {n, n});
  View vb = dense_view(b.data_ptr<float>(), kFloat32, {n, n});
  View vc = dense_view(c.data_ptr<float>(), kFloat32, {n, n});
  (void)a.matmul(b);
  matmul_cuda(va, vb, vc, 0);
  sync();
  for (auto _ : state) {
    if (direct) {
      matmul_cuda(va, vb, vc, 0);
    } else {
      benchmark::DoNotOptimize(a.matmul(b).impl());
    }
    sync();
  }
  state.SetLabel(direct ? "cublas directly (runtime/cublas.h)" : "kiln eager matmul");
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * n * n * n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// ---- the JIT's workloads on the GPU (as in bench/jit_bench.cpp) ----

Tensor chain(const Tensor& x) {
  return ((x * 1.5f + 2) - x * x).abs().clamp(0.5, 4) * 0.25f;
}
Tensor chain_transcendental(const Tensor& x) {
  return ((x * 1.5f + 2).tanh().exp() - x.sigmoid()).relu() / (x * x + 1);
}
Tensor layer_norm(const Tensor& x) {
  Tensor mu = x.mean(1, true);
  Tensor d = x - mu;
  return d / ((d * d).mean(1, true) + 1e-5).sqrt();
}

// Device-to-device copy bandwidth (bytes/s, read + write), best of several 256 MiB copies.
double d2d_bytes_per_second() {
  static double bw = [] {
    const size_t bytes = size_t(256) << 20;
    void* src = cuda_alloc(bytes, 0);
    void* dst = cuda_alloc(bytes, 0);
    cuda::memset_zero(src, bytes, 0);
    double best = 0;
    cuda::Event start(0), stop(0);
    for (int i = 0; i < 10; ++i) {
      start.record();
      cuda::copy_device(dst, src, bytes, 0);
      stop.record();
      best = std::max(best, 2.0 * static_cast<double>(bytes) / (stop.ms_since(start) * 1e-3));
    }
    cuda_free(src, bytes, 0);
    cuda_free(dst, bytes, 0);
    return best;
  }();
  return bw;
}

enum Mode { kEager = 0, kUnfused = 1, kFused = 2 };
const char* mode_name(int m) {
  return m == kEager ? "eager" : m == kUnfused ? "unfused" : "fused";
}

void gpu_modes(benchmark::State& state, std::function<Tensor(Tensor)> body, const Tensor& x,
               double bytes) {
  int mode = static_cast<int>(state.range(0));
  auto traced = jit(body, "gpu_bench");
  traced.set_fusion(mode == kFused);
  auto once = [&] { return mode == kEager ? body(x) : traced(x); };
  once();
  sync();
  for (auto _ : state) {
    benchmark::DoNotOptimize(once().impl());
    sync();
  }
  state.SetLabel(mode_name(mode));
  if (bytes > 0) {
    state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
    state.counters["of_d2d"] =
        benchmark::Counter(bytes * static_cast<double>(state.iterations()) / d2d_bytes_per_second(),
                           benchmark::Counter::kIsRate);
  }
}

void BM_GpuDeviceCopy(benchmark::State& state) {
  const size_t bytes = size_t(256) << 20;
  void* src = cuda_alloc(bytes, 0);
  void* dst = cuda_alloc(bytes, 0);
  for (auto _ : state) {
    cuda::copy_device(dst, src, bytes, 0);
    sync();
  }
  state.SetBytesProcessed(static_cast<int64_t>(2 * bytes) * state.iterations());
  cuda_free(src, bytes, 0);
  cuda_free(dst, bytes, 0);
}

Tensor gpu_randn(Shape s) {
  manual_seed(0);
  return randn(std::move(s)).cuda();
}

void BM_GpuChain8(benchmark::State& state) {
  Tensor x = gpu_randn({1 << 24});
  gpu_modes(state, chain, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
void BM_GpuChain8Transcendental(benchmark::State& state) {
  Tensor x = gpu_randn({1 << 24});
  gpu_modes(state, chain_transcendental, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
void BM_GpuSoftmaxRows(benchmark::State& state) {
  Tensor x = gpu_randn({4096, 4096});
  gpu_modes(
      state, [](Tensor t) { return t.softmax(1); }, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
void BM_GpuLayerNormRows(benchmark::State& state) {
  Tensor x = gpu_randn({4096, 1024});
  gpu_modes(state, layer_norm, x, 2.0 * 4 * static_cast<double>(x.numel()));
}
// MLP forward, batch 256, 784-1024-1024-10: bias + ReLU fuse into cuBLASLt calls when fused.
void BM_GpuMlpForward(benchmark::State& state) {
  NoGradGuard no_grad;
  Tensor x = gpu_randn({256, 784});
  Tensor w1 = gpu_randn({784, 1024}) * 0.03, b1 = gpu_randn({1024}) * 0.1;
  Tensor w2 = gpu_randn({1024, 1024}) * 0.03, b2 = gpu_randn({1024}) * 0.1;
  Tensor w3 = gpu_randn({1024, 10}) * 0.03, b3 = gpu_randn({10}) * 0.1;
  gpu_modes(
      state,
      [=](Tensor t) { return ((t.matmul(w1) + b1).relu().matmul(w2) + b2).relu().matmul(w3) + b3; },
      x, 0);
  double flops = 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// ---- training steps on the GPU, eager vs traced (as bench/train_bench.cpp) ----

enum StepMode { kStepEager = 0, kStepTraced = 1 };

// Seconds per eager step of each workload, for its traced row's "speedup".
std::map<std::string, double> g_eager_step_seconds;

// Times step_fn (eager) or traced_fn; each call is synchronised with the device.
template <class Step, class Traced>
void step_case(benchmark::State& state, const std::string& name, Step& step, Traced& traced,
               double flops) {
  const bool use_jit = state.range(0) == kStepTraced;
  auto once = [&] {
    Tensor l = use_jit ? traced() : step();
    sync();
    return l;
  };
  for (int i = 0; i < 3; ++i) once();  // compile (and retrace once), warm the caches
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(once().impl());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.SetLabel(use_jit ? "traced" : "eager");
  if (flops > 0)
    state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate);
  if (!use_jit)
    g_eager_step_seconds[name] = seconds;
  else if (g_eager_step_seconds.count(name))
    state.counters["speedup"] = g_eager_step_seconds[name] / seconds;
}

// The course's two-layer net (64 x 1000 -> 100 -> 10, squared error, plain SGD
// written out), its data and weights on the GPU.
void BM_GpuTwoLayerStep(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({64, 1000}).cuda(), y = randn({64, 10}).cuda();
  Tensor w1 = randn({1000, 100}).cuda().requires_grad_();
  Tensor w2 = randn({100, 10}).cuda().requires_grad_();
  const double lr = 1e-6;
  auto body = [&](Tensor in, Tensor target) {
    Tensor loss = (in.mm(w1).clamp_min(0).mm(w2) - target).pow(2).sum();
    loss.backward();
    NoGradGuard no_grad;
    w1 -= lr * w1.grad();
    w2 -= lr * w2.grad();
    w1.grad().zero_();
    w2.grad().zero_();
    return loss;
  };
  auto traced_body = jit(body, "gpu_two_layer_step");
  auto step = [&] { return body(x, y); };
  auto traced = [&] { return traced_body(x, y); };
  step_case(state, "two_layer", step, traced, 3 * 2.0 * 64 * (1000 * 100 + 100 * 10));
}

// The MLP with Adam (batch 256, 784-1024-1024-10, cross-entropy, lr 1e-3) on the GPU.
struct GpuMlpAdam {
  Tensor x, labels;
  nn::Sequential model{nn::Linear(784, 1024), nn::ReLU(), nn::Linear(1024, 1024), nn::ReLU(),
                       nn::Linear(1024, 10)};
  std::unique_ptr<optim::Adam> opt;
  GpuMlpAdam() {
    manual_seed(0);
    x = randn({256, 784}).cuda();
    labels = (rand({256}) * 10).to(kInt64).cuda();
    model->to(kCUDA);
    opt = std::make_unique<optim::Adam>(model->parameters(), 1e-3);
  }
  Tensor step(const Tensor& in, const Tensor& target) {
    opt->zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(in), target);
    loss.backward();
    opt->step();
    return loss;
  }
  static double flops() { return 3 * 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10); }
};

void BM_GpuMlpAdamStep(benchmark::State& state) {
  GpuMlpAdam m;
  auto traced_body =
      jit([&](Tensor in, Tensor target) { return m.step(in, target); }, "gpu_mlp_adam_step");
  auto step = [&] { return m.step(m.x, m.labels); };
  auto traced = [&] { return traced_body(m.x, m.labels); };
  step_case(state, "mlp_adam", step, traced, GpuMlpAdam::flops());
}

// The first call of the traced MLP Adam step: trace, compile (NVRTC, or the
// disk cache when KILN_CACHE_DIR already holds its kernels) and run, then the
// second call for comparison. One line, for tools/gpu/run.sh.
int first_call() {
  if (!gpu()) {
    std::cout << "first_call: skipped: no CUDA device (" << cuda::unavailable_reason() << ")\n";
    return 0;
  }
  GpuMlpAdam m;
  sync();
  auto traced =
      jit([&](Tensor in, Tensor target) { return m.step(in, target); }, "gpu_mlp_adam_step");
  auto ms_of = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor l = traced(m.x, m.labels);
    sync();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const double first = ms_of();
  const double second = ms_of();
  const TraceStats& s = traced.stats();
  int64_t compiled = 0;  // NVRTC compiles in this process (not from the disk cache)
  for (const TraceStats::KernelCompile& k : s.kernel_compile_ms) compiled += k.compiled;
  std::cout << "first_call: " << fmt_ms(first) << " ms (trace " << fmt_ms(s.trace_ms)
            << " ms, compile " << fmt_ms(s.compile_ms) << " ms); second call " << fmt_ms(second)
            << " ms; plan steps " << s.kernels << ", kernels compiled here " << compiled
            << ", from the disk cache " << s.kernels_from_disk << "; cache_dir "
            << (cache_dir().empty() ? "(off)" : cache_dir()) << "\n";
  return 0;
}

// Runs a GPU case; a kiln::Error (or any exception) becomes the case's error
// row instead of ending the program, so one failing case leaves the others.
void guarded(benchmark::State& state, void (*fn)(benchmark::State&)) {
  try {
    fn(state);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

benchmark::internal::Benchmark* register_gpu(const char* name, void (*fn)(benchmark::State&)) {
  return benchmark::RegisterBenchmark(name, [fn](benchmark::State& s) { guarded(s, fn); });
}

void register_gpu_benchmarks() {
  auto ms = benchmark::kMillisecond;
  register_gpu("BM_MatmulSquare2000", BM_MatmulSquare2000)
      ->Arg(kGpu)
      ->Arg(kGpuWithTransfers)
      ->UseRealTime()
      ->Unit(ms);
  register_gpu("BM_Matmul10000x1024_by_5000x1024T", BM_Matmul10000x1024_by_5000x1024T)
      ->Arg(kGpu)
      ->Arg(kGpuWithTransfers)
      ->UseRealTime()
      ->Unit(ms);
  register_gpu("BM_MatmulKilnVsCublas", BM_MatmulKilnVsCublas)
      ->ArgsProduct({{256, 2000}, {0, 1}})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  register_gpu("BM_GpuDeviceCopy", BM_GpuDeviceCopy)->UseRealTime()->Unit(ms);
  using Fn = void (*)(benchmark::State&);
  const std::pair<const char*, Fn> workloads[] = {
      {"BM_GpuChain8", BM_GpuChain8},
      {"BM_GpuChain8Transcendental", BM_GpuChain8Transcendental},
      {"BM_GpuSoftmaxRows", BM_GpuSoftmaxRows},
      {"BM_GpuLayerNormRows", BM_GpuLayerNormRows},
      {"BM_GpuMlpForward", BM_GpuMlpForward}};
  for (auto [name, fn] : workloads)
    register_gpu(name, fn)
        ->DenseRange(kEager, kFused)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  register_gpu("BM_GpuTwoLayerStep", BM_GpuTwoLayerStep)
      ->Arg(kStepEager)
      ->Arg(kStepTraced)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  register_gpu("BM_GpuMlpAdamStep", BM_GpuMlpAdamStep)
      ->Arg(kStepEager)
      ->Arg(kStepTraced)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

void register_cpu_benchmarks() {
  auto ms = benchmark::kMillisecond;
  benchmark::RegisterBenchmark("BM_MatmulSquare2000", BM_MatmulSquare2000)
      ->Arg(kCpu)
      ->UseRealTime()
      ->Unit(ms);
  benchmark::RegisterBenchmark("BM_Matmul10000x1024_by_5000x1024T",
                               BM_Matmul10000x1024_by_5000x1024T)
      ->Arg(kCpu)
      ->Arg(kCpuFreshMemory)
      ->UseRealTime()
      ->Unit(ms);
}

// ---- the break-even sweep ----

// Best wall time (ms) of f over a few runs (more for quick ones).
double best_ms(const std::function<void()>& f) {
  f();  // warm-up: compiles, allocates, first-touches
  double best = 1e300, total = 0;
  for (int r = 0; r < 20 && (r < 3 || total < 300); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ms);
    total += ms;
  }
  return best;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

void breakeven_sweep(int64_t max_n, const std::string& csv_path) {
  const bool has_gpu = gpu() && cublas_available();
  const std::string none = "no device";
  std::ostringstream csv, table;
  csv << "n,cpu_ms,gpu_ms,gpu_with_transfers_ms\n";
  table << "\nmatmul break-even (N x N @ N x N, float32; best wall time in ms)\n"
        << "     N     cpu (OpenBLAS)   gpu (cuBLAS)   gpu + transfers   faster\n";
  int64_t breakeven = -1, breakeven_transfers = -1;
  for (int64_t n = 64; n <= max_n; n *= 2) {
    manual_seed(0);
    Tensor a = randn({n, n}), b = randn({n, n});
    double cpu_ms = best_ms([&] { benchmark::DoNotOptimize(a.matmul(b).impl()); });
    std::string g = none, gt = none, faster = "cpu";
    if (has_gpu) {
      try {
        Tensor ga = a.cuda(), gb = b.cuda();
        double gpu_ms = best_ms([&] {
          benchmark::DoNotOptimize(ga.matmul(gb).impl());
          sync();
        });
        double gpu_t_ms =
            best_ms([&] { benchmark::DoNotOptimize(a.cuda().matmul(b.cuda()).cpu().impl()); });
        g = fmt(gpu_ms);
        gt = fmt(gpu_t_ms);
        if (gpu_ms < cpu_ms && breakeven < 0) breakeven = n;
        if (gpu_t_ms < cpu_ms && breakeven_transfers < 0) breakeven_transfers = n;
        faster = gpu_t_ms < cpu_ms ? "gpu (even with transfers)"
                 : gpu_ms < cpu_ms ? "gpu (data on device)"
                                   : "cpu";
      } catch (const std::exception& e) {
        std::cout << "sweep: the GPU at N = " << n << " failed: " << e.what() << "\n";
        g = gt = "error";
        faster = "-";
      }
    } else {
      faster = "-";
    }
    csv << n << "," << fmt(cpu_ms) << "," << g << "," << gt << "\n";
    char line[160];
    std::snprintf(line, sizeof(line), "%6lld   %14s   %12s   %15s   %s\n",
                  static_cast<long long>(n), fmt(cpu_ms).c_str(), g.c_str(), gt.c_str(),
                  faster.c_str());
    table << line;
  }
  if (has_gpu) {
    table << "GPU faster from N = "
          << (breakeven > 0 ? std::to_string(breakeven) : "never (in range)")
          << " with the data on the device; from N = "
          << (breakeven_transfers > 0 ? std::to_string(breakeven_transfers) : "never (in range)")
          << " counting the transfers.\n";
  } else {
    table << "GPU columns: no device (" << cuda::unavailable_reason() << ")\n";
  }
  std::cout << table.str();
  io::write_file_durable(csv_path, csv.str());
  std::cout << "written: " << csv_path << "\n";
}

// Removes --name=value from argv and returns value (or `fallback`).
std::string take_flag(int* argc, char** argv, const std::string& name,
                      const std::string& fallback) {
  std::string prefix = "--" + name + "=";
  std::string value = fallback;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0)
      value = argv[i] + prefix.size();
    else
      argv[out++] = argv[i];
  }
  *argc = out;
  return value;
}

// Removes --name from argv; true when it was there.
bool take_switch(int* argc, char** argv, const std::string& name) {
  const std::string flag = "--" + name;
  bool found = false;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (flag == argv[i])
      found = true;
    else
      argv[out++] = argv[i];
  }
  *argc = out;
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t sweep_max = std::stoll(take_flag(&argc, argv, "sweep_max", "4096"));
  std::string sweep_csv = take_flag(&argc, argv, "sweep_csv", "gpu_breakeven.csv");
  if (take_switch(&argc, argv, "first_call")) {
    try {
      return first_call();
    } catch (const std::exception& e) {
      std::cout << "first_call: failed: " << e.what() << "\n";
      return 1;
    }
  }
  blas_init();
  benchmark::AddCustomContext("openblas", blas_info());
  bench::time_steady_code();
  if (gpu()) {
    benchmark::AddCustomContext("cuda_device", cuda::device_info(0).str());
    benchmark::AddCustomContext("cublas", cublas_info());
    try {
      benchmark::AddCustomContext("d2d_GBps", std::to_string(d2d_bytes_per_second() / 1e9));
    } catch (const std::exception& e) {
      std::cout << "device copy bandwidth: failed: " << e.what() << "\n";
    }
  } else {
    std::cout << "GPU benchmarks skipped: no CUDA device (" << cuda::unavailable_reason() << ")\n";
    benchmark::AddCustomContext("cuda_device", "none");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_cpu_benchmarks();
  if (gpu()) register_gpu_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (sweep_max >= 64) breakeven_sweep(sweep_max, sweep_csv);
  return 0;
}
