// Running one op on a device: the seam between the frontend and the device
// runtimes. CPU: reference kernels over strided views (device_ops.cpp). CUDA
// (device_ops_cuda.cpp): each op is one generated kernel, compiled with NVRTC
// once per op signature for the device's own architecture and cached; matmul
// goes to cuBLAS; transfers copy through the device's stream.
#pragma once

#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "runtime/storage.h"

namespace kiln {

struct TensorImpl;

/// Computes op k into a new dense tensor of type `out` on out.device.
Tensor device_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                  const TensorType& out);
/// Whether device_run would compute op k on these CPU operands with a compiled,
/// vectorised kernel (codegen/eager_kernel.h) rather than its reference kernel:
/// what benchmarks print beside an eager figure.
bool runs_compiled_kernel(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                          const TensorType& out);
/// Writes `src` (same shape and dtype as dst, on dst's device) into dst's elements.
void device_copy(const View& src, TensorImpl& dst, SourceLoc loc);
/// Moves or copies a tensor to another device (dense result).
Tensor device_transfer(const Tensor& t, Device to, SourceLoc loc);

// ---- the CUDA side (device_ops_cuda.cpp) ----

Tensor cuda_run(OpKind k, const Attrs& attrs, const std::vector<Tensor>& operands,
                const TensorType& out);
void cuda_copy(const View& src, TensorImpl& dst);
Tensor cuda_transfer(const Tensor& t, Device to);

/// The graph an eager op runs on a CUDA device, for dense operands of the given
/// types: one arg per operand, the op, its result as the output. (Operands that
/// are views add expand/permute nodes over their dense data.) Eager CUDA ops
/// compile this graph once per distinct text and cache the plan.
Graph eager_op_graph(OpKind k, const Attrs& attrs, const std::vector<TensorType>& operands,
                     const TensorType& out);

/// Statistics of the eager CUDA op cache: distinct op signatures compiled, and lookups.
struct EagerCudaStats {
  int64_t compiled = 0, hits = 0;
};
EagerCudaStats eager_cuda_stats();

}  // namespace kiln
