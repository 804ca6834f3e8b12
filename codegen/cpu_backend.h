// The CPU backend: a fusion group -> kernel IR -> LLVM IR -> optimised for the host
// CPU -> machine code in the ORC LLJIT. No LLVM type appears here; LLVM stays
// inside codegen/*.cpp and runtime/llvm_jit.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/compile.h"
#include "codegen/kernel_info.h"
#include "codegen/kernel_ir.h"
#include "codegen/kernel_template.h"
#include "ir/graph.h"
#include "passes/fusion.h"
#include "runtime/llvm_jit.h"

namespace kiln {

/// A compiled CPU kernel: computes elements [begin, end) of its outer loop.
/// `buffers` points at the dense row-major buffers of CpuKernel::buffers, in order,
/// followed, for a kernel with run-time parameters, by CpuKernel::params.data();
/// they must not overlap (the kernel is compiled with noalias), except as
/// CpuCompileOptions::epilogue_in_place allows.
/// Disjoint ranges may run concurrently on different threads.
using CpuKernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

struct CpuKernel {
  CpuKernelFn fn = nullptr;  // null when the group needs no kernel (a lone matmul)
  /// Compiled in tiers (CodeTier::Tiered): where the optimised code goes when
  /// it is ready (plan.h: kernel_to_run); fn is the quick tier's. Else null.
  const std::atomic<CpuKernelFn>* better = nullptr;
  /// Owns fn's code (and better's): the JIT frees it when the last copy goes
  /// (kept by the plan).
  std::shared_ptr<const void> code;
  /// The values whose buffers the kernel reads and writes, in argument order. For
  /// Matmul groups the matmul's own result is the first entry (the caller computes
  /// it with BLAS before calling the epilogue kernel).
  std::vector<Value> buffers;
  /// A kernel template's run-time parameters for this group (kernel_ir.h): passed
  /// after the buffer pointers. Empty for a kernel compiled for its sizes.
  std::vector<int64_t> params;
  KernelInfo info;
  KernelArtifacts artifacts;
};

/// The CPU backend's own options (CompileOptions::set_backend_options): what
/// only LLVM kernels have. The CUDA backend never reads them.
struct CpuOptions : BackendOptions {
  LlvmOpt llvm_opt = LlvmOpt::Fast;  // the kernels' optimisation pipeline (KILN_OPT)
  CodeTier tier = CodeTier::Optimised;  // one tier only, or quick code first (KILN_TIER)
  bool reuse_kernels = true;         // share identical kernels already loaded (KILN_REUSE=0: never)
  /// Kernels of one plan that differ only in sizes and constants (the Adam update
  /// of each parameter) run one template, compiled once (kernel_template.h,
  /// kir::families). KILN_SHARE_SIZES=0: each its own kernel.
  bool share_sizes = true;
  /// Fewer, fuller plan steps: a matmul's elementwise epilogue runs inside its BLAS
  /// step, on each block of the product's rows as it is written (in cache); and
  /// consecutive kernels running the same code with no data between them (the Adam
  /// update of each parameter) run as one foreach step, one pool dispatch over all
  /// their chunks; and the kernel that writes a batched matmul's right operand
  /// just before it (a conv's patches) runs inside its step, block by block of the
  /// batch, each block of the operand multiplied while in cache. KILN_MERGE_STEPS=0:
  /// each its own step.
  bool merge_steps = true;
  /// Outputs of at least this many bytes are written with streaming
  /// (non-temporal) stores where their loop allows (llvm_codegen.h:
  /// streams_stores); 0: never (KILN_NT_STORES=0). Settings: the host's
  /// last-level cache (frontend/settings.h).
  int64_t stream_min_bytes = 0;
};

struct CpuCompileOptions {
  bool want_artifacts = false;  // fill KernelArtifacts' texts (costs time)
  std::string cache_dir;        // on-disk object cache; empty disables it
  LlvmOpt opt = LlvmOpt::Fast;  // the LLVM optimisation pipeline (KILN_OPT)
  /// Which code a kernel compiled now runs (KILN_TIER; plans get CpuOptions::tier,
  /// a kernel compiled on its own the optimised code). Tiered compiles only the
  /// quick tier now, and the optimised code on the background compile thread,
  /// except for a compile that runs on that thread already or keeps texts for
  /// dumps (want_artifacts): those compile the optimised code at once.
  CodeTier tier = CodeTier::Optimised;
  /// Share the code of an identical kernel already loaded in this process (false:
  /// always compile or read the disk cache, as the cold-compile benchmark does).
  bool reuse_loaded = true;
  /// Every buffer is 64-byte aligned (Storage::allocate's blocks are), so the
  /// kernel may use aligned vector moves. Off by default: a dense view with an
  /// offset (a contiguous slice passed as a traced argument) is not aligned, and
  /// an aligned move on it faults. The gain is small on x86 (unaligned moves on
  /// aligned data cost the same); turn it on only when every buffer is a block start.
  bool assume_aligned = false;
  /// Matmul groups: the caller passes the matmul's result buffer again as the first
  /// epilogue output, which the kernel then overwrites element by element. Only
  /// legal when the epilogue reads the result at the element it writes (lowering
  /// checks and throws otherwise). All other buffers must be distinct.
  bool epilogue_in_place = false;
  /// Dynamic sizes (a traced function whose batch size changes): when the kernel
  /// is an instance of a template in `templates`, or differs only in constants
  /// from a kernel lowered before (at another size), compile and run the template
  /// (kernel_template.h) with this group's constants as parameters. Off: every
  /// kernel is compiled for its own sizes, which is what static shapes do best.
  bool dynamic_sizes = false;
  /// Only lower the group and remember its kernel in `templates` (a probe of a
  /// dynamic dimension at another size); no code, CpuKernel::fn stays null.
  bool record_only = false;
  /// Where kernels are remembered and templates made (the CPU backend's own
  /// cache): dynamic_sizes and record_only need one; null remembers nothing.
  KernelTemplateCache* templates = nullptr;
  /// Streaming (non-temporal) stores (CpuOptions::stream_min_bytes): outputs of
  /// at least stream_min_bytes bytes, sizes known at compile time; 0: none.
  int64_t stream_min_bytes = 0;
  /// Every output whose loop allows streams: an eager kernel's variant for the
  /// calls whose outputs its caller found large (eager_kernel.h).
  bool stream_all = false;
};

/// Compiles one group of g: lower_cpu_group, then compile_cpu_group. Throws
/// kiln::Error naming the group's first source line if the group cannot be lowered.
CpuKernel compile_cpu_kernel(const Graph& g, const FusionGroup& group,
                             const CpuCompileOptions& opts);

/// A group lowered to kernel IR, not yet compiled. Outputs stored over inputs
/// (the schedule's in_place step) are stored with store_in_place (lower.h) before
/// it compiles.
struct CpuLoweredGroup {
  kir::Kernel kernel;
  CpuKernel kernel_out;     // info, buffers and artifacts so far; no code yet
  SourceLoc loc;            // the group's first source line, for errors
  bool has_output = false;  // false: a lone matmul, which needs no kernel
};
CpuLoweredGroup lower_cpu_group(const Graph& g, const FusionGroup& group, const CpuCompileOptions& opts);

/// The group's own kernel: an identical kernel's code already loaded, the disk
/// cache's object or LLVM's (with dynamic sizes, a template's; kernel_template.h).
CpuKernel compile_cpu_group(CpuLoweredGroup l, const CpuCompileOptions& opts);
/// The group run as an instance of `templ` (its plan's family template,
/// kernel_template.h) with `params`: the template's code found or compiled now.
CpuKernel compile_cpu_group_as(CpuLoweredGroup l, const kir::Kernel& templ, std::vector<int64_t> params,
                               const CpuCompileOptions& opts);
/// The group run with the code `compiled` holds (another member of its family,
/// compiled with compile_cpu_group_as) and its own `params`.
CpuKernel share_cpu_code(CpuLoweredGroup l, const CpuKernel& compiled, const kir::Kernel& templ,
                         std::vector<int64_t> params, const CpuCompileOptions& opts);

/// Compiles a kernel already lowered (eager_kernel.h builds its own): the code
/// of an identical kernel already loaded, the disk cache's object, or LLVM's.
/// Fills fn, code and artifacts; buffers, params and info are the caller's.
CpuKernel compile_lowered_kernel(const kir::Kernel& k, const CpuCompileOptions& opts);

/// The CPU backend's options for one kernel, as `opts` asks for (with its
/// CpuOptions; compile_graph's, and eager kernels' with compile_options()). No
/// template cache: the backend sets its own.
CpuCompileOptions cpu_compile_options(const CompileOptions& opts);

/// The CPU backend's kernel-template cache (cpu_compile.cpp owns it), for
/// statistics and tests.
const KernelTemplateCache& cpu_kernel_templates();

/// Host CPU name and features the JIT targets ("znver5 +avx512f ...").
std::string cpu_target_description();

}  // namespace kiln
