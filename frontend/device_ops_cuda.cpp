// Eager ops on CUDA devices (see device_ops.h). An op becomes a small graph
// (its operands as dense arguments, views as expand/permute nodes over them,
// the op) compiled by the same driver as traced functions: one generated kernel
// (or a cuBLAS call for matmul) for the device's own architecture, cached in
// memory per graph text, so each op signature compiles once. Ops that draw
// random numbers or hold literal data run on the host and are uploaded.
// Strided copies (contiguous(), in-place writes into views) use codegen's
// strided-copy kernel (codegen/cuda_copy.h).
#include <algorithm>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "codegen/compile.h"
#include "codegen/cuda_backend.h"
#include "codegen/cuda_copy.h"
#include "codegen/cuda_compile.h"
#include "frontend/device_ops.h"
#include "frontend/jit.h"
#include "frontend/run_plan.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "ir/builder.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_executor.h"
#include "runtime/reference.h"

namespace kiln {
namespace {

// A dense copy of t on its device (t itself when it is dense).
std::shared_ptr<TensorImpl> dense_on_device(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  if (is_contiguous(i.type.shape, i.strides)) return t.impl_ptr();
  auto d = make_dense(i.type);
  cuda_strided_copy(i.view(), d->view(), i.type.device.index, cache_dir());
  return d;
}

// ---- eager ops as small graphs ----

// How one operand enters the op's graph: a dense buffer, then optional permute and expand.
struct Operand {
  TensorType arg;
  std::vector<int64_t> perm;  // non-empty: permute(arg, perm)
  Shape expand;               // non-empty: expand to this shape
  Tensor dense;               // the argument: the operand's data as a dense tensor of `arg`
};

// The operand's own elements seen as a dense tensor of o.arg (no copy).
Tensor dense_alias(const TensorImpl& i, const TensorType& arg) {
  return Tensor(make_view(i, arg.shape, contiguous_strides(arg.shape), i.offset));
}

Operand plan_operand(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  const Shape& shape = i.type.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  Operand o;
  Shape compact = shape;
  for (int64_t d = 0; d < rank; ++d)
    if (shape[d] > 1 && i.strides[d] == 0) compact[d] = 1;
  if (compact != shape) o.expand = shape;
  o.arg = TensorType{i.type.dtype, compact, i.type.device};
  if (is_contiguous(compact, i.strides)) {
    o.dense = compact == shape ? t : dense_alias(i, o.arg);
    return o;
  }
  // A permutation of a dense layout: order dims by stride, outermost first.
  std::vector<int64_t> order(static_cast<size_t>(rank));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int64_t d) { return compact[d] == 1 ? INT64_MAX : i.strides[d]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return key(a) > key(b); });
  Shape base(static_cast<size_t>(rank));
  Strides base_strides(static_cast<size_t>(rank));
  for (int64_t j = 0; j < rank; ++j) {
    base[j] = compact[order[j]];
    base_strides[j] = i.strides[order[j]];
  }
  if (is_contiguous(base, base_strides)) {
    o.arg.shape = base;
    o.perm.resize(static_cast<size_t>(rank));
    for (int64_t j = 0; j < rank; ++j) o.perm[order[j]] = j;
    o.dense = dense_alias(i, o.arg);
    return o;
  }
  // Anything else is gathered into a dense buffer first.
  auto gathered = make_dense(o.arg);
  cuda_strided_copy(View{i.view().data, i.type.dtype, compact, i.strides}, gathered->view(),
                    i.type.device.index, cache_dir());
  o.dense = Tensor(std::move(gathered));
  return o;
}

Graph build_graph(OpKind k, const Attrs& attrs, const std::vector<Operand>& ops,
                  const TensorType& out) {
  Graph g;
  Builder b(g);
  std::vector<Value> vals;
  for (size_t i = 0; i < ops.size(); ++i) {
    Value v = b.arg(static_cast<int64_t>(i), ops[i].arg);
    if (!ops[i].perm.empty()) v = b.permute(v, ops[i].perm);
    if (!ops[i].expand.empty()) v = b.expand(v, ops[i].expand);
    vals.push_back(v);
  }
  Value r = op_info(k).category == OpCategory::Creation ? b.op_typed(k, {}, attrs, out)
                                                        : b.op(k, std::move(vals), attrs);
  g.outputs.push_back(r);
  return g;
}

struct PlanCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans;
  EagerCudaStats stats;
};

PlanCache& plan_cache() {
  static auto* c = new PlanCache();  // never destroyed: plans hold loaded kernels
  return *c;
}

constexpr size_t kMaxCachedOps = 4096;

std::shared_ptr<Plan> plan_for(const Graph& g) {
  PlanCache& c = plan_cache();
  std::string key = g.str();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.plans.find(key);
    if (it != c.plans.end()) {
      c.stats.hits++;
      return it->second;
    }
  }
  CompileOptions opts = compile_options();
  opts.fusion = true;
  std::shared_ptr<Plan> plan = compile_graph(g, opts);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.plans.size() >= kMaxCachedOps) c.plans.clear();
  c.stats.compiled++;
  c.plans.emplace(std::move(key), plan);
  return plan;
}

void check_device(const Device& d) {
  if (!cuda::available()) throw Error(cuda::unavailable_reason());
  if (d.index >= cuda::device_count())
    throw Error(d.str() + " does not exist (" + std::to_string(cuda::device_count()) +
                " CUDA devices found)");
}

// Host -> device copy of a dense CPU tensor.
Tensor upload(const std::shared_ptr<TensorImpl>& host, Device to) {
  auto out = make_dense(TensorType{host->type.dtype, host->type.shape, to});
  size_t bytes = static_cast<size_t>(host->type.bytes());
  cuda::copy_to_device(out->view().data, host->view().data, bytes, to.index);
  return Tensor(std::move(out));
}

}  // namespace

Graph eager_op_graph(OpKind k, const Attrs& attrs, const std::vector<TensorType>& operands,
                     const TensorType& out) {
  std::vector<Operand> ops(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) ops[i].arg = operands[i];
  return build_graph(k, attrs, ops, out);
}

EagerCudaStats eager_cuda_stats() {
  PlanCache& c = plan_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

Tensor cuda_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                const TensorType& out) {
  check_device(out.device);
  if (k == OpKind::literal) {
    // The same data as on the CPU, uploaded.
    auto host = make_dense(TensorType{out.dtype, out.shape, Device(kCPU)});
    reference_kernel(k, attrs, {}, host->view());
    return upload(host, out.device);
  }
  if (out.numel() == 0) return Tensor(make_dense(out));
  std::vector<Operand> ops;
  ops.reserve(operands.size());
  for (const Tensor& t : operands) ops.push_back(plan_operand(t));
  const Graph g = build_graph(k, attrs, ops, out);
  std::shared_ptr<Plan> plan = plan_for(g);
  std::vector<Tensor> args;
  for (const Operand& o : ops) args.push_back(o.dense);
  return detail::run_plan(*plan, g, args, {}, "eager op", op_name(k), {}).front();
}

void cuda_copy(const View& src, TensorImpl& dst) {
  check_device(dst.type.device);
  KILN_CHECK(src.dtype == dst.type.dtype && src.shape == dst.type.shape,
             "internal: a copy on CUDA needs one shape and dtype, got ", shape_str(src.shape), " ",
             dtype_name(src.dtype), " -> ", shape_str(dst.type.shape), " ",
             dtype_name(dst.type.dtype));
  cuda_strided_copy(src, dst.view(), dst.type.device.index, cache_dir());
}

Tensor cuda_transfer(const Tensor& t, Device to) {
  const TensorImpl& in = *t.impl();
  const Device from = in.type.device;
  if (from.is_cpu()) {
    check_device(to);
    std::shared_ptr<TensorImpl> host = t.impl_ptr();
    if (!is_contiguous(in.type.shape, in.strides)) {
      host = make_dense(in.type);
      copy_to(in.view(), host->view());
    }
    return upload(host, to);
  }
  check_device(from);
  auto dense = dense_on_device(t);
  auto host = make_dense(TensorType{in.type.dtype, in.type.shape, Device(kCPU)});
  size_t bytes = static_cast<size_t>(in.type.bytes());
  cuda::copy_to_host(host->view().data, dense->view().data, bytes, from.index);
  if (to.is_cpu()) return Tensor(std::move(host));
  return upload(host, to);  // between devices, through the host
}

}  // namespace kiln
