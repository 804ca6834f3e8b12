// What every backend reports about the kernels it compiled: the kernel's
// description (dumps, `kiln explain`, the executor's thread split), where its
// compile time went, and its texts (kernel IR, LLVM IR, assembly, CUDA C, PTX).
// Backend-neutral: the CPU and CUDA backends and the compile driver share it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion.h"

namespace kiln {

/// What the dumps and `kiln explain` report about a kernel.
struct KernelInfo {
  std::string name;  // e.g. "k3_reduction_sum_exp"
  GroupKind kind{};
  std::vector<NodeId> nodes;         // IR nodes it computes
  std::vector<std::string> sources;  // distinct user source lines ("mlp.cpp:12")
  int64_t range = 1;                 // outer loop trip count
  int64_t grain = 1;                 // smallest chunk worth a thread
  int64_t bytes_read = 0, bytes_written = 0, flops = 0;
};

/// Where a kernel's compile time went (milliseconds): lowering to kernel IR,
/// building the LLVM IR, the optimisation pipeline, machine code, loading into
/// the JIT. A kernel reused from another plan or the disk cache spends nothing on
/// the middle three.
struct CompileTimes {
  double lower_ms = 0, irgen_ms = 0, optimize_ms = 0, machine_code_ms = 0, load_ms = 0;
  CompileTimes& operator+=(const CompileTimes& o);
  /// "lower 0.3 ms, LLVM IR 0.5 ms, optimise 6.1 ms, machine code 4.0 ms, load 0.4 ms".
  std::string str() const;
};

struct KernelArtifacts {
  std::string kernel_ir;    // the backend-neutral kernel IR, printed
  std::string llvm_ir;      // before optimisation
  std::string llvm_ir_opt;  // after the optimisation pipeline
  std::string assembly;     // host assembly
  std::string cuda_source;  // CUDA plans: the generated CUDA C
  std::string ptx;          // CUDA plans: NVRTC's PTX for the device's architecture
  double compile_ms = 0;
  CompileTimes times;  // where compile_ms went (CPU kernels)
  bool from_disk_cache = false;
  bool reused = false;  // CPU kernels: the code of an identical kernel already loaded
  /// CPU kernels compiled with dynamic sizes: the code is a template's (kernel_template.h),
  /// compiled now (`reused` false) or already loaded for another size.
  bool templated = false;
  /// CPU kernels: compiled now in the quick tier (CodeTier; the optimised code,
  /// with CodeTier::Tiered, follows from the background compile thread).
  bool quick = false;
  /// CPU kernels: an output written with streaming (non-temporal) stores
  /// (codegen/llvm_codegen.h: streams_stores).
  bool streaming_stores = false;
};

}  // namespace kiln
