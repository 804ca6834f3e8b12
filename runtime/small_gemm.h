// Small matrix products through libxsmm's JIT kernels: a product whose right
// operand stays in cache runs a kernel generated for its exact sizes, without
// OpenBLAS's per-call packing and dispatch. matmul_cpu (blas.cpp) asks here
// first and falls back to OpenBLAS for whatever this declines. The only file
// that includes libxsmm's header is small_gemm.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

/// c (m x n, row stride ldc) = a @ b + beta * c, row-major: a is m x k (row
/// stride lda), or stored k x m and read transposed when trans_a; b is k x n
/// (row stride ldb). With beta 0, c is only written. Returns true when done;
/// false, touching nothing, when libxsmm does not take the product: small
/// products are off (set_small_gemm_enabled, KILN_SMALL_GEMM=0), beta is
/// neither 0 nor 1, the right operand (k x n) is larger than
/// small_gemm_max_rhs_bytes(), or libxsmm has no kernel for it (a CPU it does
/// not generate code for). A right operand read transposed is not offered:
/// libxsmm 1.17 generates no kernel for it.
bool small_gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
bool small_gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

/// Whether small_gemm's kernel for an output `cols` columns wide, of `elem`-byte
/// elements, runs at full speed on this CPU. Not where each row ends in part of
/// a 16-byte register (cols * elem not a multiple of 16) and libxsmm writes that
/// part with masked stores the CPU runs slowly: its AVX2 kernels on AMD's cores.
/// Measured on Zen 3, one thread: 64 x 100 by 100 x 10, libxsmm 7.7-7.9 us and
/// OpenBLAS 3.9; widths 2, 6, 9-18, 26, 42 and 49 (a conv's 7 x 7 image) all
/// slower through libxsmm (1.2-2.3x), widths 4, 12, 20, 60 and 100 even or faster.
/// matmul_cpu offers small_gemm only the products this says yes to.
bool small_gemm_full_speed(int64_t cols, int64_t elem);

/// The largest right operand, in bytes, that small_gemm takes: a quarter of
/// this core's L2 cache (512 KiB when the system does not say). A libxsmm
/// kernel reads the whole right operand for every block of rows, from cache;
/// measured on a 2 MiB L2 (bench/small_gemm_bench.cpp), it beats OpenBLAS
/// up to 512 KiB and loses from 2 MiB on.
int64_t small_gemm_max_rhs_bytes();

/// Whether matmul_cpu may use libxsmm (default: yes, unless KILN_SMALL_GEMM=0
/// at start-up). Off, every float product goes to OpenBLAS: the baseline, and
/// the other half of a roofline that takes the faster of the two.
bool small_gemm_enabled();
void set_small_gemm_enabled(bool on);

/// libxsmm's version and the instruction set its kernels are generated for,
/// and the size limit, for reports that say which kernels ran.
std::string small_gemm_info();

}  // namespace kiln
