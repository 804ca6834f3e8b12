// Internals of the CUDA C code generator (codegen/cuda_codegen.cpp and
// codegen/cuda_math.cpp), visible to tests. No CUDA header appears here.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/cuda_backend.h"
#include "codegen/kernel_ir.h"

namespace kiln {

/// How types and constants are spelled in generated CUDA C.
namespace cuda_c {

/// Concatenation (GCC 12 warns falsely, -Wrestrict, about long operator+ chains).
template <class... A>
std::string cat(const A&... a) {
  std::string s;
  (s.append(a), ...);
  return s;
}

/// The C type of a value in registers ("float", ..., bool as "bool").
const char* reg_type(DType t);
/// The C type of an element in memory (bool as "unsigned char").
const char* mem_type(DType t);
/// The C type of an accumulator (bool as "int": shuffles have no bool overload).
const char* acc_type(DType t);
/// A constant of type t, parenthesised when negative; infinities and NaN through
/// the device helpers (kiln_inf_f32() ...); integers exact (INT64_MIN included).
std::string float_literal(double v, DType t);
std::string int_literal(int64_t v, DType t);
std::string literal(DType t, double f, int64_t i);

}  // namespace cuda_c

/// CUDA C text of the device helpers every generated kernel uses: wrap-around
/// integer arithmetic, safe integer division and powers, NaN-propagating max/min,
/// the op table's math ops (kiln_exp, ..., kiln_gelu), accumulator updates and block-wide reductions built on warp
/// shuffles. Guarded by KILN_CUDA_HELPERS so several kernels can share one
/// translation unit.
const char* cuda_device_helpers();

/// Kernel IR -> one CUDA C translation unit. Fills name, source and launch of the
/// result (not buffers, info or kernel_ir). Throws kiln::Error for kernel IR the
/// generator does not handle (an accumulator updated in two parallel loops).
CudaKernelSource emit_cuda_kernel(const kir::Kernel& k, const CudaCodegenOptions& opts);

}  // namespace kiln
