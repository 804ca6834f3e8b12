// The compile driver (see compile.h): passes, fusion, memory plan, kernels, slots.
#include "codegen/compile.h"

#include <chrono>
#include <unordered_map>

#include "passes/pipeline.h"

namespace kiln {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct SlotTable {
  Plan& plan;
  std::vector<Value>& slot_values;
  std::unordered_map<Value, int32_t, ValueHash> of;

  int32_t add(PlanSlot::Kind kind, int64_t index, const TensorType& t, Value v) {
    plan.slots.push_back(PlanSlot{kind, index, t});
    slot_values.push_back(v);
    int32_t s = static_cast<int32_t>(plan.slots.size() - 1);
    if (v.valid() && !of.count(v)) of[v] = s;
    return s;
  }
  int32_t at(Value v, const Graph& g) const {
    auto it = of.find(v);
    if (it == of.end())
      throw Error("internal: no buffer for value %" + std::to_string(v.node) + " (" +
                      op_name(g[v.node].op) + ")",
                  g[v.node].loc);
    return it->second;
  }
};

}  // namespace

std::shared_ptr<Plan> compile_graph(const Graph& input, const CompileOptions& opts,
                                    CompileReport* report) {
  CompileReport local;
  CompileReport& r = report ? *report : local;
  auto t0 = std::chrono::steady_clock::now();
  PipelineOptions popts;
  popts.record = opts.want_artifacts;
  r.passes.clear();
  const Graph g = run_pipeline(input, popts, &r.passes);
  r.pipeline_ms = ms_since(t0);
  r.optimized = g;

  auto t1 = std::chrono::steady_clock::now();
  FusionOptions fopts;
  fopts.enabled = opts.fusion;
  r.groups = plan_fusion(g, fopts);
  if (opts.want_artifacts) r.fusion_text = fusion_plan_str(g, r.groups);
  r.memory = plan_memory(g, r.groups);

  auto plan = std::make_shared<Plan>();
  SlotTable slots{*plan, r.slot_values, {}};
  for (NodeId id : g.args()) {
    int64_t idx = g[id].attrs.i(AttrKey::index);
    slots.add(PlanSlot::Arg, idx, g[id].type(), Value(id));
    plan->num_args = std::max(plan->num_args, idx + 1);
  }
  for (NodeId id : g.params()) {
    int64_t idx = g[id].attrs.i(AttrKey::index);
    slots.add(PlanSlot::Param, idx, g[id].type(), Value(id));
    plan->num_params = std::max(plan->num_params, idx + 1);
  }
  // Graph outputs computed by a group are written straight into the caller's buffers.
  std::unordered_map<Value, int64_t, ValueHash> output_pos;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    Value v = g.outputs[i];
    if (op_info(g[v.node].op).category == OpCategory::Input || output_pos.count(v)) continue;
    output_pos[v] = static_cast<int64_t>(i);
  }
  plan->temp_bytes = r.memory.buffer_bytes;
  for (size_t gi = 0; gi < r.groups.size(); ++gi) {
    const FusionGroup& grp = r.groups[gi];
    for (size_t oi = 0; oi < grp.outputs.size(); ++oi) {
      Value v = grp.outputs[oi];
      if (slots.of.count(v)) continue;
      auto pos = output_pos.find(v);
      if (pos != output_pos.end())
        slots.add(PlanSlot::Output, pos->second, g.type(v), v);
      else
        slots.add(PlanSlot::Temp, r.memory.group_output_buffer[gi][oi], g.type(v), v);
    }
  }

  CpuCompileOptions copts;
  copts.want_artifacts = opts.want_artifacts;
  copts.cache_dir = opts.cache_dir;
  r.kernels.clear();
  r.artifacts.clear();
  r.step_values.clear();
  for (const FusionGroup& grp : r.groups) {
    if (grp.kind == GroupKind::Opaque)
      throw Error(std::string("cannot compile '") + op_name(g[grp.nodes.front()].op) +
                      "' in a traced function (run it eagerly, outside the trace)",
                  g[grp.nodes.front()].loc);
    CpuKernel k = compile_cpu_kernel(g, grp, copts);
    if (k.artifacts.from_disk_cache) r.kernels_from_disk++;
    if (grp.kind == GroupKind::Matmul) {
      const Node& mm = g[grp.nodes.front()];
      Value mv(grp.nodes.front());
      if (!slots.of.count(mv)) {
        // The raw product lives in a buffer of its own until the epilogue consumes it.
        int64_t tid = static_cast<int64_t>(plan->temp_bytes.size());
        plan->temp_bytes.push_back(mm.type().numel() * static_cast<int64_t>(dtype_size(mm.type().dtype)));
        slots.add(PlanSlot::Temp, tid, mm.type(), mv);
      }
      PlanStep step;
      step.kind = PlanStep::Matmul;
      step.name = k.info.name + "_gemm";
      step.slots = {slots.at(mm.operands[0], g), slots.at(mm.operands[1], g), slots.at(mv, g)};
      plan->steps.push_back(step);
      KernelInfo info = k.info;
      info.name = step.name;
      info.nodes = {grp.nodes.front()};
      int64_t n = mm.type().shape.end()[-2], m = mm.type().shape.end()[-1];
      int64_t kdim = g.type(mm.operands[0]).shape.back();
      info.flops = 2 * (mm.type().numel() / std::max<int64_t>(n * m, 1)) * n * m * kdim;
      r.kernels.push_back(info);
      r.artifacts.push_back({});
      r.step_values.push_back({mv});
    }
    if (k.fn) {
      PlanStep step;
      step.kind = PlanStep::Kernel;
      step.name = k.info.name;
      step.fn = k.fn;
      step.range = k.info.range;
      step.grain = std::max<int64_t>(k.info.grain, 1);
      for (Value v : k.buffers) step.slots.push_back(slots.at(v, g));
      plan->steps.push_back(step);
      r.kernels.push_back(k.info);
      r.artifacts.push_back(std::move(k.artifacts));
      r.step_values.push_back(grp.outputs);
    }
  }
  for (Value v : g.outputs) plan->outputs.push_back(slots.at(v, g));
  for (const ParamUpdate& u : g.updates) plan->updates.push_back({u.param, slots.at(u.value, g)});
  r.codegen_ms = ms_since(t1);
  return plan;
}

}  // namespace kiln
