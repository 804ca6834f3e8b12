// The device seam (see device_ops.h): CPU ops run the reference kernels over
// strided views, or for expensive elementwise ops on large dense operands a
// compiled kernel (codegen/eager_kernel.h); ops on CUDA tensors go to
// device_ops_cuda.cpp.
#include "frontend/device_ops.h"

#include <cstdio>
#include <optional>

#include "codegen/compile.h"
#include "codegen/eager_kernel.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/plan.h"
#include "runtime/reference.h"
#include "runtime/sort.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// Whether eager op k on these operands runs a compiled kernel: an expensive
// elementwise op, or any math op (libm one element at a time is what it would
// replace: the rounding ops too, which the base x86-64 build of the reference
// kernels cannot inline), on dense operands of the result's shape, large enough
// that a compile once per process (or a disk-cache load) is paid back.
bool wants_compiled(OpKind k, const std::vector<Tensor>& operands, const TensorType& out) {
  const Settings& s = settings();
  if (!s.eager_kernels || !is_elementwise(k) || !(is_expensive(k) || is_math(k)) ||
      !is_floating(out.dtype) || out.numel() < s.eager_kernel_min_elements)
    return false;
  for (const Tensor& t : operands) {
    const TensorImpl& i = *t.impl();
    if (i.type.shape != out.shape || !i.view().contiguous()) return false;
  }
  return true;
}

// The op's compiled kernel, or null when it has none: a kernel that cannot be
// compiled (reported once per op and dtypes) leaves the op on its reference
// kernel, which is correct, only slower.
std::shared_ptr<const EagerKernel> compiled_kernel(OpKind k, const Attrs& attrs,
                                                   const std::vector<Tensor>& operands,
                                                   const TensorType& out) {
  std::vector<DType> in;
  for (const Tensor& t : operands) in.push_back(t.impl()->type.dtype);
  CpuCompileOptions opts = cpu_compile_options(compile_options());
  // The kernel is shared by every size: this call's size picks its variant.
  opts.stream_all = opts.stream_min_bytes > 0 &&
                    out.numel() * int64_t(dtype_size(out.dtype)) >= opts.stream_min_bytes;
  try {
    return eager_cpu_kernel(k, attrs, in, out.dtype, opts);
  } catch (const Error& e) {  // the first failure for these dtypes; later calls get null
    std::fprintf(stderr, "kiln: eager %s (%s): no compiled kernel, the reference kernel runs: %s\n",
                 op_name(k), dtype_name(out.dtype), e.what());
    return nullptr;
  }
}

// The op on its compiled kernel, or nullopt when it has none.
std::optional<Tensor> run_compiled(OpKind k, const Attrs& attrs,
                                   const std::vector<Tensor>& operands, const TensorType& out) {
  std::shared_ptr<const EagerKernel> kernel = compiled_kernel(k, attrs, operands, out);
  if (!kernel) return std::nullopt;
  auto impl = make_dense(out);
  std::vector<void*> bufs;
  for (const Tensor& t : operands) bufs.push_back(t.impl()->view().data);
  bufs.push_back(impl->view().data);
  parallel_for(out.numel(), kernel->grain,
               [&](int64_t lo, int64_t hi) { kernel->fn(bufs.data(), lo, hi); });
  return Tensor(std::move(impl));
}

// A library op (argsort: runtime/sort.h; attention: runtime/attention.h;
// cluster_logprob: runtime/cluster_logprob.h) on dense copies of the operands
// that are strided: the same functions as a CPU plan's library steps.
Tensor library_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                   const TensorType& out) {
  std::vector<std::shared_ptr<TensorImpl>> dense;
  std::vector<const void*> data;
  for (const Tensor& t : operands) {
    const TensorImpl& in = *t.impl();
    View v = in.view();
    if (!v.contiguous()) {
      dense.push_back(make_dense(in.type));
      copy_to(v, dense.back()->view());
      v = dense.back()->view();
    }
    data.push_back(v.data);
  }
  auto impl = make_dense(out);
  void* result = impl->view().data;
  const TensorType& t0 = operands[0].impl()->type;
  if (op_info(k).category == OpCategory::Sort) {
    sort_lines(sort_lines_for(t0, attrs), data[0], static_cast<int64_t*>(result));
  } else if (k == OpKind::cluster_logprob || k == OpKind::cluster_logprob_grad) {
    const step::ClusterLogprob c{
        cluster_logprob_shape(t0, operands[1].impl()->type, attrs),
        k == OpKind::cluster_logprob_grad ? int(attrs.i(AttrKey::which)) : -1, nullptr};
    run_cluster_logprob_step(c, data.data(), result);
  } else {
    const step::Attention a{
        attention_shape(t0, operands[1].impl()->type, operands[2].impl()->type, attrs),
        k == OpKind::attention_grad ? int(attrs.i(AttrKey::which)) : -1, nullptr};
    run_attention_step(a, data.data(), result);
  }
  return Tensor(std::move(impl));
}

}  // namespace

bool runs_compiled_kernel(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                          const TensorType& out) {
  return out.device.is_cpu() && wants_compiled(k, operands, out) &&
         compiled_kernel(k, attrs, operands, out) != nullptr;
}

Tensor device_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                  const TensorType& out) {
  if (out.device.is_cuda()) return cuda_run(k, attrs, operands, out);
  if (op_info(k).category == OpCategory::Sort || op_info(k).category == OpCategory::Attention)
    return library_run(k, attrs, operands, out);
  if (wants_compiled(k, operands, out))
    if (std::optional<Tensor> t = run_compiled(k, attrs, operands, out)) return std::move(*t);
  std::vector<View> views;
  views.reserve(operands.size());
  for (const Tensor& t : operands) views.push_back(t.impl()->view());
  auto impl = make_dense(out);
  reference_kernel(k, attrs, views, impl->view());
  return Tensor(std::move(impl));
}

void device_copy(const View& src, TensorImpl& dst, SourceLoc loc) {
  if (dst.type.device.is_cuda()) {
    try {
      return cuda_copy(src, dst);
    } catch (Error& e) {
      e.attach(loc, "copy");
      throw;
    }
  }
  copy_to(src, dst.view());
}

Tensor device_transfer(const Tensor& t, Device to, SourceLoc loc) {
  if (t.impl()->type.device == to) return t;
  if (TraceState* tr = current_trace()) return tr->moved_to(t, to, loc);
  try {
    return cuda_transfer(t, to);
  } catch (Error& e) {
    e.attach(loc, "to(" + to.str() + ")");
    throw;
  }
}

}  // namespace kiln
