// PlanBuilder (see plan_builder.h): slots, steps and their records.
#include "codegen/plan_builder.h"

#include <algorithm>

#include "codegen/compile.h"

namespace kiln {

PlanBuilder::PlanBuilder(const Graph& g, const Schedule& sched, Plan& plan, CompileReport& report)
    : g_(g), sched_(sched), plan_(plan), r_(report) {}

int32_t PlanBuilder::add_slot(PlanSlot::Kind kind, int64_t index, const TensorType& t, Value v) {
  plan_.slots.push_back(PlanSlot{kind, index, t});
  r_.slot_values.push_back(v);
  const int32_t s = static_cast<int32_t>(plan_.slots.size() - 1);
  if (v.valid() && !of_.count(v)) of_[v] = s;
  return s;
}

int32_t PlanBuilder::slot(Value v) const {
  auto it = of_.find(v);
  if (it == of_.end())
    throw Error("internal: no buffer for value %" + std::to_string(v.node) + " (" +
                    op_name(g_[v.node].op) + ")",
                g_[v.node].loc);
  return it->second;
}

int32_t PlanBuilder::temp_slot(Value v) {
  auto it = of_.find(v);
  if (it != of_.end()) return it->second;
  const int64_t id = static_cast<int64_t>(plan_.temp_bytes.size());
  plan_.temp_bytes.push_back(g_.type(v).bytes());
  return add_slot(PlanSlot::Temp, id, g_.type(v), v);
}

int32_t PlanBuilder::operand_slot(Value v, bool* transposed) const {
  return slot(matmul_operand(sched_, v, transposed));
}

namespace {

std::shared_ptr<const StepCost> cost_of(const KernelInfo& info) {
  auto cost = std::make_shared<StepCost>();
  cost->kind = group_kind_name(info.kind);
  cost->bytes_read = info.bytes_read;
  cost->bytes_written = info.bytes_written;
  cost->flops = info.flops;
  for (const std::string& s : info.sources) {
    if (!cost->source.empty()) cost->source += ' ';
    cost->source += s;
  }
  return cost;
}

}  // namespace

void PlanBuilder::add(PlanStep step, KernelInfo info, KernelArtifacts artifacts,
                      std::vector<Value> written) {
  if (!step.cost) step.cost = cost_of(info);
  plan_.steps.push_back(std::move(step));
  r_.kernels.push_back(std::move(info));
  r_.artifacts.push_back(std::move(artifacts));
  r_.step_values.push_back(std::move(written));
}

void PlanBuilder::extend_last(const std::vector<int32_t>& slots, const KernelInfo& info,
                              const std::vector<Value>& written) {
  PlanStep& step = plan_.steps.back();
  step.slots.insert(step.slots.end(), slots.begin(), slots.end());
  KernelInfo& k = r_.kernels.back();
  k.nodes.insert(k.nodes.end(), info.nodes.begin(), info.nodes.end());
  for (const std::string& s : info.sources)
    if (std::find(k.sources.begin(), k.sources.end(), s) == k.sources.end()) k.sources.push_back(s);
  k.range += info.range;
  k.bytes_read += info.bytes_read;
  k.bytes_written += info.bytes_written;
  k.flops += info.flops;
  step.cost = cost_of(k);
  std::vector<Value>& w = r_.step_values.back();
  w.insert(w.end(), written.begin(), written.end());
}

const std::vector<Value>& PlanBuilder::last_written() const {
  return r_.step_values.back();
}

const std::vector<Value>& PlanBuilder::written(size_t i) const {
  return r_.step_values[i];
}

bool PlanBuilder::same_buffer(int32_t s, int32_t t) const {
  const PlanSlot& a = plan_.slots[static_cast<size_t>(s)];
  const PlanSlot& b = plan_.slots[static_cast<size_t>(t)];
  return a.kind == b.kind && a.index == b.index;
}

PlanStep PlanBuilder::matmul_step(NodeId mm, int32_t out, std::string name, step::Matmul m) const {
  const Node& n = g_[mm];
  PlanStep step;
  step.name = std::move(name);
  step.slots = {operand_slot(n.operands[0], &m.trans_a), operand_slot(n.operands[1], &m.trans_b),
                out};
  step.what = m;
  return step;
}

int64_t matmul_flops(const Graph& g, NodeId mm) {
  const Node& n = g[mm];
  return 2 * n.type().numel() * g.type(n.operands[0]).shape.back();
}

KernelInfo split_gemm_info(const Graph& g, NodeId mm, KernelInfo* group) {
  const Node& n = g[mm];
  const int64_t operand_bytes = g.type(n.operands[0]).bytes() + g.type(n.operands[1]).bytes();
  KernelInfo info = *group;
  info.name = group->name + "_gemm";
  info.kind = GroupKind::Matmul;
  info.nodes = {mm};
  info.flops = matmul_flops(g, mm);
  info.bytes_read = operand_bytes;
  info.bytes_written = n.type().bytes();
  group->flops = std::max<int64_t>(0, group->flops - info.flops);
  group->bytes_read = std::max<int64_t>(0, group->bytes_read - operand_bytes) + info.bytes_written;
  return info;
}

void add_sources(KernelInfo& info, const Graph& g, const std::vector<NodeId>& nodes) {
  for (NodeId id : nodes) {
    if (!g[id].loc.known()) continue;
    const std::string s = g[id].loc.str();
    if (std::find(info.sources.begin(), info.sources.end(), s) == info.sources.end())
      info.sources.push_back(s);
  }
}

}  // namespace kiln
