// The compile driver: a traced graph -> the pipeline (graph passes, then the
// schedule: fusion groups, memory plan, ...) -> the device's backend: one kernel
// per group (matmuls through BLAS) -> a Plan its executor runs. Also gathers
// everything the dumps and `kiln explain` show.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "codegen/kernel_info.h"
#include "passes/fusion.h"
#include "passes/memory_plan.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"

namespace kiln {

/// Options that one backend reads and the others have no use for (the CPU
/// backend's CpuOptions, cpu_backend.h): kept in CompileOptions by their type.
struct BackendOptions {
  virtual ~BackendOptions() = default;
};

/// What every backend is asked to do. Each field means the same on every
/// backend; what only one backend has (the LLVM pipeline of CPU kernels) is in
/// that backend's options, set with set_backend_options and read by that
/// backend alone.
struct CompileOptions {
  bool fusion = true;               // false: one kernel per op (the unfused baseline)
  bool overlap_collectives = true;  // false: each collective starts where it is waited for
  bool want_artifacts = false;      // keep pass texts, kernel IR and each backend's code texts
  std::string cache_dir;            // on-disk kernel cache; empty disables it
  /// A traced function with a dynamic dimension: a backend whose kernels take
  /// sizes at run time (Backend::sizes_at_run_time) compiles kernel templates
  /// where sizes changed since its kernels were last lowered, so that a new size
  /// compiles no kernel; a backend that does not compiles every size, as that
  /// capability says.
  bool dynamic_sizes = false;
  /// A dynamic dimension's probe at a second size: lower every kernel and let
  /// the backend remember it for later templates, compile nothing, return no
  /// plan. Only asked of a backend whose sizes_at_run_time() (compile_graph
  /// throws otherwise).
  bool record_kernels_only = false;

  /// Sets the options of one backend (a BackendOptions type), replacing any of
  /// that type set before.
  template <class T>
  void set_backend_options(T o) {
    static_assert(std::is_base_of_v<BackendOptions, T>,
                  "backend options derive from BackendOptions");
    for (auto& b : backend_)
      if (dynamic_cast<const T*>(b.get())) {
        b = std::make_shared<const T>(std::move(o));
        return;
      }
    backend_.push_back(std::make_shared<const T>(std::move(o)));
  }
  /// The options of type T set before, or T's defaults.
  template <class T>
  T backend_options() const {
    static_assert(std::is_base_of_v<BackendOptions, T>,
                  "backend options derive from BackendOptions");
    for (const auto& b : backend_)
      if (const T* t = dynamic_cast<const T*>(b.get())) return *t;
    return T{};
  }

 private:
  std::vector<std::shared_ptr<const BackendOptions>> backend_;  // one of each type, immutable
};

/// What compilation did, step by step.
struct CompileReport {
  /// The pass pipeline's passes, then the schedule's steps (passes/schedule.h).
  std::vector<PassRecord> passes;
  Graph optimized;                  // the graph after the pass pipeline
  std::vector<FusionGroup> groups;  // the schedule's
  MemoryPlan memory;
  std::vector<KernelInfo> kernels;  // per plan step, in order
  std::vector<KernelArtifacts> artifacts;
  /// For each plan step, the optimized graph's values it writes (parallel to Plan::steps).
  std::vector<std::vector<Value>> step_values;
  std::vector<Value> slot_values;  // per plan slot
  double pipeline_ms = 0, codegen_ms = 0;
  std::string target;  // CUDA plans: the device ("cuda:0 NVIDIA H100 ..."); "" for the CPU
  int64_t kernels_from_disk = 0;
  int64_t kernels_reused = 0;     // CPU kernels already loaded for another group or plan
  int64_t kernels_templated = 0;  // CPU kernels run as templates, sizes as parameters
  int64_t kernels_streaming = 0;  // CPU kernels with streaming stores (llvm_codegen.h)
  int64_t kernels_quick = 0;      // CPU kernels compiled in the quick tier (CodeTier)
  CompileTimes kernel_times;      // summed over the CPU kernels compiled
};

/// The host backend's one-time start-up (Backend::warm_up: LLVM's target, its
/// JIT, a target machine) run on another thread while this lives, the first
/// time in the process one is made with `start`; waited for when it goes. A
/// traced function's first call makes one while its body traces, so that the
/// trace and LLVM's start-up overlap. Made again, it starts nothing.
class CompilerWarmUp {
 public:
  explicit CompilerWarmUp(bool start = true);
  ~CompilerWarmUp();
  CompilerWarmUp(const CompilerWarmUp&) = delete;
  CompilerWarmUp& operator=(const CompilerWarmUp&) = delete;
  /// Whether this one started the warm-up.
  bool started() const { return thread_.joinable(); }

 private:
  std::thread thread_;
};

/// Compiles a graph for the device its values live on, with that device's
/// backend (backend.h): the CPU (LLVM kernels, OpenBLAS), or a CUDA device
/// (NVRTC kernels for the device's architecture, cuBLAS). Returns null with
/// record_kernels_only. Throws kiln::Error (with the user's source line) when a
/// node cannot be compiled, when the graph mixes devices, or when CUDA is
/// unavailable.
std::shared_ptr<Plan> compile_graph(const Graph& g, const CompileOptions& opts,
                                    CompileReport* report = nullptr);

}  // namespace kiln
