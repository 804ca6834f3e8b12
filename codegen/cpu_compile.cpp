// The CPU backend (backend.h): a group becomes an LLVM kernel (cpu_backend.h)
// and, for a matmul group, an OpenBLAS step before it; a matmul group the
// schedule's accumulate step chose is one BLAS call into the parameter's buffer.
#include <algorithm>
#include <optional>

#include "codegen/backend.h"
#include "codegen/cpu_backend.h"
#include "codegen/kernel_template.h"
#include "codegen/lower.h"

namespace kiln {
namespace {

struct CpuLowered : LoweredGroup {
  CpuLoweredGroup l;
  void store_in_place(const std::vector<std::pair<Value, Value>>& pairs) override {
    kiln::store_in_place(l.kernel, pairs);
  }
};

struct CpuCompiled : CompiledGroup {
  CpuKernel kernel;
  bool epilogue_by_rows = false;  // a matmul group's: see epilogue_by_rows
  bool in_order = false;          // a map kernel's: see writes_in_order
};

// The indices of every store to buffer `b` (loads: of every load), in order.
void store_indices(const std::vector<kir::Stmt>& body, int32_t b, std::vector<kir::ValueId>* out) {
  for (const kir::Stmt& s : body) {
    if (s.kind == kir::StmtKind::store && s.ref == b) out->push_back(s.index);
    store_indices(s.body, b, out);
  }
}

// Whether a matmul group's epilogue kernel k may run on each block of the
// product's rows as soon as BLAS writes it (step::Matmul::epilogue): every output
// has the product's number of elements (its shape, or a reshape of it: a conv's
// [N, O, H'W'] product written as [N, O, H', W']) and one store, all at one
// index, and the product (buffer 0) is loaded at that index alone. Such a kernel
// walks the elements of its outputs in order, so iterations [r0, r1) * range /
// rows touch rows [r0, r1) of every buffer it writes and of the product alone.
bool epilogue_by_rows(const kir::Kernel& k) {
  if (k.buffers.empty() || k.buffers[0].output || k.serial_inner || k.buffers[0].shape.empty())
    return false;
  const Shape& shape = k.buffers[0].shape;
  const int64_t cols = shape.back(), numel = kiln::numel(shape);
  if (cols <= 0 || numel <= 0 || k.range <= 0 || k.range % (numel / cols) != 0) return false;
  std::vector<kir::ValueId> stores;
  for (size_t b = 1; b < k.buffers.size(); ++b) {
    if (!k.buffers[b].output) continue;
    if (kiln::numel(k.buffers[b].shape) != numel || k.buffers[b].sized_at_run_time) return false;
    const size_t before = stores.size();
    store_indices(k.body, int32_t(b), &stores);
    if (stores.size() != before + 1) return false;
  }
  if (stores.empty()) return false;
  for (kir::ValueId s : stores)
    if (s != stores[0]) return false;
  for (const kir::ValueDef& d : k.values)
    if (d.op == kir::ScalarOp::load && d.ref == 0 && d.args[0] != stores[0]) return false;
  return true;
}

// Whether the map kernel k (an elementwise or copy group's, lower_map.cpp: one
// loop over its output's elements) writes one output, at one index, the same
// number of elements each iteration: iterations [t r, (t + 1) r) then write the
// t-th block of r * numel / range elements and nothing else
// (step::CpuKernel::in_order).
bool writes_in_order(const kir::Kernel& k) {
  if (k.serial_inner || k.range <= 0) return false;
  int64_t outputs = 0, numel = 0;
  std::vector<kir::ValueId> stores;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (!k.buffers[b].output) continue;
    if (++outputs > 1 || k.buffers[b].sized_at_run_time) return false;
    numel = kiln::numel(k.buffers[b].shape);
    store_indices(k.body, int32_t(b), &stores);
  }
  return outputs == 1 && stores.size() == 1 && numel > 0 && numel % k.range == 0;
}

// The kernels of one compile, seen together: groups whose kernels differ only
// in sizes and constants (a family, kernel_template.h: the Adam update of each
// parameter) run one template, compiled for the family's first member; the
// others take its code in the second round, which starts after the first round
// has written `compiled` (each family's slot by one thread).
struct CpuBatch : GroupBatch {
  std::vector<int64_t> family;                          // per group: its family, or -1
  std::vector<size_t> member;                           // per group: its place in the family
  std::vector<kir::Family> families;
  std::vector<std::optional<CpuKernel>> compiled;  // per family: the first member's kernel
};

CpuCompileOptions group_options(const CompileContext& ctx, KernelTemplateCache& templates) {
  CpuCompileOptions o = cpu_compile_options(ctx.opts);
  o.templates = &templates;
  return o;
}

// Whether group `grp`'s kernel writes the buffer of any of the slots `others`.
bool writes_any(const PlanBuilder& pb, const FusionGroup& grp, const std::vector<int32_t>& others) {
  for (Value v : grp.outputs)
    for (int32_t o : others)
      if (pb.same_buffer(pb.slot(v), o)) return true;
  return false;
}

// Whether group `grp`'s kernel `run` (over `slots`) may run as one more part of
// the plan's last step: that step is a kernel step running the same code (the
// family of the Adam updates of a model's parameters, kernel_template.h), split
// with the same grain, and neither reads a buffer the other writes.
bool joins_last_step(const PlanBuilder& pb, const FusionGroup& grp, const step::CpuKernel& run,
                     const std::vector<int32_t>& slots) {
  const Plan& plan = pb.plan();
  if (plan.steps.empty()) return false;
  const PlanStep& last = plan.steps.back();
  const auto* k = std::get_if<step::CpuKernel>(&last.what);
  if (!k || k->fn != run.fn || k->grain != run.grain) return false;
  // Every buffer the last step writes, and every one it touches.
  std::vector<int32_t> last_written;
  for (Value v : pb.last_written()) last_written.push_back(pb.slot(v));
  for (int32_t s : slots)
    for (int32_t w : last_written)
      if (pb.same_buffer(s, w)) return false;
  return !writes_any(pb, grp, last.slots);
}

// A batched product's right operand b is written by its prologue
// (step::Matmul::prologue) when one element of its leading dim fits in a core's
// L2 (512 KiB on the Zen 3 and Xeon measured) and all of b is over 1 MiB, so
// that written whole it would have left the core's caches before it is read.
// Measured (one thread, three rounds, medians): the 5x5 conv's forward (patches
// of 7.5 MB, 235 KiB an image) 0.82-0.87x its time with a prologue, digits
// conv2's (576 KiB, 9 KiB an image, blocks of 7 images) 1.07x: a kernel call
// and a product call per block, and nothing to gain from the cache.
constexpr int64_t kPrologueBlockBytes = 512 << 10;
constexpr int64_t kPrologueMinBytes = 1 << 20;
// How far back the kernel writing b is looked for (a conv's weight reshape
// comes between its patches and its product).
constexpr size_t kPrologueLookBack = 3;

// Makes an earlier step the prologue of `step`, a matmul about to be added
// (step::Matmul::prologue), when it is an in-order kernel writing exactly the
// product's right operand b, whose leading dim is the product's (not
// broadcast), over 1 MiB but one element of it within L2; no step between
// shares a buffer with it (it moves past them), and no buffer it reads is
// written by `step` (its product and epilogue write block by block while it
// still reads).
void take_prologue(PlanBuilder& pb, PlanStep& step) {
  Plan& plan = pb.plan();
  auto& m = std::get<step::Matmul>(step.what);
  const TensorType& a = plan.slots[size_t(step.slots[0])].type;
  const TensorType& b = plan.slots[size_t(step.slots[1])].type;
  const TensorType& o = plan.slots[size_t(step.slots[2])].type;
  if (m.trans_b || b.shape.size() < 3 || o.shape.size() != b.shape.size() ||
      o.shape[0] != b.shape[0])
    return;
  const int64_t nb = b.shape[0];
  if (nb < 2 || b.bytes() <= kPrologueMinBytes || b.bytes() / nb > kPrologueBlockBytes) return;
  if (a.shape.size() == o.shape.size() && a.shape[0] != 1 && a.shape[0] != nb) return;
  auto shares = [&](const std::vector<int32_t>& x, const std::vector<int32_t>& y) {
    for (int32_t s : x)
      for (int32_t t : y)
        if (pb.same_buffer(s, t)) return true;
    return false;
  };
  for (size_t back = 1; back <= std::min(kPrologueLookBack, plan.steps.size()); ++back) {
    const size_t i = plan.steps.size() - back;
    PlanStep& p = plan.steps[i];
    auto* k = std::get_if<step::CpuKernel>(&p.what);
    const std::vector<Value>& w = pb.written(i);
    if (!k || !k->in_order || k->deferred || !k->more.empty() || w.size() != 1 ||
        !pb.same_buffer(pb.slot(w[0]), step.slots[1])) {
      if (shares(p.slots, {step.slots[1]})) return;  // another step touches b
      continue;
    }
    if (k->range % nb != 0) return;
    for (size_t j = i + 1; j < plan.steps.size(); ++j)
      if (shares(plan.steps[j].slots, p.slots)) return;
    if (shares(std::vector<int32_t>(step.slots.begin() + 2, step.slots.end()), p.slots)) return;
    k->deferred = true;
    m.prologue = static_cast<int32_t>(i);
    return;
  }
}

// P + alpha * (a @ b) stored over P: one BLAS call accumulating into P's buffer.
void add_accumulate_step(const CompileContext& ctx, const FusionGroup& grp, double alpha,
                         PlanBuilder& pb) {
  const Graph& g = ctx.g;
  const NodeId mm = grp.nodes.front();
  step::Matmul m;
  m.alpha = alpha;
  m.beta = 1;
  std::string name = "k";  // appended: GCC 12 warns (falsely) on "k" + std::string
  name += std::to_string(mm);
  name += "_matmul_accumulate";
  PlanStep step = pb.matmul_step(mm, pb.slot(grp.outputs[0]), name, m);
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

  void warm_up() const override { LlvmJit::get(); }  // the target, the JIT, a target machine
  bool sizes_at_run_time() const override { return true; }
  bool compiles_off_thread() const override { return true; }
  bool keeps_slots() const override { return true; }
  bool supports(const Graph& g, const FusionGroup& grp, std::string* why) const override {
    if (grp.kind != GroupKind::Opaque) return true;
    *why = std::string("cannot compile '") + op_name(g[grp.nodes.front()].op) +
           "' in a traced function (run it eagerly, outside the trace)";
    return false;
  }

  std::unique_ptr<LoweredGroup> lower_group(const CompileContext& ctx, size_t gi) const override {
    auto l = std::make_unique<CpuLowered>();
    l->l = lower_cpu_group(ctx.g, ctx.groups[gi], group_options(ctx, templates_));
    l->overwritable = overwritable(ctx.groups[gi], l->l.kernel);
    return l;
  }

  // Families only where kernels are compiled for their sizes: with dynamic
  // sizes, the templates of the backend's cache take their place.
  std::unique_ptr<GroupBatch> batch_groups(
      const CompileContext& ctx,
      const std::vector<std::unique_ptr<LoweredGroup>>& lowered) const override {
    const CompileOptions& opts = ctx.opts;
    if (!opts.backend_options<CpuOptions>().share_sizes || opts.dynamic_sizes ||
        opts.record_kernels_only)
      return nullptr;
    auto b = std::make_unique<CpuBatch>();
    const size_t n = ctx.groups.size();
    b->family.assign(n, -1);
    b->member.assign(n, 0);
    b->second_round.assign(n, 0);
    std::vector<const kir::Kernel*> kernels;
    std::vector<size_t> group_of;
    for (size_t gi = 0; gi < n; ++gi) {
      if (!lowered[gi] || ctx.sched.accumulate[gi]) continue;
      const CpuLoweredGroup& l = static_cast<const CpuLowered&>(*lowered[gi]).l;
      if (!l.has_output) continue;
      kernels.push_back(&l.kernel);
      group_of.push_back(gi);
    }
    b->families = kir::families(kernels);
    b->compiled.resize(b->families.size());
    for (size_t f = 0; f < b->families.size(); ++f) {
      const std::vector<size_t>& members = b->families[f].members;
      for (size_t m = 0; m < members.size(); ++m) {
        const size_t gi = group_of[members[m]];
        b->family[gi] = static_cast<int64_t>(f);
        b->member[gi] = m;
        b->second_round[gi] = m > 0;
      }
    }
    return b;
  }

  std::unique_ptr<CompiledGroup> compile_group(const CompileContext& ctx, size_t gi,
                                               std::unique_ptr<LoweredGroup> lowered,
                                               GroupBatch* batch) const override {
    if (ctx.sched.accumulate[gi]) return nullptr;  // BLAS alone
    const CpuCompileOptions o = group_options(ctx, templates_);
    CpuLoweredGroup l = std::move(static_cast<CpuLowered&>(*lowered).l);
    auto c = std::make_unique<CpuCompiled>();
    c->epilogue_by_rows = ctx.groups[gi].kind == GroupKind::Matmul &&
                          ctx.opts.backend_options<CpuOptions>().merge_steps && l.has_output &&
                          epilogue_by_rows(l.kernel);
    const GroupKind kind = ctx.groups[gi].kind;
    c->in_order = (kind == GroupKind::Elementwise || kind == GroupKind::Copy) &&
                  ctx.opts.backend_options<CpuOptions>().merge_steps && writes_in_order(l.kernel);
    auto* b = static_cast<CpuBatch*>(batch);
    const int64_t f = b ? b->family[gi] : -1;
    if (f < 0) {
      c->kernel = compile_cpu_group(std::move(l), o);
      return c;
    }
    const kir::Family& fam = b->families[static_cast<size_t>(f)];
    std::vector<int64_t> params = fam.params[b->member[gi]];
    std::optional<CpuKernel>& first = b->compiled[static_cast<size_t>(f)];
    if (b->member[gi] > 0 && first) {
      c->kernel = share_cpu_code(std::move(l), *first, fam.templ, std::move(params), o);
    } else {  // the first member (or the first failed: this one reports its own error)
      c->kernel = compile_cpu_group_as(std::move(l), fam.templ, std::move(params), o);
      if (b->member[gi] == 0) first = c->kernel;
    }
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
    if (k.artifacts.quick) r.kernels_quick++;
    if (k.artifacts.streaming_stores) r.kernels_streaming++;
    r.kernel_times += k.artifacts.times;
    step::CpuKernel run;
    run.fn = k.fn;
    run.better = k.better;
    run.params = std::move(k.params);
    run.range = k.info.range;
    run.grain = std::max<int64_t>(k.info.grain, 1);
    std::vector<int32_t> slots;
    auto kernel_slots = [&] {
      for (Value v : k.buffers) slots.push_back(pb.slot(v));
    };
    if (grp.kind == GroupKind::Matmul) {
      const NodeId mm = grp.nodes.front();
      // The raw product lives in a buffer of its own until the epilogue consumes it.
      PlanStep step = pb.matmul_step(mm, pb.temp_slot(Value(mm)), k.info.name + "_gemm");
      if (k.fn) kernel_slots();
      if (k.fn && static_cast<CpuCompiled&>(*code).epilogue_by_rows &&
          !writes_any(pb, grp, {step.slots[0], step.slots[1]})) {
        // One step: BLAS, and the epilogue on each block of rows it writes.
        step.name = k.info.name;
        run.own_slots = static_cast<int32_t>(slots.size());
        std::get<step::Matmul>(step.what).epilogue = std::move(run);
        step.slots.insert(step.slots.end(), slots.begin(), slots.end());
        if (ctx.opts.backend_options<CpuOptions>().merge_steps) take_prologue(pb, step);
        pb.plan().code.push_back(std::move(k.code));
        std::vector<Value> written{Value(mm)};
        written.insert(written.end(), grp.outputs.begin(), grp.outputs.end());
        pb.add(std::move(step), std::move(k.info), std::move(k.artifacts), std::move(written));
        return;
      }
      if (ctx.opts.backend_options<CpuOptions>().merge_steps) take_prologue(pb, step);
      pb.add(std::move(step), split_gemm_info(g, mm, &k.info), {}, {Value(mm)});
    }
    if (!k.fn) return;
    if (grp.kind != GroupKind::Matmul) kernel_slots();
    pb.plan().code.push_back(std::move(k.code));
    if (grp.kind != GroupKind::Matmul && ctx.opts.backend_options<CpuOptions>().merge_steps &&
        joins_last_step(pb, grp, run, slots)) {
      // A part of the last step (a foreach step): the same code on other buffers.
      auto& last = std::get<step::CpuKernel>(pb.plan().steps.back().what);
      if (last.more.empty())
        last.own_slots = static_cast<int32_t>(pb.plan().steps.back().slots.size());
      last.more.push_back({run.fn, std::move(run.params), run.range,
                           static_cast<int32_t>(slots.size()), run.better});
      pb.extend_last(slots, k.info, grp.outputs);
      return;
    }
    run.in_order = static_cast<CpuCompiled&>(*code).in_order;
    PlanStep step;
    step.name = k.info.name;
    step.what = std::move(run);
    step.slots = std::move(slots);
    pb.add(std::move(step), std::move(k.info), std::move(k.artifacts), grp.outputs);
  }

  void execute(const Plan& plan, void* const* args, void* const* params, void* const* outputs,
               KeptBuffers* keep) const override {
    execute_cpu_plan(plan, args, params, outputs, keep);
  }

  /// Kernels of every function this backend lowered, by content, for templates
  /// (dynamic sizes). Compiles of several plans use it at once; it locks itself.
  mutable KernelTemplateCache templates_;
};

}  // namespace

CpuCompileOptions cpu_compile_options(const CompileOptions& opts) {
  const CpuOptions cpu = opts.backend_options<CpuOptions>();
  CpuCompileOptions c;
  c.want_artifacts = opts.want_artifacts;
  c.cache_dir = opts.cache_dir;
  c.opt = cpu.llvm_opt;
  c.tier = cpu.tier;
  c.reuse_loaded = cpu.reuse_kernels;
  c.dynamic_sizes = opts.dynamic_sizes;
  c.record_only = opts.record_kernels_only;
  c.stream_min_bytes = cpu.stream_min_bytes;
  return c;
}

const KernelTemplateCache& cpu_kernel_templates() {
  return static_cast<const CpuBackend&>(cpu_backend()).templates_;
}

const Backend& cpu_backend() {
  // Never destroyed, like the JIT: a background compile may still use its cache at exit.
  static const CpuBackend* b = new CpuBackend();
  return *b;
}

}  // namespace kiln
