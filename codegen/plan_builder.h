// Building a plan (runtime/plan.h) from a schedule: the slot of every value,
// and each step appended with the records the compile report keeps for it (what
// dumps say of it, its texts, the values it writes). compile_graph and both
// backends build through it; it is also the one place a matmul step is made.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_info.h"
#include "ir/graph.h"
#include "passes/schedule.h"
#include "runtime/plan.h"

namespace kiln {

struct CompileReport;

class PlanBuilder {
 public:
  PlanBuilder(const Graph& g, const Schedule& sched, Plan& plan, CompileReport& report);

  const Graph& graph() const { return g_; }
  Plan& plan() { return plan_; }
  const Plan& plan() const { return plan_; }
  CompileReport& report() { return r_; }

  /// A new slot for v (v may be invalid: a buffer no value names).
  int32_t add_slot(PlanSlot::Kind kind, int64_t index, const TensorType& t, Value v);
  /// v is kept in slot s (an update written into its parameter's buffer).
  void alias(Value v, int32_t s) { of_[v] = s; }
  bool has_slot(Value v) const { return of_.count(v) != 0; }
  /// The slot of a value given or computed; throws (internal) when there is none.
  int32_t slot(Value v) const;
  /// v's slot, or a new temporary buffer of its own (a matmul's raw product).
  int32_t temp_slot(Value v);
  /// The slot a matmul reads for operand v: a folded transpose's source, with
  /// *transposed set (matmul_operand, passes/schedule.h).
  int32_t operand_slot(Value v, bool* transposed) const;

  /// Appends a step and its records: `info` for dumps and `kiln explain`,
  /// `artifacts` (texts, compile times), the values it writes (KILN_CHECK compares them).
  void add(PlanStep step, KernelInfo info, KernelArtifacts artifacts, std::vector<Value> written);

  /// Adds one more kernel's records to the last step (a foreach step's next part,
  /// whose slots are appended to the step's; the backend extends its `what`):
  /// `info`'s nodes, sources and costs join the last step's, `written` its values.
  void extend_last(const std::vector<int32_t>& slots, const KernelInfo& info,
                   const std::vector<Value>& written);
  /// The values the last step writes.
  const std::vector<Value>& last_written() const;
  /// The values step `i` writes.
  const std::vector<Value>& written(size_t i) const;
  /// Whether slots s and t name one buffer (the same argument, parameter,
  /// planned temporary or output).
  bool same_buffer(int32_t s, int32_t t) const;

  /// The one matmul-step builder: matmul node `mm` into slot `out`, its
  /// operands' slots and transposes filled in; `m`'s other fields are kept.
  PlanStep matmul_step(NodeId mm, int32_t out, std::string name, step::Matmul m = {}) const;

 private:
  const Graph& g_;
  const Schedule& sched_;
  Plan& plan_;
  CompileReport& r_;
  std::unordered_map<Value, int32_t, ValueHash> of_;
};

/// The flops of matmul node mm (2 n m k per batch).
int64_t matmul_flops(const Graph& g, NodeId mm);

/// The record of a matmul group's gemm step, split out of the group's record
/// (which keeps the epilogue's share) so nothing is counted twice.
KernelInfo split_gemm_info(const Graph& g, NodeId mm, KernelInfo* group);

/// Adds the user's source lines of `nodes` to info.sources, each once.
void add_sources(KernelInfo& info, const Graph& g, const std::vector<NodeId>& nodes);

}  // namespace kiln
