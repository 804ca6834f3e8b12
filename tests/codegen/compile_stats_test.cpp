// The compile figures a traced function's stats show (codegen/compile_stats.h),
// summed from compile reports.
#include <doctest/doctest.h>

#include "codegen/compile.h"
#include "codegen/compile_stats.h"

using namespace kiln;

namespace {

// A report of two CPU kernels: one LLVM compiled (10 ms), one reused (1 ms).
CompileReport two_kernels() {
  CompileReport r;
  r.kernels.resize(2);
  r.kernels[0].name = "k0_map_exp";
  r.kernels[1].name = "k1_reduction_sum";
  r.artifacts.resize(2);
  r.artifacts[0].compile_ms = 10;
  r.artifacts[1].compile_ms = 1;
  r.artifacts[1].reused = true;
  r.kernels_reused = 1;
  r.kernel_times.optimize_ms = 6;
  return r;
}

}  // namespace

TEST_CASE("CompileStats sums the reports of a function's compiles") {
  CompileStats s;
  CHECK(s.kernels_str().empty());
  s.add(two_kernels(), 3, 40);
  s.add(two_kernels(), 3, 2);
  CHECK(s.compile_ms == 42);
  CHECK(s.kernels == 6);
  CHECK(s.kernels_reused == 2);
  CHECK(s.kernels_compiled == 2);
  CHECK(s.phases.optimize_ms == 12);
  CHECK(s.kernel_phases == s.phases.str());
  REQUIRE(s.kernel_compile_ms.size() == 4);
  CHECK(s.kernel_compile_ms[0].name == "k0_map_exp");
  CHECK(s.kernel_compile_ms[0].compiled);
  CHECK(!s.kernel_compile_ms[1].compiled);
  CHECK(s.str() == "compile 42 ms, kernels 6 (2 reused, 0 from the disk cache)");
  CHECK(s.kernels_str().find(
            "CPU kernels: 2 compiled (median 10 ms, slowest k0_map_exp 10 ms); ") == 0);
}

TEST_CASE("CompileStats keeps the most recent kernels' times only") {
  CompileStats s;
  for (size_t i = 0; i < CompileStats::kRecentKernels; ++i) s.add(two_kernels(), 2, 1);
  CHECK(s.kernel_compile_ms.size() == CompileStats::kRecentKernels);
  CHECK(s.kernels_compiled == static_cast<int64_t>(CompileStats::kRecentKernels));
  CHECK(s.kernel_compile_ms.back().name == "k1_reduction_sum");
}

TEST_CASE("keep_recent drops the oldest records beyond its limit") {
  std::vector<int> v;
  for (int i = 0; i < 5; ++i) keep_recent(v, i, 3);
  CHECK(v == std::vector<int>{2, 3, 4});
  keep_recent(v, 5, 1);
  CHECK(v == std::vector<int>{5});
}
