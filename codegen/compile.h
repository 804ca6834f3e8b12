// The compile driver: a traced graph -> the pipeline (graph passes, then the
// schedule: fusion groups, memory plan, ...) -> the device's backend: one kernel
// per group (matmuls through BLAS) -> a Plan its executor runs. Also gathers
// everything the dumps and `kiln explain` show.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu_backend.h"
#include "passes/fusion.h"
#include "passes/memory_plan.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"

namespace kiln {

struct CompileOptions {
  bool fusion = true;           // false: one kernel per op (the unfused baseline)
  bool overlap_collectives = true;  // false: each collective starts where it is waited for
  bool want_artifacts = false;  // keep pass texts, kernel IR, LLVM IR and assembly
  std::string cache_dir;        // on-disk kernel cache; empty disables it
  LlvmOpt llvm_opt = LlvmOpt::Fast;  // CPU kernels' optimisation pipeline (KILN_OPT)
  bool reuse_kernels = true;    // share identical CPU kernels already loaded (KILN_REUSE=0: never)
  /// CPU kernels of one plan that differ only in sizes and constants (the Adam
  /// update of each parameter) run one template, compiled once
  /// (kernel_template.h, kir::families). KILN_SHARE_SIZES=0: each its own kernel.
  bool share_sizes = true;
  /// CPU kernels take the sizes that changed since a group was last lowered as
  /// run-time parameters (kernel templates, codegen/kernel_template.h): a traced
  /// function with a dynamic dimension. CUDA plans compile every size.
  bool dynamic_sizes = false;
  /// Lower every CPU kernel and remember it for later templates, compile nothing,
  /// return no plan: a dynamic dimension's probe at a second size.
  bool record_kernels_only = false;
  /// Whose kernels templates are made from (a traced function's id; 0: none are
  /// remembered). Kernels of other functions never widen a function's templates.
  uint64_t template_scope = 0;
};

/// What compilation did, step by step.
struct CompileReport {
  /// The pass pipeline's passes, then the schedule's steps (passes/schedule.h).
  std::vector<PassRecord> passes;
  Graph optimized;                    // the graph after the pass pipeline
  std::vector<FusionGroup> groups;    // the schedule's
  MemoryPlan memory;
  std::vector<KernelInfo> kernels;    // per plan step, in order
  std::vector<KernelArtifacts> artifacts;
  /// For each plan step, the optimized graph's values it writes (parallel to Plan::steps).
  std::vector<std::vector<Value>> step_values;
  std::vector<Value> slot_values;     // per plan slot
  double pipeline_ms = 0, codegen_ms = 0;
  std::string target;                 // CUDA plans: the device ("cuda:0 NVIDIA H100 ..."); "" for the CPU
  int64_t kernels_from_disk = 0;
  int64_t kernels_reused = 0;         // CPU kernels already loaded for another group or plan
  int64_t kernels_templated = 0;      // CPU kernels run as templates, sizes as parameters
  CompileTimes kernel_times;          // summed over the CPU kernels compiled
};

/// The CPU backend's options for one kernel, as `opts` asks for (compile_graph's,
/// and eager kernels' with compile_options()).
CpuCompileOptions cpu_compile_options(const CompileOptions& opts);

/// Compiles a graph for the device its values live on, with that device's
/// backend (backend.h): the CPU (LLVM kernels, OpenBLAS), or a CUDA device
/// (NVRTC kernels for the device's architecture, cuBLAS). Returns null with
/// record_kernels_only. Throws kiln::Error (with the user's source line) when a
/// node cannot be compiled, when the graph mixes devices, or when CUDA is
/// unavailable.
std::shared_ptr<Plan> compile_graph(const Graph& g, const CompileOptions& opts,
                                    CompileReport* report = nullptr);

/// Forgets what backends keep for later templates under `template_scope`
/// (CompileOptions): its traced function is gone, and no compile will ask again.
void forget_template_scope(uint64_t template_scope);

}  // namespace kiln
