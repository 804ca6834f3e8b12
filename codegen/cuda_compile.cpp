// The CUDA half of the compile driver (see cuda_compile.h).
#include "codegen/cuda_compile.h"

#include <chrono>

#include "codegen/cuda_backend.h"
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"

namespace kiln {
namespace {

int64_t bytes_of(const TensorType& t) {
  return t.bytes();
}

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

// The gemm's own record: its flops and operand bytes, taken out of the group's totals.
KernelInfo split_gemm_info(const Graph& g, NodeId mm_id, KernelInfo* group) {
  const Node& mm = g[mm_id];
  const Shape& s = mm.type().shape;
  int64_t n = s.end()[-2], m = s.end()[-1], k = g.type(mm.operands[0]).shape.back();
  int64_t operand_bytes = bytes_of(g.type(mm.operands[0])) + bytes_of(g.type(mm.operands[1]));
  KernelInfo info = *group;
  info.name = group->name + "_gemm";
  info.kind = GroupKind::Matmul;
  info.nodes = {mm_id};
  info.flops = 2 * (mm.type().numel() / std::max<int64_t>(n * m, 1)) * n * m * k;
  info.bytes_read = operand_bytes;
  info.bytes_written = bytes_of(mm.type());
  group->flops = std::max<int64_t>(0, group->flops - info.flops);
  group->bytes_read = std::max<int64_t>(0, group->bytes_read - operand_bytes) + info.bytes_written;
  return info;
}

}  // namespace

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

int cuda_arch(Device device) {
  cuda::require("compiling for CUDA", device.index);
  return cuda::device_info(device.index).arch();
}

void add_cuda_group_steps(const CudaGroupContext& ctx, const FusionGroup& grp,
                         const std::vector<std::pair<Value, Value>>& in_place, Plan& plan,
                         CompileReport& r) {
  const Graph& g = ctx.g;
  auto t0 = std::chrono::steady_clock::now();
  CudaCodegenOptions copts;
  copts.in_place = in_place;
  CudaKernelSource src = generate_cuda_kernel(g, grp, copts);
  KernelInfo info = src.info;

  if (grp.kind == GroupKind::Matmul) {
    const NodeId mm_id = grp.nodes.front();
    const Node& mm = g[mm_id];
    PlanStep step;
    step.kind = PlanStep::CudaMatmul;
    int32_t sa = ctx.slot_of(matmul_operand(ctx.sched, mm.operands[0], &step.trans_a));
    int32_t sb = ctx.slot_of(matmul_operand(ctx.sched, mm.operands[1], &step.trans_b));
    LtEpilogue lt;
    int32_t so = match_lt_epilogue(g, grp, &lt) ? ctx.slot_of(grp.outputs.front()) : -1;
    // (Not when the result is stored over an operand, as a parameter update may be.)
    if (so >= 0 && so != sa && so != sb && (!lt.bias.valid() || so != ctx.slot_of(lt.bias)) &&
        cublas_available()) {
      // One cuBLASLt call computes the product and its whole epilogue.
      step.name = info.name + "_gemm_lt";
      step.slots = {sa, sb, so};
      if (lt.bias.valid()) step.slots.push_back(ctx.slot_of(lt.bias));
      step.relu = lt.relu;
      plan.steps.push_back(step);
      info.name = step.name;
      r.kernels.push_back(info);
      r.artifacts.push_back({});
      r.step_values.push_back(grp.outputs);
      return;
    }
    step.name = info.name + "_gemm";
    step.slots = {sa, sb, ctx.temp_slot(Value(mm_id))};
    plan.steps.push_back(step);
    r.kernels.push_back(split_gemm_info(g, mm_id, &info));
    r.artifacts.push_back({});
    r.step_values.push_back({Value(mm_id)});
  }
  if (!src.needs_kernel) return;

  CudaBinary bin =
      nvrtc_compile(src.source, src.name, ctx.arch, /*want_cubin=*/true, ctx.opts.cache_dir);
  std::string image = bin.cubin.empty() ? bin.ptx : std::string(bin.cubin.begin(), bin.cubin.end());
  PlanStep step;
  step.kind = PlanStep::CudaKernel;
  step.name = info.name;
  step.cuda_fn = cuda::load_function(image, src.name, ctx.device.index);
  step.range = src.launch.range;
  step.launch.kind =
      src.launch.kind == CudaLaunch::BlockPerRow ? CudaLaunchSpec::BlockPerRow : CudaLaunchSpec::GridStride;
  step.launch.block = src.launch.block;
  step.launch.shared_bytes = src.launch.shared_bytes;
  for (Value v : src.buffers) step.slots.push_back(ctx.slot_of(v));
  plan.steps.push_back(step);

  KernelArtifacts a;
  a.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  a.from_disk_cache = bin.from_disk_cache;
  if (bin.from_disk_cache) r.kernels_from_disk++;
  if (ctx.opts.want_artifacts) {
    a.kernel_ir = src.kernel_ir;
    a.cuda_source = src.source;
    a.ptx = bin.ptx;
  }
  r.kernels.push_back(info);
  r.artifacts.push_back(std::move(a));
  r.step_values.push_back(grp.outputs);
}

}  // namespace kiln
