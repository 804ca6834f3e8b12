// Real-model sizes for the ops that used to be composites (#36): an embedding
// of GPT-2's size forward and backward, a gather from a 4096 x 32000 table, a
// cumsum of 1M, a sort of 1M, a top-5 over 64 rows of GPT-2's vocabulary and
// causal attention (8 heads of 64, T = 1024 and 4096) forward and backward;
// each eager and traced. bench/torch_compare.py runs the same workloads in
// PyTorch and prints the ratios.
//
// Each row also reports resident memory, in MiB (counters), from VmRSS and
// VmHWM (/proc/self/status; VmHWM reset at each mark, which on Linux also
// resets getrusage's ru_maxrss):
//   base_MiB     VmRSS when the row starts, before its tensors are made (Kiln's
//                cached blocks and glibc's free heap returned first)
//   peak_MiB     the peak above base over the whole row: making the inputs,
//                the warm-up calls (tracing, compiling) and the timed calls;
//                base + peak is the process's peak RSS since the row started
//   inputs_MiB   the peak above base while the inputs are made
//   inputs_cached_MiB  what Kiln's allocator held free once they were made
//                (returned before the calls, as glibc's free heap)
//   calls_MiB    the peak of the calls, warm-up included, above VmRSS once the
//                inputs exist and free memory went back: what the workload
//                needs on top of its inputs
//   cached_MiB   the blocks Kiln's allocator holds free at the end of the row
// Run one row per process (torch_compare.py does), so that no earlier row's
// leftovers shape a row's numbers:
//
//   bench_scale --benchmark_min_time=0.5
//   bench_scale --benchmark_filter='^BM_Gather/1/'      (one row: gather, traced)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include <kiln/kiln.h>

#include "bench/bandwidth.h"
#include "bench/memory.h"
#include "runtime/allocator.h"

using namespace kiln;

namespace {

enum Mode { kEager = 0, kTraced = 1 };

// Resident memory of one run of a row (see the header comment): made before
// the row's tensors.
class RowMemory {
 public:
  RowMemory() {
    bench::release_free_memory();
    base_ = bench::status_kib("VmRSS");
    reset_ = bench::reset_peak();
  }
  // The inputs exist; the calls start. What making them left free (a caching
  // allocator's blocks) goes back first: the calls start from what they read.
  void inputs_made() {
    inputs_peak_ = bench::status_kib("VmHWM");
    inputs_cached_ = cpu_allocator_stats().bytes_cached;
    bench::release_free_memory();
    inputs_ = bench::status_kib("VmRSS");
    reset_ = bench::reset_peak() && reset_;
  }
  void report(benchmark::State& state) const {
    const long calls = bench::status_kib("VmHWM");
    auto mib = [](double kib) { return kib / 1024.0; };
    state.counters["base_MiB"] = mib(base_);
    state.counters["peak_MiB"] = mib(std::max(inputs_peak_, calls) - base_);
    state.counters["inputs_MiB"] = mib(inputs_peak_ - base_);
    state.counters["inputs_cached_MiB"] = mib(inputs_cached_ / 1024.0);
    state.counters["calls_MiB"] = mib(calls - inputs_);
    state.counters["cached_MiB"] = mib(cpu_allocator_stats().bytes_cached / 1024.0);
    // 0 where VmHWM could not be reset: then the peaks count from an earlier one.
    state.counters["peak_reset"] = reset_ ? 1 : 0;
  }

 private:
  long base_ = 0, inputs_peak_ = 0, inputs_ = 0;
  size_t inputs_cached_ = 0;
  bool reset_ = false;
};

// fn(args...) eagerly or through jit, timed per call; the first calls compile.
template <class F, class... Args>
void run(benchmark::State& state, RowMemory& memory, const char* name, F fn, Args... args) {
  memory.inputs_made();
  auto traced = jit(fn, name);
  const bool use_jit = state.range(0) == kTraced;
  for (int i = 0; i < 2; ++i) use_jit ? traced(args...) : fn(args...);
  for (auto _ : state) {
    auto out = use_jit ? traced(args...) : fn(args...);
    benchmark::DoNotOptimize(&out);
  }
  memory.report(state);
  state.SetLabel(use_jit ? "traced" : "eager");
}

// GPT-2's token embedding: 50,257 x 768, 8,192 tokens; the loss weights each
// row, the gradient (a scatter_add of 8,192 rows) lands in the table's .grad.
void BM_EmbeddingStep(benchmark::State& state) {
  RowMemory memory;
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
  run(state, memory, "embedding_step", step, tokens);
}
BENCHMARK(BM_EmbeddingStep)
    ->Arg(kEager)
    ->Arg(kTraced)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Eight picks per row of a 4,096 x 32,000 table (a vocabulary's logits).
void BM_Gather(benchmark::State& state) {
  RowMemory memory;
  manual_seed(0);
  Tensor x = randn({4096, 32000}), idx = randint(0, 32000, {4096, 8});
  run(
      state, memory, "gather", [](Tensor a, Tensor i) { return a.gather(1, i); }, x, idx);
}
BENCHMARK(BM_Gather)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cumsum(benchmark::State& state) {
  RowMemory memory;
  manual_seed(0);
  Tensor x = randn({1 << 20});
  run(
      state, memory, "cumsum", [](Tensor a) { return a.cumsum(0); }, x);
}
BENCHMARK(BM_Cumsum)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Sort(benchmark::State& state) {
  RowMemory memory;
  manual_seed(0);
  Tensor x = randn({1 << 20});
  run(
      state, memory, "sort", [](Tensor a) { return std::get<0>(a.sort()); }, x);
}
BENCHMARK(BM_Sort)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMillisecond)->UseRealTime();

// A sampler's top-5 over 64 rows of GPT-2's vocabulary.
void BM_Topk(benchmark::State& state) {
  RowMemory memory;
  manual_seed(0);
  Tensor x = randn({64, 50257});
  run(
      state, memory, "topk", [](Tensor a) { return std::get<0>(a.topk(5, 1)); }, x);
}
BENCHMARK(BM_Topk)->Arg(kEager)->Arg(kTraced)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Causal self-attention, 8 heads of 64, forward and backward (the gradients of
// q, k and v): the streaming op, no T x T matrix.
void BM_Attention(benchmark::State& state) {
  RowMemory memory;
  manual_seed(0);
  const int64_t T = state.range(1);
  Tensor q = randn({1, 8, T, 64}).requires_grad_(), k = randn({1, 8, T, 64}).requires_grad_(),
         v = randn({1, 8, T, 64}).requires_grad_();
  auto step = [](Tensor a, Tensor b, Tensor c) {
    Tensor out = nn::functional::scaled_dot_product_attention(a, b, c, {}, 0.0, true);
    auto g = autograd::grad({out.sum()}, {a, b, c});
    return std::make_tuple(out, g[0], g[1], g[2]);
  };
  run(state, memory, "attention", step, q, k, v);
  state.SetLabel(std::string(state.range(0) == kTraced ? "traced" : "eager") +
                 " T=" + std::to_string(T));
}
BENCHMARK(BM_Attention)
    ->Args({kEager, 1024})
    ->Args({kTraced, 1024})
    ->Args({kEager, 4096})
    ->Args({kTraced, 4096})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, [] {});
}
