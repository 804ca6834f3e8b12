// CPU matrix products through OpenBLAS.
#pragma once

#include <string>

#include "runtime/storage.h"

namespace kiln {

/// out = a @ b for views of rank >= 2 with broadcasting batch dims, float32 or
/// float64 (other dtypes use a plain loop). `out` is dense. Strided inputs whose
/// last two dims are not a BLAS layout are copied first.
/// With alpha and beta: out = alpha * (a @ b) + beta * out (floating point only), as BLAS does.
void matmul_cpu(const View& a, const View& b, const View& out, double alpha = 1.0, double beta = 0.0);

/// What OpenBLAS reports about itself: version, core type of its kernels, threads.
/// Used by benchmarks so every report says which kernels ran.
std::string blas_info();

/// Called once at start-up: if OPENBLAS_CORETYPE was not set by the user,
/// nothing to do; if it was, it is respected and blas_info() says so.
void blas_init();

}  // namespace kiln
