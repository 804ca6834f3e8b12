// The CUDA half of the compile driver (compile.cpp): one fusion group -> plan
// steps on a CUDA device. A group becomes a generated kernel (CUDA C, compiled
// by NVRTC for the device's own architecture, loaded); a matmul group becomes a
// cuBLAS step, with its epilogue fused into one cuBLASLt call where cuBLASLt
// has it (bias, ReLU, bias then ReLU) or else followed by a generated kernel.
#pragma once

#include <functional>

#include "codegen/compile.h"
#include "codegen/schedule.h"

namespace kiln {

/// What compile_graph hands the CUDA backend for each group.
struct CudaGroupContext {
  const Graph& g;
  const CompileOptions& opts;
  Device device;
  int arch = 0;  // sm_XY as XY
  /// The slot of a value already given or computed (throws when there is none).
  std::function<int32_t(Value)> slot_of;
  /// A new temporary slot for v, or its existing slot (a matmul's raw product).
  std::function<int32_t(Value)> temp_slot;
  /// The schedule (matmul_operand: transposes folded into matmul operands).
  const Schedule& sched;
};

/// Appends the steps of one group to `plan`, and their records (kernel info,
/// artifacts, values written) to `r`.
/// `in_place`: the group's outputs stored over its inputs (in_place_allowed).
void add_cuda_group_steps(const CudaGroupContext& ctx, const FusionGroup& grp,
                         const std::vector<std::pair<Value, Value>>& in_place, Plan& plan,
                         CompileReport& r);

/// The device a graph's values live on. Throws kiln::Error naming the first
/// node on another device when a graph mixes devices.
Device graph_device(const Graph& g);

/// The architecture (e.g. 90 for sm_90) kernels for `device` are compiled for:
/// the device's own compute capability. Throws when CUDA is unavailable.
int cuda_arch(Device device);

}  // namespace kiln
