// CPU matrix products through OpenBLAS, and libxsmm for small ones (small_gemm.h).
#pragma once

#include <functional>
#include <string>

#include "runtime/storage.h"

namespace kiln {

/// out = a @ b for views of rank >= 2 with broadcasting batch dims, float32 or
/// float64 (other dtypes use a plain loop). A batch of products too small to
/// split by rows is split over the pool by batch. `out` is dense. Strided inputs whose
/// last two dims are not a BLAS layout are copied first.
/// With alpha and beta: out = alpha * (a @ b) + beta * out (floating point only), as BLAS does.
void matmul_cpu(const View& a, const View& b, const View& out, double alpha = 1.0,
                double beta = 0.0);

/// Called by matmul_cpu with rows [row0, row1) of the output (seen as rows of its
/// last dim, batches end to end) as soon as they are written, on the thread that
/// wrote them; every row is passed once. May call parallel_for (it runs inline
/// inside the product's own parallel region).
using RowsWritten = std::function<void(int64_t row0, int64_t row1)>;

/// matmul_cpu, calling `rows_written` after each block of output rows (an
/// epilogue applied while the block is in cache).
void matmul_cpu(const View& a, const View& b, const View& out, double alpha, double beta,
                const RowsWritten& rows_written);

/// What OpenBLAS reports about itself: version, core type of its kernels,
/// threads; then which small products go to libxsmm (small_gemm_info()). Used
/// by benchmarks so every report says which kernels ran.
std::string blas_info();

/// When OpenBLAS chose kernels older than the CPU can run (`core`, its core
/// name, against the CPU's features): the OPENBLAS_CORETYPE that would serve,
/// else empty. OpenBLAS 0.3.21 picks by CPU model, and a model newer than it
/// knows gets Prescott (SSE3) kernels: seen on the H200 machines' CPUs, where
/// its matmuls ran 4-5x slower than PyTorch's on the same cores.
std::string blas_better_core(const std::string& core, bool avx512f, bool avx2_fma);

/// Called once at start-up: if OPENBLAS_CORETYPE was not set by the user,
/// nothing to do; if it was, it is respected and blas_info() says so.
void blas_init();

}  // namespace kiln
