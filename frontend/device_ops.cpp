// CPU implementation of the device seam: reference kernels over strided views.
#include "frontend/device_ops.h"

#include "frontend/tensor_impl.h"
#include "runtime/reference.h"

namespace kiln {
namespace {

void require_cpu(const Device& d, const char* what) {
  if (!d.is_cpu())
    throw Error(std::string(what) + ": tensors on " + d.str() +
                " need the CUDA backend, which this build does not provide yet (expected cpu)");
}

}  // namespace

Tensor device_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                  const TensorType& out) {
  require_cpu(out.device, op_name(k));
  std::vector<View> views;
  views.reserve(operands.size());
  for (const Tensor& t : operands) {
    require_cpu(t.impl()->type.device, op_name(k));
    views.push_back(t.impl()->view());
  }
  auto impl = make_dense(out);
  reference_kernel(k, attrs, views, impl->view());
  return Tensor(std::move(impl));
}

void device_copy(const View& src, TensorImpl& dst, SourceLoc loc) {
  require_cpu(dst.type.device, "copy");
  copy_to(src, dst.view());
}

Tensor device_transfer(const Tensor& t, Device to, SourceLoc loc) {
  const TensorImpl& in = *t.impl();
  if (in.type.device == to) return t;
  require_cpu(to, "to");
  require_cpu(in.type.device, "to");
  return t;
}

}  // namespace kiln
