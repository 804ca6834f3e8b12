// The backend interface: what compile_graph (compile.h) asks of the code
// generator for a device, and what runs the plan it built. Both backends take
// the same schedule (passes/schedule.h) and build the same kind of plan
// (runtime/plan.h); the driver decides the order of steps, the slots, and the
// host steps (index checks, collectives), and hands every other group to the
// backend of the graph's device, in three calls per group: lower_group (once,
// before the schedule's in_place step, which reads what lowering found), then,
// with the schedule complete, compile_group and add_steps:
//   CPU   cpu_compile.cpp   LLVM kernels (cpu_backend.h), OpenBLAS matmuls
//   CUDA  cuda_compile.cpp  NVRTC kernels (cuda_backend.h), cuBLAS/cuBLASLt matmuls
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/compile.h"
#include "codegen/plan_builder.h"

namespace kiln {

/// What a backend is given for every group of one compile.
struct CompileContext {
  const Graph& g;  // the optimised graph
  /// Complete for compile_group and after; lower_group sees the steps before the
  /// `lower` stage only (no in_place or accumulate decisions yet).
  const Schedule& sched;
  /// The schedule's groups as the steps compile them (constant data, a literal or
  /// an arange, is an elementwise group: an ordinary kernel writes it).
  const std::vector<FusionGroup>& groups;
  const CompileOptions& opts;
  Device device;
  int arch = 0;  // Backend::target's architecture number
};

/// What a backend compiles for on a device.
struct Target {
  std::string name;  // what compile reports say: "" for the host CPU; for CUDA the device and its name
  int arch = 0;      // CUDA: the compute capability kernels are built for (sm_90: 90); 0 for the CPU
};

/// A group lowered to kernel IR (codegen/lower.h), once per compile: what the
/// schedule's in_place step reads, then what compile_group compiles. Each
/// backend has its own.
struct LoweredGroup {
  virtual ~LoweredGroup() = default;
  /// The (output, input) pairs whose output the kernel may store over the input
  /// (codegen/lower.h's overwritable): Schedule::overwritable.
  std::vector<std::pair<Value, Value>> overwritable;
  /// Stores the outputs of `pairs` (the schedule's in_place decision, each pair
  /// one of overwritable) over their inputs in the kernel (store_in_place).
  virtual void store_in_place(const std::vector<std::pair<Value, Value>>& pairs) = 0;
};

/// A group's code, compiled ahead of the step loop (perhaps on another thread),
/// waiting for its steps to be added in plan order. Each backend has its own.
struct CompiledGroup {
  virtual ~CompiledGroup() = default;
};

/// What a backend works out for the groups of one compile together, lowered and
/// with the schedule complete, before it compiles them one by one
/// (Backend::batch_groups). Each backend has its own.
struct GroupBatch {
  virtual ~GroupBatch() = default;
  /// Per group: compile it in a second round, after every unmarked group (its
  /// code comes from another group's compile).
  std::vector<char> second_round;
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// What kernels for `device` are compiled for. Throws kiln::Error when the
  /// device is unavailable.
  virtual Target target(Device device) const = 0;

  /// Whether its kernels take sizes at run time (kernel templates,
  /// CompileOptions::dynamic_sizes), so that a new size of a dynamic dimension
  /// compiles no kernel; else every size compiles its own.
  virtual bool sizes_at_run_time() const = 0;

  /// Whether its plans may compile on another thread than the caller's (the
  /// background compile queue, compile_queue.h).
  virtual bool compiles_off_thread() const = 0;

  /// Whether execute keeps every slot's buffer when asked (`keep`), so that a
  /// plan can be checked kernel by kernel (verify.h).
  virtual bool keeps_slots() const = 0;

  /// Whether this backend compiles group `grp` of g; if not, *why says what it
  /// lacks (for the user's error).
  virtual bool supports(const Graph& g, const FusionGroup& grp, std::string* why) const = 0;

  /// Lowers group `gi` (one this backend supports, not a host step of the
  /// driver's) to kernel IR, once per compile, and says which outputs its kernel
  /// may store over which inputs. Called from several threads at once, before
  /// the schedule's in_place step. Throws kiln::Error (with the group's source
  /// line) when the group cannot be lowered.
  virtual std::unique_ptr<LoweredGroup> lower_group(const CompileContext& ctx, size_t gi) const = 0;

  /// Looks at the groups about to be compiled together, lowered (`lowered`, per
  /// group: null where not lowered) and with their in-place outputs stored,
  /// before any compile_group call: null when the backend compiles each on its own.
  virtual std::unique_ptr<GroupBatch> batch_groups(
      const CompileContext& ctx, const std::vector<std::unique_ptr<LoweredGroup>>& lowered) const {
    return nullptr;
  }

  /// Compiles group `gi`'s code from its lowered kernel (null, or code with
  /// nothing to run, when its steps are library calls alone), with what
  /// batch_groups made (or null). Called for every group lower_group lowered,
  /// from several threads at once, in any order but for the batch's second
  /// round, which comes after the first. With opts.record_kernels_only, only
  /// what the probe records is done.
  virtual std::unique_ptr<CompiledGroup> compile_group(const CompileContext& ctx, size_t gi,
                                                       std::unique_ptr<LoweredGroup> lowered,
                                                       GroupBatch* batch) const = 0;

  /// Appends group `gi`'s steps to the plan, with what compile_group made of it.
  virtual void add_steps(const CompileContext& ctx, size_t gi, std::unique_ptr<CompiledGroup> code,
                         PlanBuilder& pb) const = 0;

  /// Completes a library step the driver made (runtime/plan.h: Sort, Attention, ClusterLogprob,
  /// ValueCheck) with the code this backend runs it with: the CUDA backend
  /// attaches its sort and attention kernels. By default the step runs as the
  /// executor runs it on the host.
  virtual void complete_library_step(const CompileContext& ctx, PlanStep& step) const {}

  /// Pays the compiler's one-time start-up in this process (CompilerWarmUp
  /// runs it on another thread while a first call traces). By default nothing.
  virtual void warm_up() const {}

  /// Runs a plan this backend built (see execute_cpu_plan for the buffers). With
  /// `keep`, the slots' buffers are kept for checking (the CPU backend only).
  virtual void execute(const Plan& plan, void* const* args, void* const* params,
                       void* const* outputs, KeptBuffers* keep = nullptr) const = 0;
};

/// The backend of a device's kind.
const Backend& backend_for(Device device);

/// The two backends (cpu_compile.cpp, cuda_compile.cpp).
const Backend& cpu_backend();
const Backend& cuda_backend();

}  // namespace kiln
