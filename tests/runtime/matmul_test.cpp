// matmul_cpu: 2-D, batched, broadcast batch dims, transposed and other
// strided views, f32/f64 through BLAS and integers through the plain loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <vector>

#include "runtime/blas.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {}  // namespace

TEST_CASE("2-D matmul by hand") {
  Arr a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Arr b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Arr c = run(OpKind::matmul, {a, b});
  CHECK(c.v.shape == Shape{2, 2});
  CHECK(values(c) == std::vector<double>{58, 64, 139, 154});
  for (DType dt : {DType::f64, DType::i32, DType::i64}) {
    CAPTURE(dtype_name(dt));
    Arr ad = arr(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    Arr bd = arr(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
    Arr cd = run(OpKind::matmul, {ad, bd});
    CHECK(cd.v.dtype == dt);
    CHECK(values(cd) == std::vector<double>{58, 64, 139, 154});
  }
  // Mixed dtypes promote (i64 @ f32 -> f32).
  Arr mixed = run(OpKind::matmul, {arr(DType::i64, {2, 3}, {1, 2, 3, 4, 5, 6}), b});
  CHECK(mixed.v.dtype == DType::f32);
  CHECK(values(mixed) == std::vector<double>{58, 64, 139, 154});
}

TEST_CASE("transposed operands go to BLAS with transpose flags") {
  const int64_t n = 37, k = 53, m = 29;
  std::vector<double> av = whole_numbers(n * k, 1), bv = whole_numbers(k * m, 2);
  std::vector<double> want = naive_matmul(av, bv, 1, n, k, m);
  for (DType dt : {DType::f32, DType::f64, DType::i32}) {
    CAPTURE(dtype_name(dt));
    Arr a = arr(dt, {n, k}, av), b = arr(dt, {k, m}, bv);
    // The same matrices stored transposed, viewed back: strides (1, rows).
    std::vector<double> at(size_t(n * k)), bt(size_t(k * m));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < k; ++p) at[size_t(p * n + i)] = av[size_t(i * k + p)];
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < m; ++j) bt[size_t(j * k + p)] = bv[size_t(p * m + j)];
    Arr a_t = transposed(arr(dt, {k, n}, at)), b_t = transposed(arr(dt, {m, k}, bt));
    CHECK(values(run(OpKind::matmul, {a, b})) == want);
    CHECK(values(run(OpKind::matmul, {a_t, b})) == want);
    CHECK(values(run(OpKind::matmul, {a, b_t})) == want);
    CHECK(values(run(OpKind::matmul, {a_t, b_t})) == want);
  }
}

TEST_CASE("strided views BLAS cannot read are copied first") {
  const int64_t n = 6, k = 5, m = 4;
  std::vector<double> av = whole_numbers(n * k, 3), bv = whole_numbers(k * m, 4);
  std::vector<double> want = naive_matmul(av, bv, 1, n, k, m);
  // a's columns interleaved with junk: a view with column stride 2.
  std::vector<double> wide(size_t(n * k * 2), 99);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < k; ++p) wide[size_t(i * 2 * k + 2 * p)] = av[size_t(i * k + p)];
  Arr aw = view_as(f32({n, 2 * k}, wide), OpKind::slice,
                   Attrs{{AttrKey::dim, int64_t{1}},
                         {AttrKey::start, int64_t{0}},
                         {AttrKey::end, int64_t{2 * k}},
                         {AttrKey::step, int64_t{2}}});
  CHECK(values(run(OpKind::matmul, {aw, f32({k, m}, bv)})) == want);
  // An expanded (stride-0) row broadcast as a matrix.
  Arr row = view_as(f32({1, k}, {1, 2, 3, 4, 5}), OpKind::expand,
                    Attrs{{AttrKey::shape, std::vector<int64_t>{3, k}}});
  Arr r = run(OpKind::matmul, {row, f32({k, 1}, {1, 1, 1, 1, 1})});
  CHECK(values(r) == std::vector<double>{15, 15, 15});
}

TEST_CASE("batched matmul, with broadcast batch dims") {
  const int64_t batch = 3, n = 4, k = 5, m = 2;
  std::vector<double> av = whole_numbers(batch * n * k, 5), bv = whole_numbers(batch * k * m, 6);
  // [3,4,5] @ [3,5,2]
  CHECK(values(run(OpKind::matmul, {f32({batch, n, k}, av), f32({batch, k, m}, bv)})) ==
        naive_matmul(av, bv, batch, n, k, m));
  // [3,4,5] @ [5,2]: b shared, folds into one tall gemm.
  std::vector<double> b0(bv.begin(), bv.begin() + k * m);
  CHECK(values(run(OpKind::matmul, {f32({batch, n, k}, av), f32({k, m}, b0)})) ==
        naive_matmul(av, b0, batch, n, k, m));
  // [3,1,4,5] @ [2,5,2] -> [3,2,4,2]
  std::vector<double> b2(bv.begin(), bv.begin() + 2 * k * m);
  Arr c = run(OpKind::matmul, {f32({batch, 1, n, k}, av), f32({2, k, m}, b2)});
  CHECK(c.v.shape == Shape{batch, 2, n, m});
  std::vector<double> got = values(c), want;
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t u = 0; u < 2; ++u) {
      std::vector<double> at(av.begin() + t * n * k, av.begin() + (t + 1) * n * k);
      std::vector<double> bt(b2.begin() + u * k * m, b2.begin() + (u + 1) * k * m);
      std::vector<double> one = naive_matmul(at, bt, 1, n, k, m);
      want.insert(want.end(), one.begin(), one.end());
    }
  CHECK(got == want);
  // A batch of transposed views (permuted last two dims of [3,5,4]).
  std::vector<double> a_stored(size_t(batch * k * n));
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < k; ++p)
        a_stored[size_t((t * k + p) * n + i)] = av[size_t((t * n + i) * k + p)];
  Arr a_t = transposed(f32({batch, k, n}, a_stored));
  CHECK(values(run(OpKind::matmul, {a_t, f32({k, m}, b0)})) ==
        naive_matmul(av, b0, batch, n, k, m));
}

TEST_CASE("matmul_cpu reports every block of output rows once, after writing it") {
  // Large enough to split over the pool's threads (a block per thread), and the
  // batched forms: a tall gemm over the batch, and one gemm per batch.
  struct Case {
    Shape a, b;
  };
  // [16,9] @ [64,9,64]: 64 products each too small to split by rows (a conv's
  // per-image GEMMs), split over the pool by batch.
  for (const Case& c :
       {Case{{256, 128}, {128, 160}}, Case{{4, 64, 32}, {32, 48}}, Case{{3, 40, 32}, {3, 32, 8}},
        Case{{1, 5}, {5, 0}}, Case{{16, 9}, {64, 9, 64}}}) {
    CAPTURE(shape_str(c.a));
    Arr a = iota(DType::f32, c.a, -100), b = iota(DType::f32, c.b, -50);
    Arr want = run(OpKind::matmul, {a, b});
    const int64_t cols = want.v.shape.back();
    const int64_t rows =
        cols ? want.v.numel() / cols : numel(Shape(want.v.shape.begin(), want.v.shape.end() - 1));
    Arr out = empty(DType::f32, want.v.shape);
    std::vector<std::atomic<int>> seen(static_cast<size_t>(rows));
    std::atomic<bool> complete{true};
    matmul_cpu(a.v, b.v, out.v, 1.0, 0.0, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        seen[size_t(r)]++;
        // The block is written: each of its rows holds the product's values.
        for (int64_t j = 0; j < cols; ++j)
          if (out.v.ptr<float>()[r * cols + j] != want.v.ptr<float>()[r * cols + j])
            complete = false;
      }
    });
    CHECK(complete);
    for (int64_t r = 0; r < rows; ++r) CHECK(seen[size_t(r)] == 1);
    CHECK(values(out) == values(want));
  }
}

TEST_CASE("a short product with a deep inner dim, split by depth over the pool, is exact") {
  // 64 x 1000 by 1000 x 100 (the two-layer step's x w1): a right operand of 400 KB
  // and a product of 25 KB, split over the inner dim; 10 x 256 by 256 x 1024 too.
  // Whole numbers, so every order of summation gives the same floats.
  const int saved = num_threads();
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (const auto& [n, k, m] : {std::array<int64_t, 3>{64, 1000, 100}, {10, 256, 1024}}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<double> av = whole_numbers(n * k, 5), bv = whole_numbers(k * m, 6);
      std::vector<double> cv = whole_numbers(n * m, 7);
      std::vector<double> want = naive_matmul(av, bv, 1, n, k, m);
      std::vector<double> at(size_t(n * k));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < k; ++p) at[size_t(p * n + i)] = av[size_t(i * k + p)];
      for (bool trans_a : {false, true}) {
        CAPTURE(trans_a);
        Arr a = trans_a ? transposed(f32({k, n}, at)) : f32({n, k}, av);
        Arr b = f32({k, m}, bv);
        // out = 2 (a @ b) + 0.5 out, every row reported once, after it is complete.
        Arr out = f32({n, m}, cv);
        std::vector<int> seen(size_t(n), 0);
        bool complete = true;
        std::vector<double> scaled(want.size());
        for (size_t i = 0; i < want.size(); ++i) scaled[i] = 2 * want[i] + 0.5 * cv[i];
        matmul_cpu(a.v, b.v, out.v, 2.0, 0.5, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            seen[size_t(r)]++;
            for (int64_t j = 0; j < m; ++j)
              if (out.v.ptr<float>()[r * m + j] != float(scaled[size_t(r * m + j)]))
                complete = false;
          }
        });
        CHECK(complete);
        CHECK(std::count(seen.begin(), seen.end(), 1) == n);
        CHECK(values(out) == scaled);
        CHECK(values(run(OpKind::matmul, {a, b})) == want);
      }
    }
  }
  set_num_threads(saved);
}

TEST_CASE("a product split by depth gives the same bits on every thread count") {
  // Fractions, so that the order of the sums shows in the bits.
  const int saved = num_threads();
  const int64_t n = 64, k = 1000, m = 100;
  std::vector<double> av(size_t(n * k)), bv(size_t(k * m));
  for (size_t i = 0; i < av.size(); ++i) av[i] = std::sin(double(i) * 0.37) / 3;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = std::cos(double(i) * 0.11) / 7;
  Arr a = f32({n, k}, av), b = f32({k, m}, bv);
  std::vector<std::vector<double>> got;
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    got.push_back(values(run(OpKind::matmul, {a, b})));
  }
  set_num_threads(saved);
  for (size_t t = 1; t < got.size(); ++t) CHECK(got[t] == got[0]);
}

TEST_CASE("a small right operand read transposed: the same values as stored dense") {
  // 64 x 10 by (100 x 10)^T (the two-layer step's g w2^T): small enough for
  // libxsmm once copied dense; and wider and narrower products around it.
  for (const auto& [n, k, m] :
       {std::array<int64_t, 3>{64, 10, 100}, {16, 7, 8}, {15, 7, 8}, {32, 33, 12}}) {
    CAPTURE(n);
    CAPTURE(m);
    std::vector<double> av = whole_numbers(n * k, 8), bv = whole_numbers(k * m, 9);
    std::vector<double> bt(size_t(k * m));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < m; ++j) bt[size_t(j * k + p)] = bv[size_t(p * m + j)];
    for (DType dt : {DType::f32, DType::f64}) {
      Arr a = arr(dt, {n, k}, av), b_t = transposed(arr(dt, {m, k}, bt));
      CHECK(values(run(OpKind::matmul, {a, b_t})) == naive_matmul(av, bv, 1, n, k, m));
      // Accumulating (beta 1) into an output already holding values.
      Arr out = arr(dt, {n, m}, whole_numbers(n * m, 10));
      matmul_cpu(a.v, b_t.v, out.v, 1.0, 1.0);
      std::vector<double> want = naive_matmul(av, bv, 1, n, k, m), init = whole_numbers(n * m, 10);
      for (size_t i = 0; i < want.size(); ++i) want[i] += init[i];
      CHECK(values(out) == want);
    }
  }
}

TEST_CASE("degenerate sizes") {
  Arr c = run(OpKind::matmul, {empty(DType::f32, {2, 0}), empty(DType::f32, {0, 3})});
  CHECK(values(c) == std::vector<double>(6, 0.0));
  CHECK(run(OpKind::matmul, {empty(DType::f64, {0, 4}), iota(DType::f64, {4, 2})}).v.numel() == 0);
  Arr big = run(OpKind::matmul, {iota(DType::f32, {1, 300}), iota(DType::f32, {300, 1})});
  CHECK(values(big)[0] == doctest::Approx(299.0 * 300 * 599 / 6));
}

TEST_CASE("older OpenBLAS kernels than the CPU can run are named, with the core type to set") {
  CHECK(blas_better_core("Prescott", true, true) == "SkylakeX");  // the H200 machines' VM
  CHECK(blas_better_core("Prescott", false, true) == "Haswell");
  CHECK(blas_better_core("Haswell", true, true) == "SkylakeX");
  CHECK(blas_better_core("Prescott", false, false).empty());  // a CPU with neither
  CHECK(blas_better_core("SkylakeX", true, true).empty());
  CHECK(blas_better_core("Haswell", false, true).empty());
  CHECK(blas_better_core("Zen", false, true).empty());
}

TEST_CASE("blas_info names the kernels") {
  blas_init();
  std::string info = blas_info();
  CHECK(info.find("OPENBLAS_CORETYPE") != std::string::npos);
  CHECK(info.find("kernels:") != std::string::npos);
  MESSAGE(info);
}
