// The device seam (see device_ops.h): CPU ops run the reference kernels over
// strided views; ops on CUDA tensors go to device_ops_cuda.cpp.
#include "frontend/device_ops.h"

#include "frontend/tensor_impl.h"
#include "runtime/reference.h"

namespace kiln {

Tensor device_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                  const TensorType& out) {
  if (out.device.is_cuda()) return cuda_run(k, attrs, operands, out);
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
  try {
    return cuda_transfer(t, to);
  } catch (Error& e) {
    e.attach(loc, "to(" + to.str() + ")");
    throw;
  }
}

}  // namespace kiln
