// The code that benchmarks of steady-state speed time.
#pragma once

#include <cstdlib>

#include <benchmark/benchmark.h>

#include "frontend/settings.h"

namespace kiln::bench {

/// By default a traced plan's kernels run a quick tier until the background
/// compile thread swaps their optimised code in (KILN_TIER, runtime/llvm_jit.h),
/// so a long-running program runs the optimised code. Benchmarks of steady calls
/// compile it before their first call returns (KILN_TIER=1), so that no timed
/// iteration runs the quick tier, unless KILN_TIER says otherwise; the context
/// line `kiln_tier` says which. bench_compile times the tiers themselves.
inline void time_steady_code() {
  if (!std::getenv("KILN_TIER")) settings().tier = CodeTier::Optimised;
  benchmark::AddCustomContext("kiln_tier", code_tier_name(settings().tier));
}

}  // namespace kiln::bench
