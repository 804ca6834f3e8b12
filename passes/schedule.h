// The schedule: what is decided about an optimised graph before any kernel is
// built, the same for the CPU and the CUDA backend. Its steps are the second
// half of the pipeline's one named list (passes/pipeline.h), after the graph
// passes, each timed and, for dumps, printed:
//   fusion           the fusion groups (passes/fusion.h)
//   fold_transposes  transposes of the last two dims that only matmuls read are
//                    not copied: BLAS reads the operand transposed
//   collectives      where each bucket of collectives starts and is waited for
//   memory           reshapes of a value a kernel writes folded (not copied:
//                    their readers read that value's buffer), then the buffers
//                    of intermediates (passes/memory_plan.h)
//   (lower           the code generator lowers each group, once: which of its
//                    outputs its kernel may store over which input, overwritable)
//   in_place         parameter updates written into the parameter's own buffer
//   accumulate       matmul groups that are one accumulating BLAS call
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/collectives.h"
#include "passes/fusion.h"
#include "passes/memory_plan.h"

namespace kiln {

struct PassRecord;

struct Schedule {
  std::vector<FusionGroup> groups;  // in plan order
  /// A folded transpose -> the value it transposes (matmuls read that instead).
  std::unordered_map<Value, Value, ValueHash> folded_transpose;
  /// A folded reshape -> the value whose buffer holds it (a group output, never
  /// a graph input): the same elements in the same order, so no copy is made.
  std::unordered_map<Value, Value, ValueHash> folded_reshape;
  CollectiveSchedule comm;
  MemoryPlan memory;
  /// Per group: the (output, input) pairs whose output the group's kernel may
  /// store over the input (it reads the input only at the element it writes).
  /// Not a step's decision but lowering's answer, filled in by the code generator
  /// (the `lower` stage, codegen/lower.h's overwritable) before the steps after
  /// it run; empty, no update is stored over a parameter its group reads.
  std::vector<std::vector<std::pair<Value, Value>>> overwritable;
  /// Per group: (update, parameter) pairs whose update is written into the
  /// parameter's buffer because no later group reads the old value: `direct` when
  /// the group does not read the parameter, `in_place` when it reads it only at
  /// the element it writes (every such pair of the group is overwritable).
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

/// Runs the schedule's steps before the `lower` stage (the second half of
/// run_pipeline) on g, an optimised graph. Appends one record per step to `log`
/// if given (PassRecord::graph false; the text only when `record`).
Schedule schedule_graph(const Graph& g, const ScheduleOptions& opts,
                        std::vector<PassRecord>* log = nullptr, bool record = false);

/// Runs the schedule's steps after the `lower` stage on s, whose overwritable
/// lowering has filled in (finish_schedule in pipeline.h is the same, for
/// compile_graph). Appends records as schedule_graph does.
void finish_schedule(const Graph& g, const ScheduleOptions& opts, Schedule& s,
                     std::vector<PassRecord>* log = nullptr, bool record = false);

/// The schedule's steps, each a function of the graph and the schedule so far
/// (run), with its text for dumps (str). passes/pipeline.cpp lists them.
namespace schedule_steps {
void fuse(const Graph& g, const ScheduleOptions& o, Schedule& s);
std::string fuse_str(const Graph& g, const Schedule& s);
void fold_transposes(const Graph& g, const ScheduleOptions& o, Schedule& s);
std::string fold_transposes_str(const Graph& g, const Schedule& s);
void collectives(const Graph& g, const ScheduleOptions& o, Schedule& s);
std::string collectives_str(const Graph& g, const Schedule& s);
void memory(const Graph& g, const ScheduleOptions& o, Schedule& s);
std::string memory_str(const Graph& g, const Schedule& s);
/// The `lower` stage's text: each group's overwritable pairs.
std::string lower_str(const Graph& g, const Schedule& s);
void in_place(const Graph& g, const ScheduleOptions& o, Schedule& s);
std::string in_place_str(const Graph& g, const Schedule& s);
void accumulate(const Graph& g, const ScheduleOptions& o, Schedule& s);
std::string accumulate_str(const Graph& g, const Schedule& s);
}  // namespace schedule_steps

}  // namespace kiln
