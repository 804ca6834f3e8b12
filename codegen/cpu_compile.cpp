// The CPU backend (backend.h): a group becomes an LLVM kernel (cpu_backend.h)
// and, for a matmul group, an OpenBLAS step before it; a matmul group the
// schedule's accumulate step chose is one BLAS call into the parameter's buffer.
#include <algorithm>

#include "codegen/backend.h"

namespace kiln {
namespace {

struct CpuCompiled : CompiledGroup {
  CpuKernel kernel;
};

// P + alpha * (a @ b) stored over P: one BLAS call accumulating into P's buffer.
void add_accumulate_step(const CompileContext& ctx, const FusionGroup& grp, double alpha,
                         PlanBuilder& pb) {
  const Graph& g = ctx.g;
  const NodeId mm = grp.nodes.front();
  step::Matmul m;
  m.alpha = alpha;
  m.beta = 1;
  PlanStep step = pb.matmul_step(mm, pb.slot(grp.outputs[0]),
                                 "k" + std::to_string(mm) + "_matmul_accumulate", m);
  KernelInfo info;
  info.name = step.name;
  info.kind = GroupKind::Matmul;
  info.nodes = grp.nodes;
  info.flops = matmul_flops(g, mm) + 2 * g.type(grp.outputs[0]).numel();  // and the scaled add
  const Node& n = g[mm];
  info.bytes_read =
      g.type(n.operands[0]).bytes() + g.type(n.operands[1]).bytes() + g.type(grp.outputs[0]).bytes();
  info.bytes_written = g.type(grp.outputs[0]).bytes();
  add_sources(info, g, grp.nodes);
  pb.add(std::move(step), std::move(info), {}, grp.outputs);
}

class CpuBackend final : public Backend {
 public:
  Target target(Device) const override { return {}; }

  bool supports(const Graph& g, const FusionGroup& grp, std::string* why) const override {
    if (grp.kind != GroupKind::Opaque) return true;
    *why = std::string("cannot compile '") + op_name(g[grp.nodes.front()].op) +
           "' in a traced function (run it eagerly, outside the trace)";
    return false;
  }

  std::unique_ptr<CompiledGroup> compile_group(const CompileContext& ctx, size_t gi) const override {
    if (ctx.sched.accumulate[gi]) return nullptr;  // BLAS alone
    CpuCompileOptions o = cpu_compile_options(ctx.opts);
    o.in_place = ctx.sched.in_place[gi];
    auto c = std::make_unique<CpuCompiled>();
    c->kernel = compile_cpu_kernel(ctx.g, ctx.groups[gi], o);
    return c;
  }

  // A matmul group: the BLAS call into the raw product's buffer, then the
  // compiled kernel (the epilogue, or the whole group).
  void add_steps(const CompileContext& ctx, size_t gi, std::unique_ptr<CompiledGroup> code,
                 PlanBuilder& pb) const override {
    const Graph& g = ctx.g;
    const FusionGroup& grp = ctx.groups[gi];
    if (ctx.sched.accumulate[gi]) return add_accumulate_step(ctx, grp, *ctx.sched.accumulate[gi], pb);
    CpuKernel& k = static_cast<CpuCompiled&>(*code).kernel;
    CompileReport& r = pb.report();
    if (k.artifacts.from_disk_cache) r.kernels_from_disk++;
    if (k.artifacts.reused) r.kernels_reused++;
    if (k.artifacts.templated) r.kernels_templated++;
    r.kernel_times += k.artifacts.times;
    if (grp.kind == GroupKind::Matmul) {
      const NodeId mm = grp.nodes.front();
      // The raw product lives in a buffer of its own until the epilogue consumes it.
      PlanStep step = pb.matmul_step(mm, pb.temp_slot(Value(mm)), k.info.name + "_gemm");
      pb.add(std::move(step), split_gemm_info(g, mm, &k.info), {}, {Value(mm)});
    }
    if (!k.fn) return;
    PlanStep step;
    step.name = k.info.name;
    step::CpuKernel run;
    run.fn = k.fn;
    run.params = std::move(k.params);
    run.range = k.info.range;
    run.grain = std::max<int64_t>(k.info.grain, 1);
    step.what = std::move(run);
    pb.plan().code.push_back(std::move(k.code));
    for (Value v : k.buffers) step.slots.push_back(pb.slot(v));
    pb.add(std::move(step), std::move(k.info), std::move(k.artifacts), grp.outputs);
  }

  void execute(const Plan& plan, void* const* args, void* const* params, void* const* outputs,
               KeptBuffers* keep) const override {
    execute_cpu_plan(plan, args, params, outputs, keep);
  }
};

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

const Backend& cpu_backend() {
  static const CpuBackend b;
  return b;
}

}  // namespace kiln
