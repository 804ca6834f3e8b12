// Running one op on a device: the seam between the frontend and the device
// runtimes (CPU reference kernels now; GPU kernels when the CUDA backend is in).
#pragma once

#include <vector>

#include "frontend/tensor.h"
#include "ir/op.h"
#include "runtime/storage.h"

namespace kiln {

struct TensorImpl;

/// Computes op k into a new dense tensor of type `out` on out.device.
Tensor device_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                  const TensorType& out);
/// Writes `src` (same shape and dtype as dst) into dst's elements, on dst's device.
void device_copy(const View& src, TensorImpl& dst, SourceLoc loc);
/// Moves or copies a tensor to another device (dense result).
Tensor device_transfer(const Tensor& t, Device to, SourceLoc loc);

}  // namespace kiln
