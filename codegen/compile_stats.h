// The figures of the plans one traced function compiled, summed from their
// compile reports (codegen/compile.h): what its stats show of compiling
// (TraceStats in frontend/jit.h takes them as they are).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_info.h"

namespace kiln {

struct CompileReport;

/// Appends `item` to `v`, dropping the oldest beyond `limit` (at least 1): the
/// recent records of stats a long run keeps flat.
template <class T>
void keep_recent(std::vector<T>& v, T item, size_t limit) {
  if (v.size() >= limit) v.erase(v.begin(), v.end() - std::ptrdiff_t(limit - 1));
  v.push_back(std::move(item));
}

/// Plans compiled and their kernels, summed over a function's compiles.
struct CompileStats {
  double compile_ms = 0;
  /// Plan steps compiled (kernels, BLAS calls, collectives); of the CPU kernels,
  /// how many came from the disk cache and how many shared the code of an
  /// identical kernel already loaded (another group, another batch size) or of
  /// a kernel of the same plan that differs only in sizes and constants.
  int64_t kernels = 0, kernels_from_disk = 0, kernels_reused = 0;
  /// CPU kernels LLVM compiled here (not from the disk cache, not another kernel's code).
  int64_t kernels_compiled = 0;
  /// CPU kernels run as templates: their dynamic sizes, or the sizes and constants
  /// in which kernels of one plan differ (KILN_SHARE_SIZES), are run-time
  /// parameters, and the code is shared (kernels_reused counts those already loaded).
  int64_t kernels_templated = 0;
  /// CPU kernels that write an output with streaming (non-temporal) stores
  /// (codegen/llvm_codegen.h: streams_stores).
  int64_t kernels_streaming = 0;
  /// Per CPU kernel compiled or reused, in compile order: its name, milliseconds,
  /// and whether LLVM compiled it here (not the disk cache, not another kernel's
  /// code). The most recent kRecentKernels (the counters above count them all).
  struct KernelCompile {
    std::string name;
    double ms = 0;
    bool compiled = false;
  };
  std::vector<KernelCompile> kernel_compile_ms;
  static constexpr size_t kRecentKernels = 256;
  /// "lower 1.0 ms, LLVM IR 3.4 ms, optimise 67.4 ms, machine code 107.2 ms, load 2.4 ms":
  /// the CPU kernels' compile time by phase, summed (threads compile in parallel).
  std::string kernel_phases;
  CompileTimes phases;  // kernel_phases, as numbers

  /// Adds one compiled plan: its report, its number of steps and the milliseconds it took.
  void add(const CompileReport& report, size_t steps, double ms);
  /// "compile 40 ms, kernels 12 (3 reused, 0 from the disk cache)".
  std::string str() const;
  /// "CPU kernels: 5 compiled (median 20 ms, slowest k3_... 31 ms); lower ...", or
  /// "" when no CPU kernel was compiled or reused.
  std::string kernels_str() const;
};

}  // namespace kiln
