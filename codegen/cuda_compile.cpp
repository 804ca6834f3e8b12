// The CUDA backend (backend.h, cuda_compile.h): a group becomes CUDA C
// (cuda_backend.h), compiled by NVRTC for the device's own architecture and
// loaded; a matmul group becomes a cuBLAS step, with its epilogue fused into
// one cuBLASLt call where cuBLASLt has it (bias, ReLU, bias then ReLU) or else
// followed by a generated kernel. Sort and attention steps get the library
// kernels (cuda_library.h).
#include "codegen/cuda_compile.h"

#include <chrono>

#include "codegen/backend.h"
#include "codegen/cuda_backend.h"
#include "codegen/cuda_library.h"
#include "codegen/lower.h"
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_executor.h"
#include "runtime/object_cache.h"
#include "runtime/profile.h"

namespace kiln {
namespace {

// A float32 matmul group whose epilogue cuBLASLt computes itself: + bias (a
// vector over the product's columns), then ReLU, each optional.
struct LtEpilogue {
  Value bias;  // invalid: no bias
  bool relu = false;
};

bool match_lt_epilogue(const Graph& g, const FusionGroup& grp, LtEpilogue* e) {
  const Node& mm = g[grp.nodes.front()];
  const TensorType& t = mm.type();
  if (grp.outputs.size() != 1 || grp.nodes.size() < 2) return false;
  if (t.dtype != DType::f32) return false;  // cuBLASLt's bias/ReLU epilogues: float32
  for (Value o : mm.operands)
    if (g.type(o).dtype != t.dtype || g.type(o).numel() == 0) return false;
  for (size_t d = 0; d + 2 < t.shape.size(); ++d)
    if (t.shape[d] != 1) return false;
  if (t.numel() == 0) return false;
  const int64_t cols = t.shape.back();
  Value cur(grp.nodes.front());
  size_t i = 1;
  if (i < grp.nodes.size() && g[grp.nodes[i]].op == OpKind::add) {
    const Node& add = g[grp.nodes[i]];
    Value other = add.operands[0] == cur ? add.operands[1] : add.operands[0];
    const TensorType& bt = g.type(other);
    bool is_input = std::find(grp.inputs.begin(), grp.inputs.end(), other) != grp.inputs.end();
    bool vector = !bt.shape.empty() && bt.shape.back() == cols && bt.numel() == cols;
    if ((add.operands[0] != cur && add.operands[1] != cur) || other == cur || !is_input ||
        !vector || bt.dtype != t.dtype || add.type().shape != t.shape)
      return false;
    e->bias = other;
    cur = Value(grp.nodes[i++]);
  }
  if (i < grp.nodes.size() && g[grp.nodes[i]].op == OpKind::relu &&
      g[grp.nodes[i]].operands[0] == cur) {
    e->relu = true;
    cur = Value(grp.nodes[i++]);
  }
  return i == grp.nodes.size() && grp.outputs.front() == cur;
}

struct CudaLowered : LoweredGroup {
  kir::Kernel kernel;
  double lower_ms = 0;
  void store_in_place(const std::vector<std::pair<Value, Value>>& pairs) override {
    kiln::store_in_place(kernel, pairs);
  }
};

struct CudaCompiled : CompiledGroup {
  CudaKernelSource src;
  CudaBinary bin;  // empty when the group needs no kernel (a lone matmul)
  double compile_ms = 0;
};

class CudaBackend final : public Backend {
 public:
  Target target(Device device) const override {
    return {device.str() + " " + cuda::device_info(device.index).str(), cuda_arch(device)};
  }

  // Every size compiles its own kernels; a compile wants the caller's CUDA
  // context; the executor keeps no slots for checking.
  bool sizes_at_run_time() const override { return false; }
  bool compiles_off_thread() const override { return false; }
  bool keeps_slots() const override { return false; }
  bool supports(const Graph& g, const FusionGroup& grp, std::string* why) const override {
    return cpu_backend().supports(g, grp, why);  // the same groups: every kind but opaque
  }

  // The same kernel IR the CPU lowers, without its column reductions (a GPU
  // keeps a block of threads per output element instead).
  std::unique_ptr<LoweredGroup> lower_group(const CompileContext& ctx, size_t gi) const override {
    const auto t0 = std::chrono::steady_clock::now();
    auto l = std::make_unique<CudaLowered>();
    l->kernel = kiln::lower_group(ctx.g, ctx.groups[gi]);
    l->overwritable = overwritable(ctx.groups[gi], l->kernel);
    l->lower_ms = ms_since(t0);
    return l;
  }

  // CUDA C and NVRTC (thread-safe: groups compile in parallel); loading waits for
  // add_steps. No driver call here: the workers bind no CUDA context.
  std::unique_ptr<CompiledGroup> compile_group(const CompileContext& ctx, size_t gi,
                                               std::unique_ptr<LoweredGroup> lowered,
                                               GroupBatch*) const override {
    auto t0 = std::chrono::steady_clock::now();
    auto c = std::make_unique<CudaCompiled>();
    CudaLowered& l = static_cast<CudaLowered&>(*lowered);
    c->src = generate_cuda_kernel(ctx.g, ctx.groups[gi], std::move(l.kernel), {});
    if (c->src.needs_kernel)
      c->bin = nvrtc_compile(c->src.source, c->src.name, ctx.arch, /*want_cubin=*/true,
                             ctx.opts.cache_dir);
    c->compile_ms = l.lower_ms + ms_since(t0);
    return c;
  }

  void add_steps(const CompileContext& ctx, size_t gi, std::unique_ptr<CompiledGroup> code,
                 PlanBuilder& pb) const override {
    const Graph& g = ctx.g;
    const FusionGroup& grp = ctx.groups[gi];
    CudaCompiled& c = static_cast<CudaCompiled&>(*code);
    KernelInfo info = c.src.info;
    if (grp.kind == GroupKind::Matmul) {
      const NodeId mm = grp.nodes.front();
      LtEpilogue lt;
      if (match_lt_epilogue(g, grp, &lt) && cublas_available()) {
        // One cuBLASLt call computes the product and its whole epilogue (not when
        // the result is stored over an operand, as a parameter update may be).
        step::Matmul m;
        m.relu = lt.relu;
        PlanStep step = pb.matmul_step(mm, pb.slot(grp.outputs.front()), info.name + "_gemm_lt", m);
        const int32_t so = step.slots[2];
        if (so != step.slots[0] && so != step.slots[1] &&
            (!lt.bias.valid() || so != pb.slot(lt.bias))) {
          if (lt.bias.valid()) step.slots.push_back(pb.slot(lt.bias));
          info.name = step.name;
          pb.add(std::move(step), std::move(info), {}, grp.outputs);
          return;
        }
      }
      PlanStep step = pb.matmul_step(mm, pb.temp_slot(Value(mm)), info.name + "_gemm");
      pb.add(std::move(step), split_gemm_info(g, mm, &info), {}, {Value(mm)});
    }
    if (!c.src.needs_kernel) return;

    auto t0 = std::chrono::steady_clock::now();
    auto image = [](const CudaBinary& b) {
      return b.cubin.empty() ? b.ptx : std::string(b.cubin.begin(), b.cubin.end());
    };
    cuda::Function fn = nullptr;
    try {
      fn = cuda::load_function(image(c.bin), c.src.name, ctx.device.index);
    } catch (const Error& e) {
      if (!c.bin.from_disk_cache) throw;
      // A cache entry the driver refuses is damaged like any other: reported
      // once, compiled again (without the cache if the entry stayed), stored.
      ObjectCache(ctx.opts.cache_dir).discard(c.bin.cache_key, e.message());
      c.bin = nvrtc_compile(c.src.source, c.src.name, ctx.arch, true, ctx.opts.cache_dir);
      if (c.bin.from_disk_cache) c.bin = nvrtc_compile(c.src.source, c.src.name, ctx.arch, true);
      fn = cuda::load_function(image(c.bin), c.src.name, ctx.device.index);
    }
    const CudaBinary& bin = c.bin;
    PlanStep step;
    step.name = info.name;
    step.what = step::CudaKernel{fn, c.src.launch};
    for (Value v : c.src.buffers) step.slots.push_back(pb.slot(v));

    KernelArtifacts a;
    a.compile_ms = c.compile_ms + ms_since(t0);
    a.from_disk_cache = bin.from_disk_cache;
    if (bin.from_disk_cache) pb.report().kernels_from_disk++;
    if (ctx.opts.want_artifacts) {
      a.kernel_ir = c.src.kernel_ir;
      a.cuda_source = c.src.source;
      a.ptx = bin.ptx;
    }
    pb.add(std::move(step), std::move(info), std::move(a), grp.outputs);
  }

  // Sort, attention and cluster log-probability steps run the library kernels
  // (codegen/cuda_library.h), compiled once per process and architecture.
  void complete_library_step(const CompileContext& ctx, PlanStep& step) const override {
    if (auto* s = std::get_if<step::Sort>(&step.what))
      s->cuda = cuda_library_functions(ctx.device.index, ctx.opts.cache_dir);
    else if (auto* a = std::get_if<step::Attention>(&step.what))
      a->cuda = cuda_library_functions(ctx.device.index, ctx.opts.cache_dir);
    else if (auto* c = std::get_if<step::ClusterLogprob>(&step.what))
      c->cuda = cuda_library_functions(ctx.device.index, ctx.opts.cache_dir);
  }

  void execute(const Plan& plan, void* const* args, void* const* params, void* const* outputs,
               KeptBuffers* keep) const override {
    KILN_CHECK(!keep, "internal: keeping a CUDA plan's buffers for checking is not supported");
    execute_cuda_plan(plan, args, params, outputs);
  }
};

}  // namespace

int cuda_arch(Device device) {
  cuda::require("compiling for CUDA", device.index);  // before any other driver call
  return cuda::device_info(device.index).arch();
}

const Backend& cuda_backend() {
  static const CudaBackend b;
  return b;
}

}  // namespace kiln
