// The compile driver (see compile.h): the pass pipeline, the schedule
// (codegen/schedule.h), then slots, kernels and plan steps.
#include "codegen/compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <unordered_map>

#include "codegen/cuda_compile.h"
#include "codegen/schedule.h"
#include "passes/collectives.h"
#include "passes/pipeline.h"
#include "runtime/reference.h"
#include "runtime/cuda_driver.h"
#include "runtime/thread_pool.h"

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

// A matmul operand's slot (matmul_operand: a folded transpose's source, flagged).
int32_t operand_slot(const Graph& g, const Schedule& sched, const SlotTable& slots, Value v,
                     bool* trans) {
  return slots.at(matmul_operand(sched, v, trans), g);
}

// The plan's slots: arguments and parameters by index, graph outputs computed by
// a group in the caller's buffers, parameter updates in the parameters' own
// buffers (the schedule's in_place step), every other group output in its
// memory-plan buffer.
void assign_slots(const Graph& g, const Schedule& sched, SlotTable& slots, Plan& plan) {
  for (NodeId id : g.args()) {
    int64_t idx = g[id].attrs.i(AttrKey::index);
    slots.add(PlanSlot::Arg, idx, g[id].type(), Value(id));
    plan.num_args = std::max(plan.num_args, idx + 1);
  }
  for (NodeId id : g.params()) {
    int64_t idx = g[id].attrs.i(AttrKey::index);
    slots.add(PlanSlot::Param, idx, g[id].type(), Value(id));
    plan.num_params = std::max(plan.num_params, idx + 1);
  }
  // Graph outputs computed by a group are written straight into the caller's buffers.
  std::unordered_map<Value, int64_t, ValueHash> output_pos;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    Value v = g.outputs[i];
    if (op_info(g[v.node].op).category == OpCategory::Input || output_pos.count(v)) continue;
    output_pos[v] = static_cast<int64_t>(i);
  }
  // Parameter updates written into the parameters' own buffers (the schedule's in_place step).
  for (size_t gi = 0; gi < sched.groups.size(); ++gi) {
    for (const auto& [v, p] : sched.direct[gi]) slots.of[v] = slots.at(p, g);
    for (const auto& [v, p] : sched.in_place[gi]) slots.of[v] = slots.at(p, g);
  }

  plan.temp_bytes = sched.memory.buffer_bytes;
  for (size_t gi = 0; gi < sched.groups.size(); ++gi) {
    const FusionGroup& grp = sched.groups[gi];
    for (size_t oi = 0; oi < grp.outputs.size(); ++oi) {
      Value v = grp.outputs[oi];
      if (slots.of.count(v)) continue;
      auto pos = output_pos.find(v);
      if (pos != output_pos.end())
        slots.add(PlanSlot::Output, pos->second, g.type(v), v);
      else
        slots.add(PlanSlot::Temp, sched.memory.group_output_buffer[gi][oi], g.type(v), v);
    }
  }
}

// P - c * (a @ b) stored over P: one BLAS call accumulating into P's buffer.
void add_accumulate_step(const Graph& g, const Schedule& sched, const FusionGroup& grp, double alpha,
                         const SlotTable& slots, Plan& plan, CompileReport& r) {
  const Node& mm = g[grp.nodes.front()];
  PlanStep step;
  step.kind = PlanStep::Matmul;
  step.name = "k" + std::to_string(grp.nodes.front()) + "_matmul_accumulate";
  step.slots = {operand_slot(g, sched, slots, mm.operands[0], &step.trans_a),
                operand_slot(g, sched, slots, mm.operands[1], &step.trans_b), slots.at(grp.outputs[0], g)};
  step.alpha = alpha;
  step.beta = 1;
  plan.steps.push_back(step);
  KernelInfo info;
  info.name = step.name;
  info.kind = GroupKind::Matmul;
  info.nodes = grp.nodes;
  int64_t n = mm.type().shape.end()[-2], m = mm.type().shape.end()[-1];
  info.flops = 2 * mm.type().numel() * g.type(mm.operands[0]).shape.back() + 2 * n * m;
  auto bytes_of = [&](Value v) {
    return g.type(v).numel() * static_cast<int64_t>(dtype_size(g.type(v).dtype));
  };
  info.bytes_read = bytes_of(mm.operands[0]) + bytes_of(mm.operands[1]) + bytes_of(grp.outputs[0]);
  info.bytes_written = bytes_of(grp.outputs[0]);
  for (NodeId id : grp.nodes)
    if (g[id].loc.known() && std::find(info.sources.begin(), info.sources.end(), g[id].loc.str()) == info.sources.end())
      info.sources.push_back(g[id].loc.str());
  r.kernels.push_back(info);
  r.artifacts.push_back({});
  r.step_values.push_back(grp.outputs);
}

// A CPU group's steps: for a matmul group the BLAS call into the raw product's
// buffer, then the compiled kernel (the epilogue, or the whole group).
void add_cpu_group_steps(const Graph& g, const Schedule& sched, const FusionGroup& grp,
                         CpuKernel k, SlotTable& slots, Plan& plan, CompileReport& r) {
  if (k.artifacts.from_disk_cache) r.kernels_from_disk++;
  if (k.artifacts.reused) r.kernels_reused++;
  if (k.artifacts.templated) r.kernels_templated++;
  r.kernel_times += k.artifacts.times;
  if (grp.kind == GroupKind::Matmul) {
    const Node& mm = g[grp.nodes.front()];
    Value mv(grp.nodes.front());
    if (!slots.of.count(mv)) {
      // The raw product lives in a buffer of its own until the epilogue consumes it.
      int64_t tid = static_cast<int64_t>(plan.temp_bytes.size());
      plan.temp_bytes.push_back(mm.type().bytes());
      slots.add(PlanSlot::Temp, tid, mm.type(), mv);
    }
    PlanStep step;
    step.kind = PlanStep::Matmul;
    step.name = k.info.name + "_gemm";
    int32_t sa = operand_slot(g, sched, slots, mm.operands[0], &step.trans_a);
    int32_t sb = operand_slot(g, sched, slots, mm.operands[1], &step.trans_b);
    step.slots = {sa, sb, slots.at(mv, g)};
    plan.steps.push_back(step);
    // The group's totals cover the product and its epilogue: split them between
    // the gemm step and the epilogue kernel so nothing is counted twice.
    auto bytes_of = [&](Value v) { return g.type(v).numel() * static_cast<int64_t>(dtype_size(g.type(v).dtype)); };
    int64_t n = mm.type().shape.end()[-2], m = mm.type().shape.end()[-1];
    int64_t kdim = g.type(mm.operands[0]).shape.back();
    int64_t operand_bytes = bytes_of(mm.operands[0]) + bytes_of(mm.operands[1]);
    int64_t product_bytes = bytes_of(mv);
    KernelInfo info = k.info;
    info.name = step.name;
    info.nodes = {grp.nodes.front()};
    info.flops = 2 * (mm.type().numel() / std::max<int64_t>(n * m, 1)) * n * m * kdim;
    info.bytes_read = operand_bytes;
    info.bytes_written = product_bytes;
    k.info.flops = std::max<int64_t>(0, k.info.flops - info.flops);
    k.info.bytes_read = std::max<int64_t>(0, k.info.bytes_read - operand_bytes) + product_bytes;
    r.kernels.push_back(info);
    r.artifacts.push_back({});
    r.step_values.push_back({mv});
  }
  if (k.fn) {
    PlanStep step;
    step.kind = PlanStep::Kernel;
    step.name = k.info.name;
    step.fn = k.fn;
    step.params = std::move(k.params);
    plan.code.push_back(std::move(k.code));
    step.range = k.info.range;
    step.grain = std::max<int64_t>(k.info.grain, 1);
    for (Value v : k.buffers) step.slots.push_back(slots.at(v, g));
    plan.steps.push_back(step);
    r.kernels.push_back(k.info);
    r.artifacts.push_back(std::move(k.artifacts));
    r.step_values.push_back(grp.outputs);
  }
}

// A check node (check_index) becomes a host step of its own: check, then copy.
void add_check_step(const Graph& g, const FusionGroup& grp, SlotTable& slots, Plan& plan,
                    CompileReport& r) {
  const NodeId id = grp.nodes.front();
  const Node& n = g[id];
  PlanStep step;
  step.kind = PlanStep::IndexCheck;
  step.name = "k" + std::to_string(id) + "_" + op_name(n.op);
  step.slots = {slots.at(n.operands[0], g), slots.at(Value(id), g)};
  step.high = n.attrs.i(AttrKey::high);
  step.check_op = n.attrs.str(AttrKey::name);
  step.loc = n.loc;
  plan.steps.push_back(step);
  KernelInfo info;
  info.name = step.name;
  info.kind = grp.kind;
  info.nodes = grp.nodes;
  if (n.loc.known()) info.sources.push_back(n.loc.str());
  info.bytes_read = info.bytes_written = n.type().bytes();
  r.kernels.push_back(info);
  r.artifacts.push_back({});
  r.step_values.push_back(grp.outputs);
}

// A bucket of collectives: its start or its wait step. The start adds the
// bucket to plan.collectives; the wait refers to it.
void add_collective_step(const Graph& g, const std::vector<FusionGroup>& groups,
                         const CollectiveSchedule::Bucket& b, PlanStep::Kind kind,
                         SlotTable& slots, Plan& plan, CompileReport& r) {
  const Node& first = g[groups[b.groups.front()].nodes[0]];
  PlanStep step;
  step.kind = kind;
  KernelInfo info;
  info.kind = GroupKind::Opaque;
  if (kind == PlanStep::CollectiveStart) {
    PlanCollective c;
    c.call = collective_call(first.op, first.attrs, g.type(first.operands[0]));
    c.call.count = 0;
    c.bucket = b.id;
    c.loc = first.loc;
    for (size_t gi : b.groups) {
      const NodeId id = groups[gi].nodes[0];
      c.inputs.push_back(slots.at(g[id].operands[0], g));
      c.outputs.push_back(slots.at(Value(id), g));
      c.call.count += g.type(g[id].operands[0]).numel();
    }
    const int64_t bytes = c.call.count * static_cast<int64_t>(dtype_size(c.call.dtype));
    c.call.what = std::string(op_name(first.op)) + " of bucket " + std::to_string(b.id) + " (" +
                  std::to_string(b.groups.size()) + (b.groups.size() == 1 ? " tensor, " : " tensors, ") +
                  std::to_string(bytes) + " bytes)";
    step.collective = static_cast<int32_t>(plan.collectives.size());
    plan.collectives.push_back(std::move(c));
    info.bytes_read = bytes;
  } else {
    for (size_t k = 0; k < plan.collectives.size(); ++k)
      if (plan.collectives[k].bucket == b.id) step.collective = static_cast<int32_t>(k);
    KILN_CHECK(step.collective >= 0, "internal: bucket ", b.id, " is waited for before it starts");
    const CollectiveCall& call = plan.collectives[static_cast<size_t>(step.collective)].call;
    info.bytes_written = collective_recv_count(call, static_cast<int>(first.attrs.i(AttrKey::world))) *
                         static_cast<int64_t>(dtype_size(call.dtype));
  }
  step.name = "c" + std::to_string(b.id) + "_" + op_name(first.op) +
              (kind == PlanStep::CollectiveStart ? "_start" : "_wait");
  plan.steps.push_back(step);
  info.name = step.name;
  std::vector<Value> written;
  for (size_t gi : b.groups) {
    const NodeId id = groups[gi].nodes[0];
    info.nodes.push_back(id);
    if (g[id].loc.known() &&
        std::find(info.sources.begin(), info.sources.end(), g[id].loc.str()) == info.sources.end())
      info.sources.push_back(g[id].loc.str());
    if (kind == PlanStep::CollectiveWait) written.push_back(Value(id));
  }
  r.kernels.push_back(info);
  r.artifacts.push_back({});
  r.step_values.push_back(written);
}

// One group's CPU kernel, compiled ahead of the step loop.
struct KernelJob {
  bool wanted = false;
  const FusionGroup* group = nullptr;
  CpuCompileOptions opts;
  CpuKernel kernel;
  std::exception_ptr failed;  // rethrown when the step loop reaches the group
};

// Compiles the wanted jobs on the thread pool, each thread taking the next job
// left (kernels differ a lot in cost, so equal shares would leave threads idle).
// LLVM compiles modules of separate contexts concurrently; loading into the JIT
// is serialised inside LlvmJit.
void compile_kernels(const Graph& g, std::vector<KernelJob>& jobs) {
  std::vector<KernelJob*> wanted;
  for (KernelJob& j : jobs)
    if (j.wanted) wanted.push_back(&j);
  // Biggest groups first, so the slowest kernel does not start last.
  std::stable_sort(wanted.begin(), wanted.end(), [](const KernelJob* a, const KernelJob* b) {
    return a->group->nodes.size() > b->group->nodes.size();
  });
  std::atomic<size_t> next{0};
  auto worker = [&](int64_t, int64_t) {
    for (size_t i = next++; i < wanted.size(); i = next++) {
      try {
        wanted[i]->kernel = compile_cpu_kernel(g, *wanted[i]->group, wanted[i]->opts);
      } catch (...) {
        wanted[i]->failed = std::current_exception();
      }
    }
  };
  const int64_t threads = std::min<int64_t>(num_threads(), static_cast<int64_t>(wanted.size()));
  if (threads <= 1) {
    worker(0, 1);
    return;
  }
  parallel_for(threads, 1, worker);
}

}  // namespace

CpuCompileOptions cpu_compile_options(const CompileOptions& opts) {
  CpuCompileOptions c;
  c.want_artifacts = opts.want_artifacts;
  c.cache_dir = opts.cache_dir;
  c.opt = opts.llvm_opt;
  c.reuse_loaded = opts.reuse_kernels;
  c.dynamic_sizes = opts.dynamic_sizes;
  c.record_only = opts.record_kernels_only;
  c.template_scope = opts.template_scope;
  return c;
}

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
  // A graph on a CUDA device compiles its groups with the CUDA backend (cuda_compile.h).
  const Device device = graph_device(g);
  const int arch = device.is_cuda() ? cuda_arch(device) : 0;
  r.target = device.is_cuda() ? device.str() + " " + cuda::device_info(device.index).str() : "";

  auto t1 = std::chrono::steady_clock::now();
  ScheduleOptions sopts;
  sopts.fusion = opts.fusion;
  sopts.overlap_collectives = opts.overlap_collectives;
  const Schedule sched = schedule_graph(g, sopts, &r.passes, opts.want_artifacts);
  r.groups = sched.groups;
  r.memory = sched.memory;
  const CollectiveSchedule& comm = sched.comm;

  auto plan = std::make_shared<Plan>();
  plan->device = device;
  SlotTable slots{*plan, r.slot_values, {}};
  assign_slots(g, sched, slots, *plan);

  const CpuCompileOptions copts = cpu_compile_options(opts);
  r.kernels.clear();
  r.artifacts.clear();
  r.step_values.clear();
  auto temp_slot = [&](Value v) {
    if (slots.of.count(v)) return slots.of.at(v);
    int64_t tid = static_cast<int64_t>(plan->temp_bytes.size());
    plan->temp_bytes.push_back(g.type(v).bytes());
    return slots.add(PlanSlot::Temp, tid, g.type(v), v);
  };
  CudaGroupContext gpu{g, opts, device, arch, [&](Value v) { return slots.at(v, g); }, temp_slot,
                       sched};
  std::vector<int64_t> bucket_at(r.groups.size(), -1);  // a bucket's first group -> bucket
  std::vector<char> later_member(r.groups.size(), 0);
  for (size_t b = 0; b < comm.buckets.size(); ++b) {
    bucket_at[comm.buckets[b].groups.front()] = static_cast<int64_t>(b);
    for (size_t k = 1; k < comm.buckets[b].groups.size(); ++k) later_member[comm.buckets[b].groups[k]] = 1;
  }
  auto start_buckets_after = [&](size_t after) {
    for (size_t b = 0; b < comm.buckets.size(); ++b)
      if (comm.buckets[b].start_after == after)
        add_collective_step(g, r.groups, comm.buckets[b], PlanStep::CollectiveStart, slots, *plan, r);
  };
  // The groups as the steps compile them: constant data (a literal, an arange) is
  // written by an ordinary kernel.
  std::vector<FusionGroup> step_groups = r.groups;
  for (FusionGroup& grp : step_groups) {
    bool data_only = grp.kind == GroupKind::Opaque;
    for (NodeId id : grp.nodes) data_only = data_only && (g[id].op == OpKind::literal || g[id].op == OpKind::arange);
    if (data_only) grp.kind = GroupKind::Elementwise;
  }
  const std::vector<std::optional<double>>& accumulate = sched.accumulate;
  // Every CPU kernel is compiled first, in parallel; the steps below take them in order.
  std::vector<KernelJob> jobs(step_groups.size());
  for (size_t gi = 0; gi < step_groups.size(); ++gi) {
    const FusionGroup& grp = step_groups[gi];
    jobs[gi].wanted = !device.is_cuda() && !later_member[gi] && bucket_at[gi] < 0 &&
                      grp.kind != GroupKind::Opaque && !accumulate[gi];
    jobs[gi].group = &grp;
    jobs[gi].opts = copts;
    jobs[gi].opts.in_place = sched.in_place[gi];
  }
  compile_kernels(g, jobs);
  if (opts.record_kernels_only) return nullptr;

  start_buckets_after(CollectiveSchedule::kBeforeAll);
  for (size_t gi = 0; gi < r.groups.size(); ++gi) {
    if (gi > 0) start_buckets_after(gi - 1);
    if (later_member[gi]) continue;
    if (bucket_at[gi] >= 0) {
      add_collective_step(g, r.groups, comm.buckets[static_cast<size_t>(bucket_at[gi])],
                          PlanStep::CollectiveWait, slots, *plan, r);
      continue;
    }
    const FusionGroup& grp = step_groups[gi];
    if (grp.kind == GroupKind::Opaque &&
        op_info(g[grp.nodes.front()].op).category == OpCategory::Check) {
      add_check_step(g, grp, slots, *plan, r);
      continue;
    }
    if (grp.kind == GroupKind::Opaque)
      throw Error(std::string("cannot compile '") + op_name(g[grp.nodes.front()].op) +
                      "' in a traced function (run it eagerly, outside the trace)",
                  g[grp.nodes.front()].loc);
    if (device.is_cuda()) {
      add_cuda_group_steps(gpu, grp, sched.in_place[gi], *plan, r);
      continue;
    }
    if (accumulate[gi]) {
      add_accumulate_step(g, sched, grp, *accumulate[gi], slots, *plan, r);
      continue;
    }
    if (jobs[gi].failed) std::rethrow_exception(jobs[gi].failed);
    add_cpu_group_steps(g, sched, grp, std::move(jobs[gi].kernel), slots, *plan, r);
  }
  for (Value v : g.outputs) plan->outputs.push_back(slots.at(v, g));
  for (const ParamUpdate& u : g.updates) plan->updates.push_back({u.param, slots.at(u.value, g)});
  r.codegen_ms = ms_since(t1);
  return plan;
}

}  // namespace kiln
