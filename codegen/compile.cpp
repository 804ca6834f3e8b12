// The compile driver (see compile.h): the pipeline (graph passes, then the
// schedule), then slots, the host steps (index checks, collectives) and, for
// every other group, the steps the device's backend (backend.h) makes of it.
#include "codegen/compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>

#include "codegen/backend.h"
#include "passes/collectives.h"
#include "passes/pipeline.h"
#include "runtime/profile.h"
#include "runtime/reference.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// The plan's slots: arguments and parameters by index, graph outputs computed by
// a group in the caller's buffers, parameter updates in the parameters' own
// buffers (the schedule's in_place step), every other group output in its
// memory-plan buffer.
void assign_slots(const Graph& g, const Schedule& sched, PlanBuilder& pb) {
  Plan& plan = pb.plan();
  for (NodeId id : g.args()) {
    int64_t idx = g[id].attrs.i(AttrKey::index);
    pb.add_slot(PlanSlot::Arg, idx, g[id].type(), Value(id));
    plan.num_args = std::max(plan.num_args, idx + 1);
  }
  for (NodeId id : g.params()) {
    int64_t idx = g[id].attrs.i(AttrKey::index);
    pb.add_slot(PlanSlot::Param, idx, g[id].type(), Value(id));
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
    for (const auto& [v, p] : sched.direct[gi]) pb.alias(v, pb.slot(p));
    for (const auto& [v, p] : sched.in_place[gi]) pb.alias(v, pb.slot(p));
  }

  plan.temp_bytes = sched.memory.buffer_bytes;
  for (size_t gi = 0; gi < sched.groups.size(); ++gi) {
    const FusionGroup& grp = sched.groups[gi];
    for (size_t oi = 0; oi < grp.outputs.size(); ++oi) {
      Value v = grp.outputs[oi];
      if (pb.has_slot(v)) continue;
      auto pos = output_pos.find(v);
      if (pos != output_pos.end())
        pb.add_slot(PlanSlot::Output, pos->second, g.type(v), v);
      else
        pb.add_slot(PlanSlot::Temp, sched.memory.group_output_buffer[gi][oi], g.type(v), v);
    }
  }
  // A folded reshape: a slot of its own shape on its source's buffer.
  std::vector<std::pair<Value, Value>> folded(sched.folded_reshape.begin(),
                                              sched.folded_reshape.end());
  std::sort(folded.begin(), folded.end(),
            [](const auto& a, const auto& b) { return a.first.node < b.first.node; });
  for (const auto& [v, src] : folded) {
    const int32_t of = pb.slot(src);
    const PlanSlot s = plan.slots[static_cast<size_t>(of)];
    plan.slots[static_cast<size_t>(pb.add_slot(s.kind, s.index, g.type(v), v))].view_of = of;
  }
}

// A check node (check_index, check_nonzero, check_distribution) becomes a host step of its own
// (check, then copy); an argsort the sort library's step, attention and its
// gradient the attention library's, cluster_logprob and its gradient the
// cluster log-probability library's, each completed by the device's backend.
void add_library_step(const Backend& backend, const CompileContext& ctx, const FusionGroup& grp,
                      PlanBuilder& pb) {
  const Graph& g = ctx.g;
  const NodeId id = grp.nodes.front();
  const Node& n = g[id];
  PlanStep step;
  step.name = "k" + std::to_string(id) + "_" + op_name(n.op);
  step.slots = {pb.slot(n.operands[0]), pb.slot(Value(id))};
  if (op_info(n.op).category == OpCategory::Sort) {
    step.what = step::Sort{sort_lines_for(g.type(n.operands[0]), n.attrs), nullptr};
  } else if (op_info(n.op).category == OpCategory::Attention) {
    step.slots.pop_back();
    for (size_t i = 1; i < n.operands.size(); ++i) step.slots.push_back(pb.slot(n.operands[i]));
    step.slots.push_back(pb.slot(Value(id)));
    if (n.op == OpKind::cluster_logprob || n.op == OpKind::cluster_logprob_grad) {
      step.what = step::ClusterLogprob{
          cluster_logprob_shape(g.type(n.operands[0]), g.type(n.operands[1]), n.attrs),
          n.op == OpKind::cluster_logprob_grad ? int(n.attrs.i(AttrKey::which)) : -1, nullptr};
    } else {
      const bool grad = n.op == OpKind::attention_grad;
      step.what = step::Attention{attention_shape(g.type(n.operands[0]), g.type(n.operands[1]),
                                                  g.type(n.operands[2]), n.attrs),
                                  grad ? int(n.attrs.i(AttrKey::which)) : -1, nullptr};
    }
  } else {
    step.what = step::ValueCheck{n.op, n.attrs, n.loc};
  }
  backend.complete_library_step(ctx, step);
  KernelInfo info;
  info.name = step.name;
  info.kind = grp.kind;
  info.nodes = grp.nodes;
  add_sources(info, g, grp.nodes);
  info.bytes_read = info.bytes_written = n.type().bytes();
  pb.add(std::move(step), std::move(info), {}, grp.outputs);
}

// A bucket of collectives: its start or its wait step. The start adds the
// bucket to plan.collectives; the wait refers to it.
void add_collective_step(const Graph& g, const std::vector<FusionGroup>& groups,
                         const CollectiveSchedule::Bucket& b, bool start, PlanBuilder& pb) {
  Plan& plan = pb.plan();
  const Node& first = g[groups[b.groups.front()].nodes[0]];
  PlanStep step;
  KernelInfo info;
  info.kind = GroupKind::Opaque;
  if (start) {
    PlanCollective c;
    c.call = collective_call(first.op, first.attrs, g.type(first.operands[0]));
    c.call.count = 0;
    c.call.shapes.clear();
    c.call.loc = first.loc;
    c.bucket = b.id;
    c.loc = first.loc;
    std::string listed;  // the first few members, for messages
    for (size_t k = 0; k < b.groups.size(); ++k) {
      const NodeId id = groups[b.groups[k]].nodes[0];
      c.inputs.push_back(pb.slot(g[id].operands[0]));
      c.outputs.push_back(pb.slot(Value(id)));
      const TensorType& t = g.type(g[id].operands[0]);
      c.call.count += t.numel();
      c.call.shapes += (k ? ", " : "") + shape_str(t.shape);
      if (k < 4) listed += (k ? ", " : "") + t.str();
    }
    if (b.groups.size() > 4) listed += ", ... " + std::to_string(b.groups.size() - 4) + " more";
    const int64_t bytes = c.call.count * static_cast<int64_t>(dtype_size(c.call.dtype));
    // A bucket of one keeps the eager call's name (collective_call): "all_reduce of f32[4] (sum)".
    if (b.groups.size() > 1) {
      const std::string reduce = first.attrs.has(AttrKey::reduce)
                                     ? " (" + first.attrs.str(AttrKey::reduce) + ")"
                                     : std::string();
      c.call.what = std::string(op_name(first.op)) + " of bucket " + std::to_string(b.id) + " (" +
                    std::to_string(b.groups.size()) + " tensors: " + listed + "; " +
                    std::to_string(bytes) + " bytes)" + reduce;
    }
    step.what = step::CollectiveStart{static_cast<int32_t>(plan.collectives.size())};
    plan.collectives.push_back(std::move(c));
    info.bytes_read = bytes;
  } else {
    step::CollectiveWait w;
    for (size_t k = 0; k < plan.collectives.size(); ++k)
      if (plan.collectives[k].bucket == b.id) w.collective = static_cast<int32_t>(k);
    KILN_CHECK(w.collective >= 0, "internal: bucket ", b.id, " is waited for before it starts");
    const CollectiveCall& call = plan.collectives[static_cast<size_t>(w.collective)].call;
    info.bytes_written = collective_recv_count(call, static_cast<int>(first.attrs.i(AttrKey::world))) *
                         static_cast<int64_t>(dtype_size(call.dtype));
    step.what = w;
  }
  step.name = "c" + std::to_string(b.id) + "_" + op_name(first.op) + (start ? "_start" : "_wait");
  info.name = step.name;
  std::vector<Value> written;
  for (size_t gi : b.groups) {
    const NodeId id = groups[gi].nodes[0];
    info.nodes.push_back(id);
    if (!start) written.push_back(Value(id));
  }
  add_sources(info, g, info.nodes);
  pb.add(std::move(step), std::move(info), {}, std::move(written));
}

// One group's kernel, lowered, then compiled by the backend ahead of the step loop.
struct CompileJob {
  bool wanted = false;
  std::unique_ptr<LoweredGroup> lowered;
  std::unique_ptr<CompiledGroup> code;
  std::exception_ptr failed;  // rethrown when the step loop reaches the group
};

// Runs work(gi) for the jobs of `round` on the thread pool, each thread taking
// the next job left (kernels differ a lot in cost, so equal shares would leave
// threads idle), the biggest groups first, so the slowest does not start last.
// A job that throws keeps its exception.
template <class Work>
void run_jobs(const CompileContext& ctx, std::vector<size_t> round, std::vector<CompileJob>& jobs,
              const Work& work) {
  std::stable_sort(round.begin(), round.end(), [&](size_t a, size_t b) {
    return ctx.groups[a].nodes.size() > ctx.groups[b].nodes.size();
  });
  std::atomic<size_t> next{0};
  auto worker = [&](int64_t, int64_t) {
    for (size_t i = next++; i < round.size(); i = next++) {
      try {
        work(round[i]);
      } catch (...) {
        jobs[round[i]].failed = std::current_exception();
      }
    }
  };
  const int64_t threads = std::min<int64_t>(num_threads(), static_cast<int64_t>(round.size()));
  if (threads <= 1)
    worker(0, 1);
  else
    parallel_for(threads, 1, worker);
}

// Lowers every wanted group, once (the pipeline's `lower` stage).
void lower_groups(const Backend& backend, const CompileContext& ctx,
                  std::vector<CompileJob>& jobs) {
  std::vector<size_t> wanted;
  for (size_t gi = 0; gi < jobs.size(); ++gi)
    if (jobs[gi].wanted) wanted.push_back(gi);
  run_jobs(ctx, std::move(wanted), jobs,
           [&](size_t gi) { jobs[gi].lowered = backend.lower_group(ctx, gi); });
}

// Compiles the lowered jobs in the backend's two rounds (GroupBatch). LLVM
// compiles modules of separate contexts concurrently, and NVRTC programs compile
// concurrently; loading code is serialised inside each backend.
void compile_groups(const Backend& backend, const CompileContext& ctx,
                    std::vector<CompileJob>& jobs) {
  std::vector<std::unique_ptr<LoweredGroup>> lowered(jobs.size());
  for (size_t gi = 0; gi < jobs.size(); ++gi) lowered[gi] = std::move(jobs[gi].lowered);
  std::unique_ptr<GroupBatch> batch = backend.batch_groups(ctx, lowered);
  std::vector<size_t> first_round, second_round;
  for (size_t gi = 0; gi < jobs.size(); ++gi)
    if (lowered[gi])
      (batch && batch->second_round.at(gi) ? second_round : first_round).push_back(gi);
  for (std::vector<size_t>* round : {&first_round, &second_round})
    run_jobs(ctx, std::move(*round), jobs, [&](size_t gi) {
      jobs[gi].code = backend.compile_group(ctx, gi, std::move(lowered[gi]), batch.get());
    });
}

// The groups as the steps compile them: constant data (a literal, an arange) is
// written by an ordinary kernel.
std::vector<FusionGroup> step_groups(const Graph& g, const std::vector<FusionGroup>& groups) {
  std::vector<FusionGroup> out = groups;
  for (FusionGroup& grp : out) {
    bool data_only = grp.kind == GroupKind::Opaque;
    for (NodeId id : grp.nodes)
      data_only = data_only && (g[id].op == OpKind::literal || g[id].op == OpKind::arange);
    if (data_only) grp.kind = GroupKind::Elementwise;
  }
  return out;
}

// Checks and sorts are library steps of every backend (runtime/plan.h), not kernels.
bool is_library_step(const Graph& g, const FusionGroup& grp) {
  if (grp.kind != GroupKind::Opaque) return false;
  const OpCategory c = op_info(g[grp.nodes.front()].op).category;
  return c == OpCategory::Check || c == OpCategory::Sort || c == OpCategory::Attention;
}

Device graph_device(const Graph& g) {
  Device dev;
  NodeId first = kNoNode;
  for (NodeId id = 0; id < g.size(); ++id) {
    for (const TensorType& t : g[id].results) {
      if (first == kNoNode) {
        dev = t.device;
        first = id;
      } else if (t.device != dev) {
        throw Error("a compiled graph runs on one device, but %" + std::to_string(first) + " (" +
                        op_name(g[first].op) + ") is on " + dev.str() + " and %" +
                        std::to_string(id) + " (" + op_name(g[id].op) + ") on " + t.device.str() +
                        " (expected every argument and captured tensor on one device; move them "
                        "with .to())",
                    g[id].loc);
      }
    }
  }
  return dev;
}

}  // namespace

const Backend& backend_for(Device device) {
  switch (device.type) {
    case DeviceType::CPU:
      return cpu_backend();
    case DeviceType::CUDA:
      return cuda_backend();
  }
  throw Error("internal: no backend for " + device.str());
}

CompilerWarmUp::CompilerWarmUp(bool start) {
  static std::atomic<bool> done{false};
  if (start && !done.exchange(true)) thread_ = std::thread([] { backend_for(Device()).warm_up(); });
}

CompilerWarmUp::~CompilerWarmUp() {
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Plan> compile_graph(const Graph& input, const CompileOptions& opts,
                                    CompileReport* report) {
  CompileReport local;
  CompileReport& r = report ? *report : local;
  auto t0 = std::chrono::steady_clock::now();
  PipelineOptions popts;
  popts.record = opts.want_artifacts;
  popts.schedule.fusion = opts.fusion;
  popts.schedule.overlap_collectives = opts.overlap_collectives;
  r.passes.clear();
  Pipelined p = run_pipeline(input, popts, &r.passes);
  const Graph& g = p.graph;
  Schedule& sched = p.schedule;
  r.pipeline_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  const Device device = graph_device(g);
  const Backend& backend = backend_for(device);
  if (opts.record_kernels_only && !backend.sizes_at_run_time())
    throw Error("internal: a dynamic-size probe (record_kernels_only) for " + device.str() +
                ", whose kernels do not take sizes at run time");
  const Target target = backend.target(device);
  r.target = target.name;

  const CollectiveSchedule& comm = sched.comm;
  std::vector<int64_t> bucket_at(sched.groups.size(), -1);  // a bucket's first group -> bucket
  std::vector<char> later_member(sched.groups.size(), 0);
  for (size_t b = 0; b < comm.buckets.size(); ++b) {
    bucket_at[comm.buckets[b].groups.front()] = static_cast<int64_t>(b);
    for (size_t k = 1; k < comm.buckets[b].groups.size(); ++k) later_member[comm.buckets[b].groups[k]] = 1;
  }
  const std::vector<FusionGroup> groups = step_groups(g, sched.groups);
  const CompileContext ctx{g, sched, groups, opts, device, target.arch};

  // Every group the backend compiles is lowered once (the pipeline's `lower`
  // stage), and what lowering found decides the schedule's last steps.
  std::vector<CompileJob> jobs(groups.size());
  std::vector<std::string> unsupported(groups.size());
  for (size_t gi = 0; gi < groups.size(); ++gi)
    jobs[gi].wanted = !later_member[gi] && bucket_at[gi] < 0 && !is_library_step(g, groups[gi]) &&
                      backend.supports(g, groups[gi], &unsupported[gi]);
  lower_groups(backend, ctx, jobs);
  const double lower_ms = ms_since(t1);
  sched.overwritable.assign(groups.size(), {});
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (jobs[gi].lowered) sched.overwritable[gi] = jobs[gi].lowered->overwritable;
  const auto t2 = std::chrono::steady_clock::now();
  finish_pipeline(p, popts, lower_ms, &r.passes);
  const double finish_ms = ms_since(t2);
  r.pipeline_ms += finish_ms;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (jobs[gi].lowered && !sched.in_place[gi].empty())
      jobs[gi].lowered->store_in_place(sched.in_place[gi]);
  r.optimized = g;
  r.groups = sched.groups;
  r.memory = sched.memory;

  auto plan = std::make_shared<Plan>();
  plan->device = device;
  r.kernels.clear();
  r.artifacts.clear();
  r.step_values.clear();
  r.slot_values.clear();
  PlanBuilder pb(g, sched, *plan, r);
  assign_slots(g, sched, pb);

  // Every group lowered is compiled first, in parallel; the steps below take
  // them in order.
  compile_groups(backend, ctx, jobs);
  if (opts.record_kernels_only) return nullptr;

  auto start_buckets_after = [&](size_t after) {
    for (const CollectiveSchedule::Bucket& b : comm.buckets)
      if (b.start_after == after) add_collective_step(g, sched.groups, b, /*start=*/true, pb);
  };
  start_buckets_after(CollectiveSchedule::kBeforeAll);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (gi > 0) start_buckets_after(gi - 1);
    if (later_member[gi]) continue;
    if (bucket_at[gi] >= 0) {
      add_collective_step(g, sched.groups, comm.buckets[static_cast<size_t>(bucket_at[gi])],
                          /*start=*/false, pb);
    } else if (is_library_step(g, groups[gi])) {
      add_library_step(backend, ctx, groups[gi], pb);
    } else if (!jobs[gi].wanted) {
      throw Error(unsupported[gi], g[groups[gi].nodes.front()].loc);
    } else {
      if (jobs[gi].failed) std::rethrow_exception(jobs[gi].failed);
      backend.add_steps(ctx, gi, std::move(jobs[gi].code), pb);
    }
  }
  for (Value v : g.outputs) plan->outputs.push_back(pb.slot(v));
  for (const ParamUpdate& u : g.updates) plan->updates.push_back({u.param, pb.slot(u.value)});
  r.codegen_ms = ms_since(t1) - finish_ms;
  return plan;
}

}  // namespace kiln
