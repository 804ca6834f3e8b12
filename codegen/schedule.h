// The schedule: what compile_graph decides about an optimised graph before it
// builds any kernel, the same for the CPU and the CUDA backend. It is a straight
// list of named steps after the pass pipeline (passes/pipeline.h), each timed
// and, for dumps, printed:
//   fusion           the fusion groups (passes/fusion.h)
//   fold_transposes  transposes of the last two dims that only matmuls read are
//                    not copied: BLAS reads the operand transposed
//   collectives      where each bucket of collectives starts and is waited for
//   memory           the buffers of intermediates (passes/memory_plan.h)
//   in_place         parameter updates written into the parameter's own buffer
//   accumulate       matmul groups that are one accumulating BLAS call
#pragma once

#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/collectives.h"
#include "passes/fusion.h"
#include "passes/memory_plan.h"
#include "passes/pipeline.h"

namespace kiln {

struct Schedule {
  std::vector<FusionGroup> groups;  // in plan order
  /// A folded transpose -> the value it transposes (matmuls read that instead).
  std::unordered_map<Value, Value, ValueHash> folded_transpose;
  CollectiveSchedule comm;
  MemoryPlan memory;
  /// Per group: (update, parameter) pairs whose update is written into the
  /// parameter's buffer because no later group reads the old value: `direct` when
  /// the group does not read the parameter, `in_place` when it reads it only at
  /// the element it writes (in_place_allowed, codegen/lower.h).
  std::vector<std::vector<std::pair<Value, Value>>> direct, in_place;
  /// Per group: alpha when the group is P + alpha (a @ b) stored over P, which one
  /// BLAS call computes into P's buffer (beta = 1) with no kernel.
  std::vector<std::optional<double>> accumulate;
};

/// What a matmul reads for its operand v: the source of a folded transpose (with
/// *transposed set, so BLAS reads it transposed), else v itself.
Value matmul_operand(const Schedule& s, Value v, bool* transposed = nullptr);

struct ScheduleOptions {
  bool fusion = true;               // false: one group per op (FusionOptions::enabled)
  bool overlap_collectives = true;  // schedule_collectives' `overlap`
};

/// Runs the schedule's steps on g (the pipeline's output). Appends one record
/// per step to `log` if given (PassRecord::graph false; the text only when
/// `record`).
Schedule schedule_graph(const Graph& g, const ScheduleOptions& opts,
                        std::vector<PassRecord>* log = nullptr, bool record = false);

/// The step names, in order.
const std::vector<std::string>& schedule_step_names();

}  // namespace kiln
