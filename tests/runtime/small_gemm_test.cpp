// Small products through libxsmm (runtime/small_gemm.h): which products it
// takes (the size limit's edges, beta, a transposed right operand), and that
// matmul_cpu gives the naive product's values with it on and off, for f32 and
// f64, transposed and strided operands, accumulation (beta 1), batches of
// small products split over the pool (a conv's per-image GEMMs), products run
// in blocks of columns (a right operand over the limit, a left one in L1), and kernels
// first asked for by several threads at once.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

#include "runtime/blas.h"
#include "runtime/small_gemm.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// The same values stored as the transpose of the last two dims ([.., c, r] for [.., r, c]).
std::vector<double> stored_transposed(const std::vector<double>& v, int64_t r, int64_t c) {
  std::vector<double> t(v.size());
  for (size_t base = 0; base < v.size(); base += size_t(r * c))
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) t[base + size_t(j * r + i)] = v[base + size_t(i * c + j)];
  return t;
}

// matmul_cpu(a, b) with libxsmm on or off, into a fresh output holding `init`
// (beta 1 adds to it).
std::vector<double> product(const Arr& a, const Arr& b, const Shape& out_shape, double beta,
                            double init, bool small) {
  Arr out = arr(a.v.dtype, out_shape, std::vector<double>(size_t(numel(out_shape)), init));
  const bool saved = small_gemm_enabled();
  set_small_gemm_enabled(small);
  matmul_cpu(a.v, b.v, out.v, 1.0, beta);
  set_small_gemm_enabled(saved);
  return values(out);
}

struct Sizes {
  int64_t batch, n, k, m;
};

// Every form of one product: a plain or read transposed, b plain or read
// transposed, beta 0 (over NaN) and 1 (over 3s), libxsmm on and off, against
// the naive product. With batch > 1, a is shared (a conv's weight) and b
// batched; with batch 1 both are matrices.
void check_forms(DType dt, Sizes s) {
  const Shape a_shape = {s.n, s.k};
  const Shape b_shape = s.batch > 1 ? Shape{s.batch, s.k, s.m} : Shape{s.k, s.m};
  const Shape out_shape = s.batch > 1 ? Shape{s.batch, s.n, s.m} : Shape{s.n, s.m};
  const std::vector<double> av = whole_numbers(s.n * s.k, 1),
                            bv = whole_numbers(s.batch * s.k * s.m, 2);
  const std::vector<double> want = naive_matmul(av, bv, s.batch, s.n, s.k, s.m);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Arr a = ta ? transposed(arr(dt, {s.k, s.n}, stored_transposed(av, s.n, s.k)))
                 : arr(dt, a_shape, av);
      Shape b_stored = b_shape;
      std::swap(b_stored[b_stored.size() - 1], b_stored[b_stored.size() - 2]);
      Arr b = tb ? transposed(arr(dt, b_stored, stored_transposed(bv, s.k, s.m)))
                 : arr(dt, b_shape, bv);
      for (bool small : {true, false}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(small);
        CHECK(product(a, b, out_shape, 0, std::nan(""), small) == want);
        std::vector<double> plus3 = want;
        for (double& x : plus3) x += 3;
        CHECK(product(a, b, out_shape, 1, 3, small) == plus3);
      }
    }
}

}  // namespace

TEST_CASE("small_gemm takes products up to its size limit, with beta 0 or 1") {
  // One shape at the limit (the right operand exactly small_gemm_max_rhs_bytes())
  // and one just over it, for each dtype, called directly.
  auto check = [](auto zero) {
    using T = decltype(zero);
    const int64_t n = 64, k = small_gemm_max_rhs_bytes() / (n * int64_t(sizeof(T))), m = 3;
    REQUIRE(k * n * int64_t(sizeof(T)) == small_gemm_max_rhs_bytes());
    std::vector<T> a(size_t(m * (k + 1)), T(1)), b(size_t((k + 1) * n), T(2)),
        c(size_t(m * n), T(5));
    CHECK(small_gemm(false, m, n, k, a.data(), k, b.data(), n, T(0), c.data(), n));
    CHECK(c[0] == T(2 * k));
    CHECK(c.back() == T(2 * k));
    CHECK(small_gemm(false, m, n, k, a.data(), k, b.data(), n, T(1), c.data(), n));
    CHECK(c[0] == T(4 * k));
    // Over the limit, or a beta other than 0 and 1: declined, c untouched.
    CHECK_FALSE(small_gemm(false, m, n, k + 1, a.data(), k + 1, b.data(), n, T(0), c.data(), n));
    CHECK_FALSE(small_gemm(false, m, n, k, a.data(), k, b.data(), n, T(0.5), c.data(), n));
    CHECK(c[0] == T(4 * k));
    // Off: declined.
    set_small_gemm_enabled(false);
    CHECK_FALSE(small_gemm(false, 4, 4, 4, a.data(), 4, b.data(), 4, T(0), c.data(), 4));
    set_small_gemm_enabled(true);
    CHECK(small_gemm(false, 4, 4, 4, a.data(), 4, b.data(), 4, T(0), c.data(), 4));
  };
  check(float(0));
  check(double(0));
  CHECK(small_gemm_info().find("libxsmm") != std::string::npos);
  CHECK(blas_info().find("libxsmm") != std::string::npos);
}

TEST_CASE("small_gemm: a transposed, strided rows, and an output wider than the product") {
  // c (3 x 5, row stride 7) = a @ b with a stored 4 x 3 (read transposed, row
  // stride 6), b 4 x 5 (row stride 9); the padding holds 100s and must stay.
  const int64_t m = 3, k = 4, n = 5, lda = 6, ldb = 9, ldc = 7;
  for (bool trans_a : {false, true}) {
    CAPTURE(trans_a);
    std::vector<double> a(size_t(std::max(m, k) * lda), 100), b(size_t(k * ldb), 100),
        c(size_t(m * ldc), 100);
    auto a_at = [&](int64_t i, int64_t p) -> double& {
      return trans_a ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)];
    };
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) a_at(i, p) = double(i - p);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) b[size_t(p * ldb + j)] = double(p * j - 2);
    REQUIRE(small_gemm(trans_a, m, n, k, a.data(), lda, b.data(), ldb, 0.0, c.data(), ldc));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        double want = 100;
        if (j < n) {
          want = 0;
          for (int64_t p = 0; p < k; ++p) want += double(i - p) * double(p * j - 2);
        }
        CHECK(c[size_t(i * ldc + j)] == want);
      }
  }
}

TEST_CASE("matmul_cpu with small kernels: f32 and f64, at the size limit's edges, every form") {
  const int64_t limit = small_gemm_max_rhs_bytes();
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    const int64_t size = int64_t(dtype_size(dt));
    const int64_t m = 32, k_edge = limit / (m * size);  // k x m at the limit
    const int64_t wide = limit / (75 * size) + 37;      // 75 x wide over it
    for (Sizes s : {Sizes{1, 1, 1, 1}, Sizes{1, 8, 8, 8}, Sizes{1, 13, 7, 5}, Sizes{1, 64, 64, 64},
                    Sizes{1, 3, k_edge, m}, Sizes{1, 3, k_edge + 1, m},
                    // a conv's per-image products, split over the pool by batch
                    Sizes{64, 16, 9, 64}, Sizes{64, 32, 144, 16}, Sizes{5, 7, 3, 2},
                    // a right operand over the limit with a left one in L1 (the 5x5
                    // conv's [32,75] weight): libxsmm on blocks of columns, the last
                    // one narrower
                    Sizes{2, 32, 75, wide}, Sizes{1, 3, 75, wide}}) {
      CAPTURE(s.batch);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(s.m);
      check_forms(dt, s);
    }
  }
}

TEST_CASE("scaled products (alpha other than 1) still go to OpenBLAS and are right") {
  const std::vector<double> av = whole_numbers(6 * 5, 3), bv = whole_numbers(5 * 4, 4);
  std::vector<double> want = naive_matmul(av, bv, 1, 6, 5, 4);
  for (double& x : want) x = 2 * x + 0.5 * 1;
  for (DType dt : {DType::f32, DType::f64}) {
    Arr out = arr(dt, {6, 4}, std::vector<double>(24, 1));
    matmul_cpu(arr(dt, {6, 5}, av).v, arr(dt, {5, 4}, bv).v, out.v, 2.0, 0.5);
    CHECK(values(out) == want);
  }
}

TEST_CASE(
    "a broadcast batch of small products split over the pool: each chunk finds its operands") {
  // [8,1,32,144] @ [4,144,16] -> [8,4,32,16]: 32 products of 147 KFLOP, split by
  // batch; chunks start mid-batch, so each recovers both batch indices.
  const int64_t n = 32, k = 144, m = 16;
  const std::vector<double> av = whole_numbers(8 * n * k, 5), bv = whole_numbers(4 * k * m, 6);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    Arr a = arr(dt, {8, 1, n, k}, av), b = arr(dt, {4, k, m}, bv);
    std::vector<double> want;
    for (int64_t t = 0; t < 8; ++t)
      for (int64_t u = 0; u < 4; ++u) {
        std::vector<double> at(av.begin() + t * n * k, av.begin() + (t + 1) * n * k);
        std::vector<double> bt(bv.begin() + u * k * m, bv.begin() + (u + 1) * k * m);
        std::vector<double> one = naive_matmul(at, bt, 1, n, k, m);
        want.insert(want.end(), one.begin(), one.end());
      }
    for (bool small : {true, false}) {
      CAPTURE(small);
      CHECK(product(a, b, {8, 4, n, m}, 0, 0, small) == want);
    }
  }
}

TEST_CASE(
    "small_gemm: kernels first asked for by several threads at once give the right products") {
  // Sizes no other case here uses, so their kernels are made in this case: four
  // threads start together and run every product, each in its own order, f32
  // and f64, beta 0 and 1, a plain and read transposed.
  const std::vector<Sizes> sizes = {{1, 19, 23, 29}, {1, 31, 37, 11}, {1, 41, 3, 43},
                                    {1, 2, 47, 53},  {1, 59, 61, 7},  {1, 67, 13, 5}};
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::atomic<int> wrong{0}, declined{0};
  auto run_all = [&](int t) {
    start.arrive_and_wait();
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Sizes s = sizes[(i + size_t(t)) % sizes.size()];
      const std::vector<double> av = whole_numbers(s.n * s.k, 7), bv = whole_numbers(s.k * s.m, 8);
      const std::vector<double> want = naive_matmul(av, bv, 1, s.n, s.k, s.m);
      auto check = [&](auto zero, bool trans_a, double beta) {
        using T = decltype(zero);
        std::vector<T> a(av.size()), b(bv.begin(), bv.end()), c(want.size(), T(3));
        for (int64_t r = 0; r < s.n; ++r)
          for (int64_t p = 0; p < s.k; ++p)
            a[size_t(trans_a ? p * s.n + r : r * s.k + p)] = T(av[size_t(r * s.k + p)]);
        if (!small_gemm(trans_a, s.n, s.m, s.k, a.data(), trans_a ? s.n : s.k, b.data(), s.m,
                        T(beta), c.data(), s.m)) {
          declined++;
          return;
        }
        for (size_t j = 0; j < want.size(); ++j)
          if (c[j] != T(want[j] + 3 * beta)) wrong++;
      };
      for (bool trans_a : {false, true})
        for (double beta : {0.0, 1.0}) {
          check(float(0), trans_a, beta);
          check(double(0), trans_a, beta);
        }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(run_all, t);
  for (std::thread& t : threads) t.join();
  CHECK(declined == 0);
  CHECK(wrong == 0);
}
