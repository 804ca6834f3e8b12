// Matrix products on the CPU: float32/float64 through libxsmm's kernels where
// small_gemm takes them (small_gemm.h), else OpenBLAS gemm; other dtypes
// through a plain loop. Batch dims broadcast; a batch whose right-hand
// side is shared and whose left-hand rows are evenly strided folds into one
// tall gemm. A transposed operand (strides (1, rows)) is passed to BLAS with
// a transpose flag instead of being copied. A caller may ask to be told of each
// block of output rows once written (an epilogue run while the block is in cache).
#include "runtime/blas.h"

#include <algorithm>
#include <iterator>

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "ir/error.h"
#include "runtime/blas_layout.h"
#include "runtime/reference.h"
#include "runtime/small_gemm.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// One operand matrix: rows x cols at `data` with element strides (rs, cs).
template <class T>
struct Mat {
  const T* data;
  int64_t rows, cols, rs, cs;
};

// m with its BLAS layout, or a dense row-major copy of m (kept alive by `keep`)
// when BLAS cannot read it as is, or when `dense` asks for one in place of a
// transposed layout.
template <class T>
Mat<T> blas_operand(const Mat<T>& m, CBLAS_TRANSPOSE* trans, int64_t* ld,
                    std::vector<std::shared_ptr<Storage>>& keep, bool dense = false) {
  std::optional<BlasLayout> l = blas_layout({m.rows, m.cols, m.rs, m.cs});
  if (l && !(dense && l->trans)) {
    *trans = l->trans ? CblasTrans : CblasNoTrans;
    *ld = l->ld;
    return m;
  }
  *trans = CblasNoTrans;
  *ld = std::max<int64_t>(m.cols, 1);
  if (l) {  // a small transposed operand: a plain loop, into this thread's buffer
    thread_local std::vector<T> copy;
    copy.resize(size_t(m.rows * m.cols));
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j)
        copy[size_t(i * m.cols + j)] = m.data[i * m.rs + j * m.cs];
    return {copy.data(), m.rows, m.cols, m.cols, 1};
  }
  DType dt = dtype_of<T>();
  View src{const_cast<T*>(m.data), dt, {m.rows, m.cols}, {m.rs, m.cs}};
  View dst = detail::scratch({m.rows, m.cols}, dt, keep);
  copy_to(src, dst);
  return {dst.ptr<T>(), m.rows, m.cols, m.cols, 1};
}

// Who runs BLAS threads. Unless the user set OpenBLAS's thread count, OpenBLAS
// runs single-threaded and large products are split by rows over Kiln's own
// pool: two pools spinning on the same cores slow each other down (measured:
// a small training step ran 3x slower with both active).
//
// OpenBLAS starts its threads when it loads, and each spins (sched_yield) for
// about 0.1 s before it sleeps: on a 2-core machine that takes a core from the
// first compile of a program that starts with one (the MLP step's first call
// took 1.2x as long). Since OpenBLAS runs single-threaded here, those threads are
// shut down, when Kiln loads; OpenBLAS starts them again if it is given threads.
bool kiln_splits_blas() {
  static const bool split = [] {
    const char* ob = std::getenv("OPENBLAS_NUM_THREADS");
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if ((ob && *ob) || (omp && *omp)) return false;
    openblas_set_num_threads(1);
    // Not in every OpenBLAS build (the OpenMP one has no such threads).
    using Shutdown = int (*)();
    if (auto shutdown = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_")))
      shutdown();
    return true;
  }();
  return split;
}

namespace {
[[maybe_unused]] const bool kSettledAtLoad = kiln_splits_blas();
}  // namespace

// Whether one product of n x k by k x m is split by rows over Kiln's pool:
// large enough to pay for waking it (measured: 4 MFLOP), with at least two
// blocks of 16 rows.
bool splits_rows(int64_t n, int64_t m, int64_t k) {
  const double flops = 2.0 * double(n) * double(m) * double(k);
  return kiln_splits_blas() && num_threads() > 1 && flops >= 4e6 && n >= 32;
}

// How many parts of its inner dim an n x k by k x m product is split into over
// Kiln's pool (0: none). Split by rows, every thread reads all of the right
// operand; split by depth, each reads its share of both operands and writes a
// partial product, added up at the end: cheaper when the right operand is large
// (at least 128 KiB) and the product small (at most 64 KiB), as in the two-layer
// step's x w1 (64 x 1000 by 1000 x 100). Always two parts, whatever the thread
// count (one thread runs them in turn), so that the sums, and so the bits, are
// the same on every thread count, as the row split's are.
int64_t depth_parts(int64_t n, int64_t m, int64_t k, int64_t elem) {
  constexpr int64_t kParts = 2;
  const double flops = 2.0 * double(n) * double(m) * double(k);
  if (!kiln_splits_blas() || flops < 4e6) return 0;
  if (k * m * elem < (128 << 10) || n * m * elem > (64 << 10) || k < 64 * kParts) return 0;
  return kParts;
}

// How many columns of an n x k by k x m product each libxsmm call takes: all m,
// unless the right operand is over small_gemm's limit (so OpenBLAS would take
// it) while the left one fits in a core's L1 (32 KiB): then blocks of columns
// whose slice of the right operand fits there too, a multiple of 16 columns.
// A conv's per-image product W [O, C kH kW] x P [C kH kW, H'W'] is of that
// kind; measured (one thread, Zen 3) on the 5x5 conv's 32 products of [32,75] x
// [75,784]: OpenBLAS 1.81-1.93 ms, blocks of 64 or 96 columns 1.33-1.42 ms,
// of 48 1.55-1.66 ms. With a left operand of 147 KiB (the 64-channel conv's
// [64,576] weight) blocks ran 2x slower than OpenBLAS, so they stop at L1.
int64_t column_block(int64_t n, int64_t m, int64_t k, int64_t elem, bool libxsmm_form) {
  constexpr int64_t kL1 = 32 << 10;
  if (!libxsmm_form || !small_gemm_enabled() || k * m * elem <= small_gemm_max_rhs_bytes() ||
      n * k * elem > kL1)
    return m;
  const int64_t width = kL1 / (k * elem) / 16 * 16;
  return width >= 16 && k * width * elem <= small_gemm_max_rhs_bytes() ? width : m;
}

// c (n x m, row stride ldc) = a (n x k) @ b (k x m); with `done`, each block of
// rows [i0, i1) is reported as rows [row0 + i0, row0 + i1) once written.
template <class T>
void gemm(const Mat<T>& a, const Mat<T>& b, T* c, int64_t ldc, double alpha, double beta,
          const RowsWritten* done, int64_t row0) {
  const int64_t n = a.rows, k = a.cols, m = b.cols;
  if (n == 0) return;
  auto written = [&](int64_t i0, int64_t i1) {
    if (done) (*done)(row0 + i0, row0 + i1);
  };
  if (m == 0) return written(0, n);
  if (k == 0) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        c[i * ldc + j] = beta == 0 ? T(0) : T(beta * double(c[i * ldc + j]));
    return written(0, n);
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    std::vector<std::shared_ptr<Storage>> keep;
    CBLAS_TRANSPOSE ta, tb;
    int64_t lda, ldb;
    Mat<T> A = blas_operand(a, &ta, &lda, keep);
    // libxsmm has no kernel for a right operand read transposed: a small one
    // (within its limit, 16 rows of product or more a row of it) is copied
    // dense so that it does. The two-layer step's g w2^T (64 x 10 by 10 x 100):
    // OpenBLAS 5.9 us, the copy and libxsmm 2.1 (Zen 3, one thread).
    const bool copy_b = alpha == 1 && n >= 16 && small_gemm_enabled() &&
                        k * m * int64_t(sizeof(T)) <= small_gemm_max_rhs_bytes() &&
                        small_gemm_full_speed(m, int64_t(sizeof(T)));
    Mat<T> B = blas_operand(b, &tb, &ldb, keep, copy_b);
    // Columns [j0, j0 + cols) of rows [i0, i1), over the inner dim's [p0, p1):
    // A's rows start at i0 (a column offset when transposed), its columns at p0.
    // libxsmm when it takes them, else BLAS.
    auto block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t cols, int64_t p0, int64_t p1,
                     T* cc, int64_t ldcc, double be) {
      const T* a0 = A.data + (ta == CblasNoTrans ? i0 * lda + p0 : i0 + p0 * lda);
      const T* b0 = B.data + (tb == CblasNoTrans ? j0 + p0 * ldb : j0 * ldb + p0);
      T* c0 = cc + i0 * ldcc + j0;
      if (alpha == 1 && tb == CblasNoTrans && small_gemm_full_speed(cols, int64_t(sizeof(T))) &&
          small_gemm(ta == CblasTrans, i1 - i0, cols, p1 - p0, a0, lda, b0, ldb, T(be), c0, ldcc))
        return;
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, ta, tb, blasint(i1 - i0), blasint(cols), blasint(p1 - p0),
                    float(alpha), a0, blasint(lda), b0, blasint(ldb), float(be), c0, blasint(ldcc));
      } else {
        cblas_dgemm(CblasRowMajor, ta, tb, blasint(i1 - i0), blasint(cols), blasint(p1 - p0), alpha,
                    a0, blasint(lda), b0, blasint(ldb), be, c0, blasint(ldcc));
      }
    };
    const int64_t width =
        column_block(n, m, k, int64_t(sizeof(T)), alpha == 1 && tb == CblasNoTrans);
    // Rows [i0, i1) of the product, a block of columns at a time.
    auto rows = [&](int64_t i0, int64_t i1) {
      for (int64_t j0 = 0; j0 < m; j0 += width)
        block(i0, i1, j0, std::min(width, m - j0), 0, k, c, ldc, beta);
      written(i0, i1);
    };
    if (const int64_t parts = depth_parts(n, m, k, int64_t(sizeof(T)))) {
      // Part 0 of the inner dim accumulates into c as asked; every other part
      // into a partial product of its own, added to c once all are done, in
      // order (the same sums whichever thread ran a part).
      thread_local std::vector<T> partials;  // the calling thread's: workers write into it
      partials.resize(size_t((parts - 1) * n * m));
      T* const partial = partials.data();
      parallel_for(parts, 1, [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t p0 = q * k / parts, p1 = (q + 1) * k / parts;
          for (int64_t j0 = 0; j0 < m; j0 += width) {
            const int64_t cols = std::min(width, m - j0);
            if (q == 0)
              block(0, n, j0, cols, p0, p1, c, ldc, beta);
            else
              block(0, n, j0, cols, p0, p1, partial + (q - 1) * n * m, m, 0);
          }
        }
      });
      for (int64_t q = 1; q < parts; ++q) {
        const T* part = partial + (q - 1) * n * m;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < m; ++j) c[i * ldc + j] += part[i * m + j];
      }
      written(0, n);
    } else if (splits_rows(n, m, k)) {
      // One block of rows per thread (the pool makes n / grain chunks), a multiple
      // of 16 rows (the kernels' tile height).
      int64_t per = std::max<int64_t>(16, n / num_threads() / 16 * 16);
      parallel_for(n, per, rows);
    } else {
      rows(0, n);
    }
  } else {
    KILN_CHECK(alpha == 1 && beta == 0,
               "matmul: scaling and accumulating need a floating-point output");
    // Integers accumulate in int64 (wrapping back to T); bool is "any a && b".
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, uint64_t>;
    parallel_for(n, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, k * m)),
                 [&](int64_t i0, int64_t i1) {
                   std::vector<Acc> acc(m);
                   for (int64_t i = i0; i < i1; ++i) {
                     std::fill(acc.begin(), acc.end(), Acc(0));
                     for (int64_t p = 0; p < k; ++p) {
                       Acc x = Acc(int64_t(a.data[i * a.rs + p * a.cs]));
                       if (!x) continue;
                       const T* brow = b.data + p * b.rs;
                       for (int64_t j = 0; j < m; ++j) acc[j] += x * Acc(int64_t(brow[j * b.cs]));
                     }
                     for (int64_t j = 0; j < m; ++j)
                       c[i * ldc + j] = detail::convert<T>(static_cast<int64_t>(acc[j]));
                   }
                   written(i0, i1);
                 });
  }
}

// Treats a rank-1 operand as a row (lhs) or column (rhs) matrix.
View as_matrix(const View& v, bool lhs) {
  if (v.rank() >= 2) return v;
  KILN_CHECK(v.rank() == 1, "matmul: operands must have at least one dim, got a scalar");
  View m = v;
  if (lhs) {
    m.shape = {1, v.shape[0]};
    m.strides = {0, v.strides[0]};
  } else {
    m.shape = {v.shape[0], 1};
    m.strides = {v.strides[0], 0};
  }
  return m;
}

template <class T>
void matmul_typed(const View& a, const View& b, const View& out, double alpha, double beta,
                  const RowsWritten* done) {
  const int64_t ra = a.rank(), rb = b.rank();
  const int64_t n = a.shape[ra - 2], k = a.shape[ra - 1], m = b.shape[rb - 1];
  KILN_CHECK(b.shape[rb - 2] == k, "matmul: inner dims differ: ", shape_str(a.shape), " @ ",
             shape_str(b.shape));
  Shape batch = broadcast_shapes(Shape(a.shape.begin(), a.shape.end() - 2),
                                 Shape(b.shape.begin(), b.shape.end() - 2));
  const int64_t nbatch = kiln::numel(batch);
  KILN_CHECK(out.numel() == nbatch * n * m, "matmul: output has ", out.numel(),
             " elements, expected ", nbatch * n * m, " for ", shape_str(a.shape), " @ ",
             shape_str(b.shape));
  auto batch_strides = [&](const View& v) {
    View bv{v.data, v.dtype, Shape(v.shape.begin(), v.shape.end() - 2),
            Strides(v.strides.begin(), v.strides.end() - 2)};
    return detail::broadcast_strides(bv, batch);
  };
  const Strides sa = batch_strides(a), sb = batch_strides(b);
  const T* A = a.ptr<T>();
  const T* B = b.ptr<T>();
  T* C = out.ptr<T>();
  const int64_t as0 = a.strides[ra - 2], as1 = a.strides[ra - 1];
  const int64_t bs0 = b.strides[rb - 2], bs1 = b.strides[rb - 1];

  // One tall gemm when b is shared by every batch and a's rows step evenly
  // through all batches (e.g. [B, n, k] contiguous @ [k, m]).
  bool b_shared = std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; });
  if (nbatch > 1 && b_shared) {
    Shape rows_shape = batch;
    rows_shape.push_back(n);
    Strides rows_strides = sa;
    rows_strides.push_back(as0);
    int64_t esz = int64_t(sizeof(T));
    auto L = detail::make_loop<1>(rows_shape, {const_cast<T*>(A)}, {&rows_strides}, {esz});
    if (L.shape.size() == 1) {
      gemm<T>({A, nbatch * n, k, L.strides[0][0] / esz, as1}, {B, k, m, bs0, bs1}, C, m, alpha,
              beta, done, 0);
      return;
    }
  }
  // Products [t0, t1) of the batch, one after another.
  auto products = [&](int64_t t0, int64_t t1) {
    std::vector<int64_t> idx(batch.size(), 0);
    for (int64_t d = int64_t(batch.size()) - 1, r = t0; d >= 0; --d) {
      idx[d] = r % batch[d];
      r /= batch[d];
    }
    for (int64_t t = t0; t < t1; ++t) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        oa += idx[d] * sa[d];
        ob += idx[d] * sb[d];
      }
      gemm<T>({A + oa, n, k, as0, as1}, {B + ob, k, m, bs0, bs1}, C + t * n * m, m, alpha, beta,
              done, t * n);
      for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  };
  // Products too small to split by rows (a conv's per-image GEMMs) are split
  // by batch instead, in chunks of at least 256 KFLOP (about a microsecond).
  const double flops = 2.0 * double(n) * double(m) * double(k);
  if (nbatch > 1 && kiln_splits_blas() && num_threads() > 1 && !splits_rows(n, m, k) && flops > 0)
    parallel_for(nbatch, std::max<int64_t>(1, int64_t(2.56e5 / flops)), products);
  else
    products(0, nbatch);
}

void matmul_rows(const View& a, const View& b, const View& out, double alpha, double beta,
                 const RowsWritten* done) {
  KILN_CHECK(out.contiguous(), "matmul: the output buffer must be dense");
  std::vector<std::shared_ptr<Storage>> keep;
  View x = detail::as_dtype(as_matrix(a, true), out.dtype, keep);
  View y = detail::as_dtype(as_matrix(b, false), out.dtype, keep);
  visit_dtype(out.dtype, [&](auto t) { matmul_typed<decltype(t)>(x, y, out, alpha, beta, done); });
}

}  // namespace

void matmul_cpu(const View& a, const View& b, const View& out, double alpha, double beta) {
  matmul_rows(a, b, out, alpha, beta, nullptr);
}

void matmul_cpu(const View& a, const View& b, const View& out, double alpha, double beta,
                const RowsWritten& rows_written) {
  matmul_rows(a, b, out, alpha, beta, rows_written ? &rows_written : nullptr);
}

std::string blas_better_core(const std::string& core, bool avx512f, bool avx2_fma) {
  // Kernels that use neither AVX2 nor AVX-512 (OpenBLAS's x86-64 names).
  static const char* const kOld[] = {
      "Prescott",   "Core2",     "Penryn", "Dunnington", "Nehalem",      "Atom",      "Katmai",
      "Coppermine", "Northwood", "Banias", "Opteron",    "Opteron_SSE3", "Barcelona", "Nano"};
  const bool old =
      std::any_of(std::begin(kOld), std::end(kOld), [&](const char* n) { return core == n; });
  const bool avx2_only = core == "Haswell" || core == "Zen";
  if (avx512f && (old || avx2_only)) return "SkylakeX";
  if (avx2_fma && old) return "Haswell";
  return {};
}

std::string blas_info() {
  std::ostringstream os;
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  os << (config ? config : "OpenBLAS") << "; kernels: " << (core ? core : "?")
     << "; threads: " << openblas_get_num_threads()
     << (kiln_splits_blas() ? " (large products split over Kiln's pool)"
                            : " (OpenBLAS's own threads)")
     << "; OPENBLAS_CORETYPE=";
  if (const char* env = std::getenv("OPENBLAS_CORETYPE"); env && *env) {
    os << env << " (set by the user, respected)";
  } else {
    os << "unset (kernels chosen by CPU detection)";
    const std::string better =
        blas_better_core(core ? core : "", __builtin_cpu_supports("avx512f"),
                         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    if (!better.empty())
      os << "; OpenBLAS did not recognise this CPU and runs older kernels than it can: set "
         << "OPENBLAS_CORETYPE=" << better;
  }
  os << "; small products: " << small_gemm_info();
  return os.str();
}

void blas_init() {
  // A user's OPENBLAS_CORETYPE is respected as is; blas_info() reports it and
  // the kernels it selected. Asking for the core name makes OpenBLAS settle now.
  (void)openblas_get_corename();
  (void)kiln_splits_blas();
}

}  // namespace kiln
