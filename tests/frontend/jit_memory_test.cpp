// JIT code is freed with its plan: an evicted signature or a destroyed traced
// function gives its kernels back, so memory stays flat however many shapes a
// long-running program sees. A bounded-growth check on the loaded-kernel count
// (exact) and on the process's resident memory (coarse), not a timing.
#include "test_util.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "codegen/cpu_backend.h"
#include "frontend/settings.h"
#include "runtime/llvm_jit.h"

using namespace kiln;

namespace {

// Resident memory in MiB, after handing freed heap back to the system.
double rss_mib() {
  ::malloc_trim(0);
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  REQUIRE(f != nullptr);
  REQUIRE(std::fscanf(f, "%ld %ld", &pages, &resident) == 2);
  std::fclose(f);
  return double(resident) * double(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// Sanitizer runtimes keep freed memory in quarantine: resident memory says
// nothing there, and only the exact kernel count is checked.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssMeaningful = false;
#else
constexpr bool kRssMeaningful = true;
#endif

// A kernel cache of its own, so every shape is really compiled and loaded and the
// user's cache is left alone.
struct TempCacheDir {
  std::string saved = cache_dir();
  std::string path =
      (std::filesystem::temp_directory_path() / ("kiln-jit-memory-" + std::to_string(::getpid())))
          .string();
  TempCacheDir() { set_cache_dir(path); }
  ~TempCacheDir() {
    set_cache_dir(saved);
    std::filesystem::remove_all(path);
  }
};

constexpr double kMaxGrowthMiB = 8;  // the leak this guards against was ~42 MB per 1,000

}  // namespace

TEST_CASE(
    "JIT memory stays flat over 1,000 shape changes and 1,000 created and destroyed functions") {
  TempCacheDir cache;
  LlvmJit& jit_ = LlvmJit::get();
  auto f = jit([](Tensor x) { return (x * 2 + 1).exp().sum(); }, "shapes");
  f.set_cache_size(8);
  // Warm up: caches, pools and the allocator reach their steady state.
  for (int64_t n = 1; n <= 100; ++n) (void)f(ones({n}));
  wait_for_background_compiles();  // new sizes compile there while their calls run eagerly
  const size_t loaded_warm = jit_.loaded_objects();
  const double rss_warm = rss_mib();
  for (int64_t n = 101; n <= 1100; ++n) (void)f(ones({n}));
  wait_for_background_compiles();
  const size_t loaded_after = jit_.loaded_objects();
  const double rss_shapes = rss_mib();
  MESSAGE("1,000 shape changes (cache of 8): RSS "
          << rss_warm << " -> " << rss_shapes << " MiB, loaded kernels " << loaded_warm << " -> "
          << loaded_after);
  CHECK(f.stats().misses == 1100);
  CHECK(f.stats().evictions == 1100 - 8);
  // 8 plans' kernels, before and after (never more; one of another test's may have gone).
  CHECK(loaded_after <= loaded_warm);
  if (kRssMeaningful) CHECK(rss_shapes - rss_warm < kMaxGrowthMiB);

  // Functions created, called once and destroyed: nothing of theirs stays loaded.
  for (int i = 0; i < 1000; ++i) {
    auto g = jit([](Tensor x) { return (x - 3).relu().sum(); }, "short_lived");
    (void)g(ones({5, 7}));
  }
  const size_t loaded_fns = jit_.loaded_objects();
  const double rss_fns = rss_mib();
  MESSAGE("1,000 created and destroyed functions: RSS "
          << rss_shapes << " -> " << rss_fns << " MiB, loaded kernels " << loaded_after << " -> "
          << loaded_fns);
  CHECK(loaded_fns <= loaded_after);
  if (kRssMeaningful) CHECK(rss_fns - rss_shapes < kMaxGrowthMiB);
}

TEST_CASE(
    "a traced function whose shapes keep changing keeps only its recent miss reasons and kernel "
    "records") {
  Settings saved = settings();
  settings().background_compile = false;  // every miss compiles before its call returns
  auto f = jit([](Tensor x) { return (x * 2 + 1).exp().sum(); }, "always_missing");
  f.set_cache_size(1);
  constexpr int kCalls = 400;  // the soak's shared function grew by ~100 bytes per miss, forever
  for (int i = 0; i < kCalls; ++i) (void)f(ones({3 + i % 2}));
  settings() = saved;
  const TraceStats& s = f.stats();
  CHECK(s.misses == kCalls);
  CHECK(s.miss_reasons.size() == TraceStats::kRecent);
  CHECK(s.miss_reasons.back() == "arg 0: shape [3] -> [4]");
  CHECK(s.kernel_compile_ms.size() <= TraceStats::kRecentKernels);
  CHECK(s.str().find("CPU kernels: " + std::to_string(s.kernels_compiled) + " compiled") !=
        std::string::npos);
}

TEST_CASE(
    "kernels kept for templates are the CPU backend's, by content: a function gone leaves them to "
    "the next") {
  wait_for_background_compiles();  // nothing of other tests' still compiling
  const KernelTemplateCache& cache = cpu_kernel_templates();
  const size_t before = cache.families();
  // Ops of their own, so no other test's kernels are in the cache already.
  auto body = [](Tensor x) { return ((x - 2).sin() * x).cos().sum(0); };
  {
    auto g = jit(body, "templated");
    g.mark_dynamic(0, 0);  // its kernels are remembered to make templates
    for (int64_t n : {9, 7, 5}) (void)g(randn({n, 3}));
  }
  // Kept after g is gone (bounded by the cache's bytes, not by g's life): another
  // function with the same kernels finds them.
  const size_t after = cache.families();
  CHECK(after > before);
  {
    auto h = jit(body, "templated_again");
    h.mark_dynamic(0, 0);
    for (int64_t n : {9, 7, 5}) (void)h(randn({n, 3}));
  }
  CHECK(cache.families() == after);
  CHECK(cache.bytes() <= cache.max_bytes());
}
