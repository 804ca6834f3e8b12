// Compiled kernels for eager CPU ops: one elementwise op over dense operands of
// one shape, for any number of elements.
//
// Eager CPU ops run the reference kernels, which call libm one element at a
// time; for transcendentals that is several times slower than the traced path's
// vectorised math. An eager op of that kind can instead run the kernel the CPU
// backend compiles for the same op: lowered at two lengths, generalised into a
// template (kernel_template.h) that has no parameters, because a flat loop over
// i does not depend on the length, compiled once per op, attributes and dtypes,
// and shared by every size. Its values are the traced path's for the same op,
// bit for bit. The reference kernels stay the oracle in tests.
#pragma once

#include <memory>
#include <vector>

#include "codegen/cpu_backend.h"
#include "ir/attrs.h"
#include "ir/dtype.h"
#include "ir/op.h"

namespace kiln {

/// out[i] = op(in0[i], in1[i], ...) for i in [begin, end): `fn` takes the operand
/// buffers then the output buffer (dense, any alignment; the output overlaps no
/// operand, operands may be the same buffer).
struct EagerKernel {
  CpuKernelFn fn = nullptr;
  std::shared_ptr<const void> code;  // keeps fn's code loaded
  int64_t grain = 1;                 // elements worth a thread
  bool streams = false;  // writes with streaming stores (llvm_codegen.h: streams_stores)
};

/// The kernel of elementwise op `k` (unary, binary or ternary) with operands of
/// dtypes `in` and a result of dtype `out`, compiled on first use and cached for
/// the process (per LLVM pipeline). Throws kiln::Error if the op is not
/// elementwise, the types do not fit it, or it cannot be compiled; a failed
/// compile is remembered, and later calls for the same key return null at once.
/// With opts.stream_all, the variant that writes its output with streaming
/// (non-temporal) stores where the op allows (for calls whose output the caller
/// found larger than the cache; llvm_codegen.h: streams_stores), a kernel of its own.
std::shared_ptr<const EagerKernel> eager_cpu_kernel(OpKind k, const Attrs& attrs,
                                                    const std::vector<DType>& in, DType out,
                                                    const CpuCompileOptions& opts);

/// How many distinct eager kernels this process compiled (or loaded from the disk cache).
int64_t eager_cpu_kernels_compiled();

}  // namespace kiln
