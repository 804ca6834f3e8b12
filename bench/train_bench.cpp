// Training step time, eager vs traced (the whole step compiled to one plan),
// for the course's two-layer net, a 784-1024-1024-10 MLP with Adam, the digits
// CNN and a small transformer block (bench/models.h). The last two report
// "speedup" on their traced row: the eager row's time over the traced one's,
// both from this run (absent when the eager row was filtered out).
//
//   bench_train --benchmark_min_time=0.2
//   bench_train --benchmark_filter='Cnn|Transformer' --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <string>

#include <kiln/kiln.h>

#include "bench/models.h"
#include "codegen/cpu_backend.h"
#include "runtime/blas.h"

using namespace kiln;

namespace {

enum Mode { kEager = 0, kTraced = 1 };

void BM_TwoLayerStep(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({64, 1000}), y = randn({64, 10});
  Tensor w1 = randn({1000, 100}).requires_grad_(), w2 = randn({100, 10}).requires_grad_();
  const double lr = 1e-6;
  auto step = [&](Tensor in, Tensor target) {
    Tensor loss = (in.mm(w1).clamp_min(0).mm(w2) - target).pow(2).sum();
    loss.backward();
    NoGradGuard no_grad;
    w1 -= lr * w1.grad();
    w2 -= lr * w2.grad();
    w1.grad().zero_();
    w2.grad().zero_();
    return loss;
  };
  auto traced = jit(step, "two_layer_step");
  bool use_jit = state.range(0) == kTraced;
  for (int i = 0; i < 3; ++i) use_jit ? traced(x, y) : step(x, y);  // compile (and retrace once)
  for (auto _ : state) {
    Tensor l = use_jit ? traced(x, y) : step(x, y);
    benchmark::DoNotOptimize(l.impl());
  }
  state.SetLabel(use_jit ? "traced" : "eager");
}
BENCHMARK(BM_TwoLayerStep)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MlpAdamStep(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({256, 784});
  Tensor labels = (rand({256}) * 10).to(kInt64);
  nn::Sequential model(nn::Linear(784, 1024), nn::ReLU(), nn::Linear(1024, 1024), nn::ReLU(),
                       nn::Linear(1024, 10));
  optim::Adam opt(model->parameters(), 1e-3);
  auto step = [&](Tensor in, Tensor target) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(in), target);
    loss.backward();
    opt.step();
    return loss;
  };
  auto traced = jit(step, "mlp_adam_step");
  bool use_jit = state.range(0) == kTraced;
  for (int i = 0; i < 3; ++i) use_jit ? traced(x, labels) : step(x, labels);
  for (auto _ : state) {
    Tensor l = use_jit ? traced(x, labels) : step(x, labels);
    benchmark::DoNotOptimize(l.impl());
  }
  state.SetLabel(use_jit ? "traced" : "eager");
  double flops = 3 * 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpAdamStep)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMillisecond)->UseRealTime();

// Seconds per eager step of each model, for its traced row's "speedup".
std::map<std::string, double> g_eager_seconds;

void model_step(benchmark::State& state, std::unique_ptr<bench::ModelStep> step) {
  const bool use_jit = state.range(0) == kTraced;
  for (int i = 0; i < 3; ++i) use_jit ? step->traced() : step->eager();  // compile, warm caches
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Tensor l = use_jit ? step->traced() : step->eager();
    benchmark::DoNotOptimize(l.impl());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  state.SetLabel(use_jit ? "traced" : "eager");
  state.counters["GFLOP/s"] = step->gemm_flops() / seconds / 1e9;
  if (!use_jit)
    g_eager_seconds[step->name()] = seconds;
  else if (g_eager_seconds.count(step->name()))
    state.counters["speedup"] = g_eager_seconds[step->name()] / seconds;
}

// The digits CNN (examples/digits_cnn.cpp), batch 64, Adam.
void BM_DigitsCnnStep(benchmark::State& state) {
  model_step(state, bench::make_digits_cnn_step());
}
BENCHMARK(BM_DigitsCnnStep)
    ->Arg(kEager)
    ->Arg(kTraced)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One GPT block with causal attention, batch 16 x 32 tokens, AdamW.
void BM_TransformerStep(benchmark::State& state) {
  model_step(state, bench::make_transformer_step());
}
BENCHMARK(BM_TransformerStep)
    ->Arg(kEager)
    ->Arg(kTraced)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  blas_init();
  benchmark::AddCustomContext("openblas", blas_info());
  benchmark::AddCustomContext("jit_target", cpu_target_description());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
