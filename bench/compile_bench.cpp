// Compile cost, and what the compile-time choices cost at run time.
//   BM_FirstCall      the first call of a traced MLP training step (784-256-128-10,
//                     ReLU/Tanh, cross-entropy, Adam): cold (no disk cache, no kernel
//                     already loaded), warm disk cache, per LLVM pipeline, with
//                     kernels that differ only in sizes each compiled on its own
//                     (KILN_SHARE_SIZES=0), and in tiers (the default) or with the
//                     optimised code only (KILN_TIER=1).
//   BM_FirstCallFreshProcess  the same first call in a fresh process (a child
//                     process per measurement, which reports its own timing):
//                     cold, LLVM's start-up included, and with a warm disk cache;
//                     in tiers (the default) and with the optimised code only.
//   BM_NewBatchSizes  after a first call at batch 64, the calls at 50, 37 and 128
//                     together (counter "of_first": their cost / the first call's),
//                     with the batch dimension static (KILN_DYNAMIC=0), becoming
//                     dynamic at the second size and compiled before the call
//                     returns (KILN_BACKGROUND=0) or in the background while the
//                     calls run eagerly (counter "ready_of_first": until the last
//                     background compile is done / the first call), or marked with
//                     mark_dynamic (counter "first_ms": the first call, probe included);
//                     counter "of_plain_eager": their cost / the same three calls of
//                     the body run eagerly, not traced (measured in the same iteration).
//                     A size's first call runs eagerly untraced unless the case sets
//                     KILN_COMPILE_AFTER=0 (compile at the first call, as before); the
//                     "each twice" cases call every new size twice in a row (so it
//                     compiles), timing the six calls.
//   BM_CompilePerKernel  the MLP step compiled cold: each kernel's compile time by
//                     phase (counters "<kernel>/<phase>_ms"; bench/plot.py draws them).
//   BM_OneKernel      a one-kernel function compiled cold, per pipeline.
//   BM_KernelSpeed    the compiled (optimised) kernels' run time per pipeline, for the JIT's
//                     workloads (fast must be no slower than full, shared templates
//                     no slower than kernels compiled each for its sizes).
// Every figure that matters is a ratio of two cases of the same run.
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "codegen/compile.h"
#include "codegen/cpu_backend.h"
#include "frontend/settings.h"
#include "runtime/blas.h"
#include "runtime/thread_pool.h"

using namespace kiln;

namespace {

// What a case compiles with: the LLVM pipeline, the disk cache, kernel sharing
// across functions (reuse) and within a plan (share_sizes), and the code tier
// (the optimised code only unless a case times the tiers).
struct CompileSetup {
  explicit CompileSetup(LlvmOpt opt, std::string cache = "", bool reuse = false,
                        bool share_sizes = true, CodeTier tier = CodeTier::Optimised)
      : saved_(settings()) {
    settings().llvm_opt = opt;
    settings().tier = tier;
    settings().reuse_kernels = reuse;
    settings().share_sizes = share_sizes;
    set_cache_dir(std::move(cache));
  }
  ~CompileSetup() { settings() = saved_; }

 private:
  Settings saved_;
};

LlvmOpt opt_arg(const benchmark::State& state, int i) {
  return state.range(i) == 0 ? LlvmOpt::Fast : LlvmOpt::Full;
}

// The MLP training step of issue #14, traced afresh (nothing compiled yet).
struct MlpStep {
  nn::Sequential model{nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::Tanh(),
                       nn::Linear(128, 10)};
  optim::Adam opt{model->parameters(), 1e-3};
  Tensor body(const Tensor& in, const Tensor& target) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(in), target);
    loss.backward();
    opt.step();
    return loss;
  }
  Traced<Tensor(Tensor, Tensor)> step =
      jit([this](Tensor in, Tensor target) { return body(in, target); }, "mlp_step");
};

std::pair<Tensor, Tensor> batch(int64_t n) {
  return {randn({n, 784}), (rand({n}) * 10).to(kInt64)};
}

std::string temp_cache() {
  return (std::filesystem::temp_directory_path() / "kiln_bench_compile_cache").string();
}

enum Cache { kCold = 0, kWarmDisk = 1 };

// Arg 0: cold or warm disk cache; arg 1: pipeline (0 fast, 1 full); arg 2:
// kernels that differ only in sizes share a template (1) or not (0); arg 3: in
// tiers (0, the default) or the optimised code only (1, KILN_TIER=1).
void BM_FirstCall(benchmark::State& state) {
  const bool warm = state.range(0) == kWarmDisk;
  const bool share = state.range(2) != 0;
  const CodeTier tier = state.range(3) == 0 ? CodeTier::Tiered : CodeTier::Optimised;
  const std::string dir = temp_cache();
  std::filesystem::remove_all(dir);
  CompileSetup setup(opt_arg(state, 1), warm ? dir : "", /*reuse=*/false, share, tier);
  manual_seed(0);
  auto [x, y] = batch(64);
  if (warm) {
    MlpStep().step(x, y);  // fills the disk cache (the optimised code, compiled in the background)
    wait_for_background_compiles();
  }
  int64_t kernels = 0, shared = 0;
  for (auto _ : state) {
    state.PauseTiming();
    MlpStep m;
    state.ResumeTiming();
    m.step(x, y);
    state.PauseTiming();
    wait_for_background_compiles();  // the optimised code, out of the next iteration
    state.ResumeTiming();
    kernels = m.step.stats().kernels;
    shared = m.step.stats().kernels_reused;
  }
  std::filesystem::remove_all(dir);
  state.counters["plan_steps"] = static_cast<double>(kernels);
  state.counters["shared"] = static_cast<double>(shared);
  state.SetLabel(std::string(warm ? "warm disk cache" : "cold") + ", " +
                 llvm_opt_name(opt_arg(state, 1)) + (share ? "" : ", no shared templates") +
                 (tier == CodeTier::Tiered ? ", tiered" : ", optimised only"));
}
BENCHMARK(BM_FirstCall)
    ->Args({kCold, 0, 1, 0})
    ->Args({kCold, 0, 1, 1})
    ->Args({kCold, 0, 0, 0})
    ->Args({kCold, 1, 1, 0})
    ->Args({kWarmDisk, 0, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// CPU time of every thread of this process so far, user and system.
double process_cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
  };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// The child of BM_FirstCallFreshProcess (`bench_compile --first-call-child=DIR`,
// DIR "" for no disk cache): one first call of the MLP step in this fresh
// process, LLVM's start-up included. Prints "first_call_ms <ms> cpu_ms <ms>
// since_main_ms <ms> trace_ms <ms>" (cpu_ms: the CPU time of all threads during
// the call; since_main_ms: from main() to the end of the first call). Then
// waits for the optimised kernels compiled in the background (CodeTier), which
// go into DIR's disk cache for the warm children.
int first_call_child(const std::string& dir, std::chrono::steady_clock::time_point main_start) {
  CompileSetup setup(LlvmOpt::Fast, dir, /*reuse=*/false, /*share_sizes=*/true, settings().tier);
  manual_seed(0);
  // The inputs without eager compiled kernels, which would start LLVM first.
  settings().eager_kernels = false;
  auto [x, y] = batch(64);
  settings().eager_kernels = true;
  MlpStep m;
  const double cpu0 = process_cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  m.step(x, y);
  const double first = ms_since(t0);
  std::printf("first_call_ms %.3f cpu_ms %.3f since_main_ms %.3f trace_ms %.3f\n", first,
              process_cpu_ms() - cpu0, ms_since(main_start), m.step.stats().trace_ms);
  std::fflush(stdout);
  wait_for_background_compiles();
  return 0;
}

// Runs this program as `--first-call-child=dir` (with KILN_WARM_UP=0 unless
// `warm_up`, and KILN_TIER=1 when `optimised_only`) and returns what it printed.
std::string run_child(const std::string& dir, bool warm_up = true, bool optimised_only = false) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string flag = "--first-call-child=" + dir;
  char* argv[] = {const_cast<char*>(self.c_str()), flag.data(), nullptr};
  pid_t pid = 0;
  std::vector<char*> env;
  std::string no_warm_up = "KILN_WARM_UP=0", tier_1 = "KILN_TIER=1";
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("KILN_WARM_UP=") && !(optimised_only && v.starts_with("KILN_TIER=")))
      env.push_back(*e);
  }
  if (!warm_up) env.push_back(no_warm_up.data());
  if (optimised_only) env.push_back(tier_1.data());
  env.push_back(nullptr);
  const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("the first-call child failed: " + out);
  return out;
}

double field(const std::string& out, const std::string& name) {
  const size_t at = out.find(name + " ");
  if (at == std::string::npos)
    throw std::runtime_error("the child did not print " + name + ": " + out);
  return std::stod(out.substr(at + name.size() + 1));
}

// The first call in a fresh process (a child process per iteration, whose own
// timing of the call is the iteration's time): cold (arg 0 = kCold: no disk
// cache, LLVM's start-up included) or with a warm disk cache (kWarmDisk: the
// cache filled by a child before the timing); arg 1: LLVM's start-up begun on
// another thread while the first call traces (1, the default) or not
// (KILN_WARM_UP=0); arg 2: in tiers (0, the default) or the optimised code only
// (1, KILN_TIER=1). Counters: cpu_ms (the CPU time of
// all the child's threads during the call), since_main_ms (from the child's
// main() to the end of its first call) and trace_ms.
void BM_FirstCallFreshProcess(benchmark::State& state) {
  const bool warm = state.range(0) == kWarmDisk;
  const bool warm_up = state.range(1) != 0;
  const bool optimised_only = state.range(2) != 0;
  const std::string dir = warm ? temp_cache() : "";
  if (warm) {
    std::filesystem::remove_all(dir);
    run_child(dir);
  }
  double cpu = 0, since_main = 0, trace = 0;
  for (auto _ : state) {
    const std::string out = run_child(dir, warm_up, optimised_only);
    state.SetIterationTime(field(out, "first_call_ms") / 1e3);
    cpu += field(out, "cpu_ms");
    since_main += field(out, "since_main_ms");
    trace += field(out, "trace_ms");
  }
  if (warm) std::filesystem::remove_all(dir);
  const double n = static_cast<double>(state.iterations());
  state.counters["cpu_ms"] = cpu / n;
  state.counters["since_main_ms"] = since_main / n;
  state.counters["trace_ms"] = trace / n;
  state.SetLabel(std::string("fresh process, ") + (warm ? "warm disk cache" : "cold") +
                 (warm_up ? "" : ", KILN_WARM_UP=0") + (optimised_only ? ", KILN_TIER=1" : ""));
}
BENCHMARK(BM_FirstCallFreshProcess)
    ->Args({kCold, 1, 0})
    ->Args({kCold, 1, 1})
    ->Args({kCold, 0, 0})
    ->Args({kWarmDisk, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(5);

enum BatchDim { kStatic, kAutomatic, kAutomaticBackground, kMarked };

// Arg 0: how the batch dimension is treated; arg 1: in tiers (0, the default) or
// the optimised code only (1, KILN_TIER=1); arg 2: settings().compile_after (1,
// the default: a size's first call runs eagerly); arg 3: calls at each new size.
void BM_NewBatchSizes(benchmark::State& state) {
  const CodeTier tier = state.range(1) == 0 ? CodeTier::Tiered : CodeTier::Optimised;
  CompileSetup setup(LlvmOpt::Fast, "", /*reuse=*/true, /*share_sizes=*/true, tier);
  const int64_t how = state.range(0);
  settings().auto_dynamic = how != kStatic;
  settings().background_compile = how == kAutomaticBackground;
  settings().compile_after = static_cast<int>(state.range(2));
  const int64_t repeats = state.range(3);
  state.SetLabel(std::string(how == kStatic      ? "static"
                             : how == kAutomatic ? "automatic dynamic, compiled before the call returns"
                             : how == kMarked    ? "mark_dynamic"
                                                 : "automatic dynamic, compiled in the background") +
                 (tier == CodeTier::Tiered ? ", tiered" : ", optimised only") +
                 (state.range(2) == 0 ? ", KILN_COMPILE_AFTER=0" : "") +
                 (repeats > 1 ? ", each twice" : ""));
  manual_seed(0);
  auto first = batch(64);
  std::vector<std::pair<Tensor, Tensor>> later = {batch(50), batch(37), batch(128)};
  double first_ms = 0, later_ms = 0, ready_ms = 0, plain_ms = 0;
  int64_t reused = 0, kernels = 0, eager = 0;
  for (auto _ : state) {
    state.PauseTiming();
    MlpStep m;
    if (how == kMarked) {
      m.step.mark_dynamic(0, 0);
      m.step.mark_dynamic(1, 0);
    }
    auto t0 = std::chrono::steady_clock::now();
    m.step(first.first, first.second);
    first_ms += ms_since(t0);
    const int64_t before = m.step.stats().kernels;
    state.ResumeTiming();
    auto t1 = std::chrono::steady_clock::now();
    for (auto& b : later)
      for (int64_t r = 0; r < repeats; ++r) m.step(b.first, b.second);
    later_ms += ms_since(t1);
    state.PauseTiming();
    wait_for_background_compiles();
    ready_ms += ms_since(t1);
    state.ResumeTiming();
    reused = m.step.stats().kernels_reused;
    kernels = m.step.stats().kernels - before;
    eager = m.step.stats().calls_while_compiling;
    state.PauseTiming();
    MlpStep plain;
    plain.body(first.first, first.second);
    auto t2 = std::chrono::steady_clock::now();
    for (auto& b : later)
      for (int64_t r = 0; r < repeats; ++r) plain.body(b.first, b.second);
    plain_ms += ms_since(t2);
    state.ResumeTiming();
  }
  state.counters["of_plain_eager"] = later_ms / plain_ms;
  state.counters["of_first"] = later_ms / first_ms;
  state.counters["ready_of_first"] = ready_ms / first_ms;
  state.counters["first_ms"] = first_ms / static_cast<double>(state.iterations());
  state.counters["new_steps"] = static_cast<double>(kernels);
  state.counters["reused"] = static_cast<double>(reused);
  state.counters["ran_eagerly"] = static_cast<double>(eager);
}
BENCHMARK(BM_NewBatchSizes)
    ->Args({kStatic, 0, 0, 1})
    ->Args({kAutomatic, 0, 0, 1})
    ->Args({kAutomaticBackground, 0, 1, 1})
    ->Args({kAutomaticBackground, 0, 0, 1})
    ->Args({kAutomaticBackground, 1, 0, 1})
    ->Args({kAutomaticBackground, 0, 1, 2})
    ->Args({kAutomaticBackground, 0, 0, 2})
    ->Args({kMarked, 0, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Compile cost per kernel: the MLP training step's graph compiled cold (no disk
// cache, no kernel shared with another plan or within this one), every CPU
// kernel's milliseconds by phase as counters "<kernel>/<phase>_ms" (lower,
// irgen, optimize, machine_code, load), averaged over the iterations;
// bench/plot.py draws them as one stacked bar per kernel.
void BM_CompilePerKernel(benchmark::State& state) {
  CompileSetup setup(LlvmOpt::Fast, "", /*reuse=*/false, /*share_sizes=*/false);
  manual_seed(0);
  auto [x, y] = batch(64);
  const Graph g = MlpStep().step.graph(x, y, /*optimized=*/false);
  const CompileOptions opts = compile_options();
  std::map<std::string, CompileTimes> per_kernel;
  for (auto _ : state) {
    CompileReport report;
    benchmark::DoNotOptimize(compile_graph(g, opts, &report).get());
    for (size_t i = 0; i < report.kernels.size(); ++i)
      if (report.artifacts[i].compile_ms > 0)
        per_kernel[report.kernels[i].name] += report.artifacts[i].times;
  }
  const double n = static_cast<double>(state.iterations());
  for (const auto& [name, t] : per_kernel) {
    state.counters[name + "/lower_ms"] = t.lower_ms / n;
    state.counters[name + "/irgen_ms"] = t.irgen_ms / n;
    state.counters[name + "/optimize_ms"] = t.optimize_ms / n;
    state.counters[name + "/machine_code_ms"] = t.machine_code_ms / n;
    state.counters[name + "/load_ms"] = t.load_ms / n;
  }
  state.counters["kernels"] = static_cast<double>(per_kernel.size());
  state.SetLabel("MLP step, cold, " + std::string(llvm_opt_name(LlvmOpt::Fast)));
}
BENCHMARK(BM_CompilePerKernel)->Unit(benchmark::kMillisecond)->UseRealTime();

// Arg 0: pipeline.
void BM_OneKernel(benchmark::State& state) {
  CompileSetup setup(opt_arg(state, 0));
  Tensor x = randn({1024, 256});
  double per_kernel = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto f = jit([](Tensor v) { return ((v * 1.5f + 2).tanh().exp() - v.sigmoid()).relu(); },
                 "one_kernel");
    state.ResumeTiming();
    f(x);
    per_kernel += f.stats().kernel_compile_ms.at(0).ms;
  }
  state.counters["kernel_ms"] = per_kernel / static_cast<double>(state.iterations());
  state.SetLabel(llvm_opt_name(opt_arg(state, 0)));
}
BENCHMARK(BM_OneKernel)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

Tensor chain(const Tensor& x) {
  return ((x * 1.5f + 2) - x * x).abs().clamp(0.5, 4) * 0.25f;
}
Tensor chain_transcendental(const Tensor& x) {
  return ((x * 1.5f + 2).tanh().exp() - x.sigmoid()).relu() / (x * x + 1);
}
Tensor softmax_rows(const Tensor& x) {
  return x.softmax(1);
}
Tensor bias_relu(const Tensor& x) {
  return (x + tensor({0.5f, -1.f, 2.f, 0.f})).relu();
}

enum Workload {
  kChain,
  kTranscendental,
  kSoftmax,
  kBias,
  kMlpStep,
  kMlpStepUnshared,
  kMlpStepDynamic
};
const char* workload_name(int64_t w) {
  return w == kChain             ? "chain8"
         : w == kTranscendental  ? "transcendental chain"
         : w == kSoftmax         ? "softmax rows"
         : w == kBias            ? "[4] bias over [1M,4]"
         : w == kMlpStep         ? "MLP step (batch 64)"
         : w == kMlpStepUnshared ? "MLP step (batch 64, no shared templates)"
                                 : "MLP step (batch 64, dynamic: templates)";
}

// Arg 0: workload; arg 1: pipeline. Times the compiled code only.
void BM_KernelSpeed(benchmark::State& state) {
  const int64_t w = state.range(0);
  CompileSetup setup(opt_arg(state, 1), "", /*reuse=*/false, /*share_sizes=*/w != kMlpStepUnshared);
  manual_seed(0);
  state.SetLabel(std::string(workload_name(w)) + ", " + llvm_opt_name(opt_arg(state, 1)));
  if (w == kMlpStep || w == kMlpStepUnshared || w == kMlpStepDynamic) {
    MlpStep m;
    auto [x, y] = batch(64);
    if (w == kMlpStepDynamic) {
      m.step.mark_dynamic(0, 0);
      m.step.mark_dynamic(1, 0);
    }
    // The second call compiles again (the parameters' .grad are defined now):
    // both compiles stay out of the timing.
    m.step(x, y);
    m.step(x, y);
    for (auto _ : state) benchmark::DoNotOptimize(m.step(x, y).impl());
    return;
  }
  Tensor (*body)(const Tensor&) = w == kChain            ? chain
                                  : w == kTranscendental ? chain_transcendental
                                  : w == kSoftmax        ? softmax_rows
                                                         : bias_relu;
  Tensor x = w == kSoftmax ? randn({4096, 4096})
             : w == kBias  ? randn({1 << 20, 4})
                           : randn({1 << 24});
  auto f = jit([body](Tensor v) { return body(v); }, "kernel_speed");
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x).impl());
}
BENCHMARK(BM_KernelSpeed)
    ->ArgsProduct({{kChain, kTranscendental, kSoftmax, kBias, kMlpStep, kMlpStepUnshared,
                    kMlpStepDynamic},
                   {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  const auto main_start = std::chrono::steady_clock::now();
  constexpr std::string_view kChild = "--first-call-child=";
  if (argc == 2 && std::string_view(argv[1]).starts_with(kChild))
    return first_call_child(std::string(argv[1] + kChild.size()), main_start);
  blas_init();
  benchmark::AddCustomContext("openblas", blas_info());
  benchmark::AddCustomContext("jit_target", cpu_target_description());
  benchmark::AddCustomContext("threads", std::to_string(num_threads()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
