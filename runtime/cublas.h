// Matrix products on CUDA devices through cuBLAS and cuBLASLt, loaded at run
// time (libcublas.so.13, libcublasLt.so.13 via dlopen, one table of entry
// points for both; see cublas.cpp). Work is queued on the device's stream
// (runtime/cuda_driver.h). No CUDA header appears here.
#pragma once

#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/storage.h"

namespace kiln {

/// out = a @ b on CUDA device `device`; views over device memory of rank >= 2
/// whose batch dims broadcast to out's (out is dense). Each operand's last two
/// dims must be row-major or transposed with one unit stride (a BLAS layout);
/// a transposed operand is passed with a transpose flag, not copied. float32
/// and float64 run on cuBLAS (strided-batched gemm); other dtypes are computed
/// on the host (copied there and back, waiting for the device).
void matmul_cuda(const View& a, const View& b, const View& out, int device);

/// An epilogue cuBLASLt fuses into the product: out = relu?(a @ b + bias?).
struct GemmEpilogue {
  const void* bias = nullptr;  // a dense vector of out's last dim on the device, or null
  bool relu = false;
};
/// Whether matmul_cuda_epilogue can compute this product: float32, no batch dims
/// (after dropping leading 1s), BLAS-layout operands.
bool cublaslt_supports(const View& a, const View& b, const View& out);
/// out = epilogue(a @ b) in one cuBLASLt call (see cublaslt_supports).
void matmul_cuda_epilogue(const View& a, const View& b, const View& out, const GemmEpilogue& e,
                          int device);

/// Whether cuBLAS and cuBLASLt could be loaded (and the driver has a device).
bool cublas_available();
/// Why not ("" when available).
std::string cublas_unavailable_reason();
/// "cuBLAS 13.0.2 (libcublas.so.13, libcublasLt.so.13)" or the reason it is unavailable.
std::string cublas_info();
/// Every cuBLAS/cuBLASLt function Kiln calls (exported symbol names), in table order.
std::vector<cuda::EntryPoint> cublas_entry_points();

}  // namespace kiln
