// Real-model sizes for the ops that used to be composites (#36): an embedding
// of GPT-2's size forward and backward, a gather from a 4096 x 32000 table, a
// cumsum of 1M, a sort of 1M and a top-5 over 64 rows of GPT-2's vocabulary;
// each eager and traced. bench/torch_compare.py runs the same workloads in
// PyTorch and prints the ratios.
//
//   bench_scale --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include "bench/bandwidth.h"

using namespace kiln;

namespace {

enum Mode { kEager = 0, kTraced = 1 };

// fn(args...) eagerly or through jit, timed per call; the first calls compile.
template <class F, class... Args>
void run(benchmark::State& state, const char* name, F fn, Args... args) {
  auto traced = jit(fn, name);
  const bool use_jit = state.range(0) == kTraced;
  for (int i = 0; i < 2; ++i) use_jit ? traced(args...) : fn(args...);
  for (auto _ : state) {
    auto out = use_jit ? traced(args...) : fn(args...);
    benchmark::DoNotOptimize(&out);
  }
  state.SetLabel(use_jit ? "traced" : "eager");
}

// GPT-2's token embedding: 50,257 x 768, 8,192 tokens; the loss weights each
// row, the gradient (a scatter_add of 8,192 rows) lands in the table's .grad.
void BM_EmbeddingStep(benchmark::State& state) {
  manual_seed(0);
  Tensor table = (randn({50257, 768}) * 0.02).requires_grad_();
  Tensor tokens = randint(0, 50257, {8192});
  Tensor weight = randn({8192, 768});
  auto step = [table, weight](Tensor idx) mutable {
    Tensor loss = (nn::functional::embedding(idx, table) * weight).sum();
    loss.backward();
    NoGradGuard no_grad;
    table.grad().zero_();
    return loss;
  };
  run(state, "embedding_step", step, tokens);
}
BENCHMARK(BM_EmbeddingStep)
    ->Arg(kEager)
    ->Arg(kTraced)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Eight picks per row of a 4,096 x 32,000 table (a vocabulary's logits).
void BM_Gather(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({4096, 32000}), idx = randint(0, 32000, {4096, 8});
  run(
      state, "gather", [](Tensor a, Tensor i) { return a.gather(1, i); }, x, idx);
}
BENCHMARK(BM_Gather)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cumsum(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({1 << 20});
  run(
      state, "cumsum", [](Tensor a) { return a.cumsum(0); }, x);
}
BENCHMARK(BM_Cumsum)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Sort(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({1 << 20});
  run(
      state, "sort", [](Tensor a) { return std::get<0>(a.sort()); }, x);
}
BENCHMARK(BM_Sort)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMillisecond)->UseRealTime();

// A sampler's top-5 over 64 rows of GPT-2's vocabulary.
void BM_Topk(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({64, 50257});
  run(
      state, "topk", [](Tensor a) { return std::get<0>(a.topk(5, 1)); }, x);
}
BENCHMARK(BM_Topk)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, [] {});
}
