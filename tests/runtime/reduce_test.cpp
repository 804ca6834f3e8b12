// Reductions: every reduction of the op table over dim lists with keepdim, argmax/argmin with
// ties and NaN, integer and bool sums, non-contiguous inputs, the parallel
// paths (inner, outer, split), and f32 accuracy.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir/error.h"
#include "op_table_util.h"
#include "runtime/reference_impl.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

Attrs dims_attr(std::vector<int64_t> dims, bool keepdim) {
  return Attrs{{AttrKey::dims, std::move(dims)}, {AttrKey::keepdim, int64_t(keepdim)}};
}
Attrs dim_attr(int64_t dim, bool keepdim) {
  return Attrs{{AttrKey::dim, dim}, {AttrKey::keepdim, int64_t(keepdim)}};
}

// One element folded into an accumulator by the row's combine op: the reference
// kernel of that binary op on two 0-d f64 values.
double combine(OpKind op, double acc, double x) {
  return values(run(op, {arr(DType::f64, {}, {acc}), arr(DType::f64, {}, {x})}))[0];
}

// Where the row's accumulator starts (ops.def's identity column), in f64.
double identity(Identity id) {
  switch (id) {
    case Identity::one:
      return 1;
    case Identity::lowest:
      return -INFINITY;
    case Identity::highest:
      return INFINITY;
    default:
      return 0;
  }
}

// Brute force of reduction k of a dense [a,b,c] tensor over `dims`, in the kept
// dims' order, from its row of the op table: the identity, then every element
// folded in with the combine op.
std::vector<double> brute(const std::vector<double>& x, const Shape& s, std::vector<int64_t> dims,
                          OpKind k) {
  auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  Shape kept;
  for (int64_t d = 0; d < 3; ++d)
    if (!reduced(d)) kept.push_back(s[d]);
  std::vector<double> out(size_t(numel(kept)), identity(op_info(k).identity));
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      for (int64_t l = 0; l < s[2]; ++l) {
        int64_t idx[3] = {i, j, l}, o = 0;
        for (int64_t d = 0; d < 3; ++d)
          if (!reduced(d)) o = o * s[d] + idx[d];
        double& r = out[size_t(o)];
        r = combine(op_info(k).combine, r, x[size_t((i * s[1] + j) * s[2] + l)]);
      }
  return out;
}

}  // namespace

// Every reduction of the op table (not argmax/argmin: below) against its row.
TEST_CASE("every table reduction over every dim subset, with and without keepdim") {
  const Shape s = {2, 3, 4};
  std::vector<double> x;
  for (int i = 0; i < 24; ++i) x.push_back(double((i * 7) % 11) - 5);
  const std::vector<std::vector<int64_t>> subsets = {{},     {0},    {1},       {2},    {0, 1},
                                                     {0, 2}, {1, 2}, {0, 1, 2}, {-1, 0}};
  int64_t checked = 0;
  for (OpKind k : table_reductions()) {
    if (is_arg_reduction(k)) continue;
    ++checked;
    for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
      for (const auto& dims : subsets) {
        for (bool keep : {false, true}) {
          CAPTURE(op_name(k));
          CAPTURE(dtype_name(dt));
          CAPTURE(shape_str(dims));
          CAPTURE(keep);
          Arr out = run(k, {arr(dt, s, x)}, dims_attr(dims, keep));
          std::vector<int64_t> nd = normalize_dims(dims, 3);
          CHECK(values(out) == brute(x, s, nd, k));
          if (k == OpKind::sum && is_integral(dt)) CHECK(out.v.dtype == DType::i64);
          if (keep) CHECK(out.v.rank() == 3);
        }
      }
    }
  }
  CHECK(checked >= 3);  // sum, max, min at least
}

// A reduce row's kernel folds with whichever binary op of the table its combine
// column names: ops no row uses yet (a product, a logsumexp, any/all, a max
// from 0) through the op's scalar functor, inner, outer and split over cores.
TEST_CASE("a reduction folds with any combine op of the table (ref_fold)") {
  auto fold = [](Identity id, OpKind combine, const Arr& in, std::vector<int64_t> dims,
                 DType out_t) {
    Shape kept;
    for (int64_t d = 0; d < in.v.rank(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(in.v.shape[d]);
    Arr out = empty(out_t, kept);
    detail::ref_fold(id, combine, dims, in.v, out.v);
    return values(out);
  };
  const Arr m = arr(DType::f64, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(fold(Identity::one, OpKind::mul, m, {1}, DType::f64) == std::vector<double>{6, 120});
  CHECK(fold(Identity::one, OpKind::mul, m, {0}, DType::f64) == std::vector<double>{4, 10, 18});
  CHECK(fold(Identity::one, OpKind::mul, arr(DType::i32, {2, 3}, {1, 2, 3, 4, 5, 6}), {0, 1},
             DType::i32) == std::vector<double>{720});
  check_close(fold(Identity::lowest, OpKind::logaddexp, m, {1}, DType::f64),
              {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)),
               std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0))},
              1e-14, 0);
  const Arr b = arr(DType::b8, {2, 3}, {0, 0, 1, 1, 1, 1});
  CHECK(fold(Identity::zero, OpKind::logical_or, b, {1}, DType::b8) == std::vector<double>{1, 1});
  CHECK(fold(Identity::one, OpKind::logical_and, b, {1}, DType::b8) == std::vector<double>{0, 1});
  CHECK(fold(Identity::zero, OpKind::logical_or, b, {0}, DType::b8) ==
        std::vector<double>{1, 1, 1});
  // The identity is the row's, not the combine op's usual one: a max from 0.
  CHECK(fold(Identity::zero, OpKind::maximum, arr(DType::f32, {2, 2}, {-3, -1, 2, -5}), {1},
             DType::f32) == std::vector<double>{0, 2});
  // Long lines split over cores (partial products merged in order), inner and
  // wide outer reductions, against a serial fold.
  for (const auto& [s, d] :
       std::vector<std::pair<Shape, int64_t>>{{{200000, 1}, 0}, {{3000, 70}, 0}, {{70, 3000}, 1}}) {
    CAPTURE(shape_str(s));
    std::vector<double> x(size_t(numel(s)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 1 + 1e-6 * double(int(i % 5) - 2);
    std::vector<double> want(static_cast<size_t>(s[size_t(1 - d)]), 1.0);
    for (int64_t i = 0; i < s[0]; ++i)
      for (int64_t j = 0; j < s[1]; ++j) want[size_t(d == 0 ? j : i)] *= x[size_t(i * s[1] + j)];
    check_close(fold(Identity::one, OpKind::mul, arr(DType::f64, s, x), {d}, DType::f64), want,
                1e-12, 0);
  }
}

TEST_CASE("hand-worked reductions") {
  Arr m = f32({2, 3}, {1, 5, 3, 4, 2, 6});
  CHECK(values(run(OpKind::sum, {m}, dims_attr({1}, false))) == std::vector<double>{9, 12});
  CHECK(values(run(OpKind::sum, {m}, dims_attr({0}, true))) == std::vector<double>{5, 7, 9});
  CHECK(values(run(OpKind::max, {m}, dims_attr({0, 1}, false))) == std::vector<double>{6});
  CHECK(values(run(OpKind::min, {m}, dims_attr({1}, true))) == std::vector<double>{1, 2});
  CHECK(values(run(OpKind::argmax, {m}, dim_attr(1, false))) == std::vector<double>{1, 2});
  CHECK(values(run(OpKind::argmin, {m}, dim_attr(0, false))) == std::vector<double>{0, 1, 0});
  // Scalars reduce to themselves.
  CHECK(values(run(OpKind::sum, {f32({}, {3})}, dims_attr({}, false))) == std::vector<double>{3});
}

TEST_CASE("bool and integer sums accumulate in int64") {
  Arr b = arr(DType::b8, {5}, {1, 0, 1, 1, 0});
  Arr s = run(OpKind::sum, {b}, dims_attr({0}, false));
  CHECK(s.v.dtype == DType::i64);
  CHECK(values(s) == std::vector<double>{3});
  Arr big = arr(DType::i32, {3}, {2e9, 2e9, 2e9});
  CHECK(values(run(OpKind::sum, {big}, dims_attr({0}, false))) == std::vector<double>{6e9});
  CHECK(values(run(OpKind::max, {b}, dims_attr({0}, false))) == std::vector<double>{1});
}

TEST_CASE("argmax/argmin return the first extreme; NaN counts as the extreme") {
  CHECK(values(run(OpKind::argmax, {f32({5}, {1, 3, 3, 2, 3})}, dim_attr(0, false))) ==
        std::vector<double>{1});
  CHECK(values(run(OpKind::argmin, {f32({4}, {2, 1, 1, 5})}, dim_attr(-1, true))) ==
        std::vector<double>{1});
  CHECK(values(run(OpKind::argmax, {f32({4}, {1, kNaN, 5, kNaN})}, dim_attr(0, false))) ==
        std::vector<double>{1});
  CHECK(values(run(OpKind::argmin, {f32({4}, {1, -3, kNaN, -3})}, dim_attr(0, false))) ==
        std::vector<double>{2});
  // Down columns (the outer path) with ties.
  Arr m = arr(DType::i32, {3, 4}, {1, 9, 2, 2, 7, 9, 2, 0, 7, 1, 5, 0});
  Arr am = run(OpKind::argmax, {m}, dim_attr(0, false));
  CHECK(am.v.dtype == DType::i64);
  CHECK(values(am) == std::vector<double>{1, 0, 2, 0});
  CHECK(values(run(OpKind::argmin, {m}, dim_attr(0, true))) == std::vector<double>{0, 2, 0, 1});
  CHECK(values(run(OpKind::argmax, {m}, dim_attr(1, false))) == std::vector<double>{1, 1, 0});
}

TEST_CASE("max and min propagate NaN") {
  Arr x = f32({2, 3}, {1, kNaN, 3, 4, 5, 6});
  check_close(values(run(OpKind::max, {x}, dims_attr({1}, false))), {kNaN, 6});
  check_close(values(run(OpKind::min, {x}, dims_attr({0}, false))), {1, kNaN, 3});
  std::vector<double> long_row(1000, 1.0);
  long_row[517] = kNaN;
  check_close(values(run(OpKind::max, {f32({1000}, long_row)}, dims_attr({0}, false))), {kNaN});
}

TEST_CASE("non-contiguous inputs: transposed, sliced, expanded") {
  Arr m = iota(DType::f32, {3, 4});
  Arr t = transposed(m);  // [4,3]: t[i][j] = 4j + i
  CHECK(values(run(OpKind::sum, {t}, dims_attr({1}, false))) ==
        std::vector<double>{12, 15, 18, 21});
  CHECK(values(run(OpKind::sum, {t}, dims_attr({0}, false))) == std::vector<double>{6, 22, 38});
  CHECK(values(run(OpKind::argmax, {t}, dim_attr(0, false))) == std::vector<double>{3, 3, 3});
  Arr e = view_as(f32({3}, {1, 2, 3}), OpKind::expand,
                  Attrs{{AttrKey::shape, std::vector<int64_t>{4, 3}}});
  CHECK(values(run(OpKind::sum, {e}, dims_attr({0}, false))) == std::vector<double>{4, 8, 12});
  CHECK(values(run(OpKind::argmax, {e}, dim_attr(0, false))) == std::vector<double>{0, 0, 0});
  Arr s = view_as(m, OpKind::slice,
                  Attrs{{AttrKey::dim, int64_t{1}},
                        {AttrKey::start, int64_t{1}},
                        {AttrKey::end, int64_t{4}},
                        {AttrKey::step, int64_t{2}}});  // columns 1, 3
  CHECK(values(run(OpKind::max, {s}, dims_attr({0}, false))) == std::vector<double>{9, 11});
}

TEST_CASE("large reductions take the parallel paths and agree with double sums") {
  const int64_t rows = 700, cols = 1100;
  std::vector<double> x(size_t(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = double((i * 2654435761u) % 1000) / 16.0 - 30;
  Arr a = arr(DType::f32, {rows, cols}, x);
  std::vector<double> row_sum(size_t(rows), 0), col_sum(size_t(cols), 0),
      col_max(size_t(cols), -INFINITY);
  std::vector<double> row_arg(size_t(rows), 0);
  double total = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double v = x[size_t(i * cols + j)];
      row_sum[size_t(i)] += v;
      col_sum[size_t(j)] += v;
      col_max[size_t(j)] = std::max(col_max[size_t(j)], v);
      if (v > x[size_t(i * cols + int64_t(row_arg[size_t(i)]))]) row_arg[size_t(i)] = double(j);
      total += v;
    }
  // Values are multiples of 1/16 well inside f32's range: every sum is exact.
  CHECK(values(run(OpKind::sum, {a}, dims_attr({1}, false))) == row_sum);
  CHECK(values(run(OpKind::sum, {a}, dims_attr({0}, false))) == col_sum);
  CHECK(values(run(OpKind::max, {a}, dims_attr({0}, false))) == col_max);
  CHECK(values(run(OpKind::argmax, {a}, dim_attr(1, false))) == row_arg);
  CHECK(values(run(OpKind::sum, {a}, dims_attr({0, 1}, false)))[0] == double(float(total)));
  // The same through a transposed view (outer becomes inner and back).
  Arr t = transposed(a);
  CHECK(values(run(OpKind::sum, {t}, dims_attr({0}, false))) == row_sum);
  CHECK(values(run(OpKind::sum, {t}, dims_attr({1}, false))) == col_sum);

  // A long flat argmax with a tie: the first index wins across chunk boundaries.
  std::vector<double> flat(size_t(1) << 20, 0.0);
  flat[300000] = 5;
  flat[900000] = 5;
  CHECK(values(run(OpKind::argmax, {f32({1 << 20}, flat)}, dim_attr(0, false))) ==
        std::vector<double>{300000});
  // Few wide outputs: reducing dim 0 of [2^18, 3] splits the reduced dim.
  Arr tall = iota(DType::i64, {1 << 18, 3});
  double n = double(1 << 18);
  std::vector<double> want = {3 * n * (n - 1) / 2, 3 * n * (n - 1) / 2 + n,
                              3 * n * (n - 1) / 2 + 2 * n};
  CHECK(values(run(OpKind::sum, {tall}, dims_attr({0}, false))) == want);
  CHECK(values(run(OpKind::argmin, {tall}, dim_attr(0, false))) == std::vector<double>{0, 0, 0});
}

TEST_CASE("f32 sums are accurate") {
  const int64_t n = 10'000'000;
  Arr a = empty(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) a.v.ptr<float>()[i] = 0.1f;
  double want = double(0.1f) * double(n);
  double got = values(run(OpKind::sum, {a}, dims_attr({0}, false)))[0];
  CHECK(std::fabs(got - want) / want < 1e-6);  // a naive f32 loop is off by ~10%
}

TEST_CASE("empty reductions") {
  Arr z = empty(DType::f32, {0, 3});
  CHECK(values(run(OpKind::sum, {z}, dims_attr({0}, false))) == std::vector<double>{0, 0, 0});
  CHECK(run(OpKind::sum, {z}, dims_attr({1}, false)).v.numel() == 0);
  CHECK_THROWS_AS(run(OpKind::max, {z}, dims_attr({0}, false)), Error);
}

TEST_CASE("vectorised max/min paths: long rows and columns, every numeric dtype, inf and NaN") {
  const int64_t rows = 5, cols = 1003;  // ragged tails after whole vectors
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    CAPTURE(dtype_name(dt));
    std::vector<double> x(size_t(rows * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = double(int64_t((i * 40503u) % 2001) - 1000);
    x[size_t(2 * cols + 1001)] = 5000;  // max of row 2 sits in the tail
    x[size_t(3 * cols + 17)] = -5000;   // min of row 3 sits in a vector
    Arr a = arr(dt, {rows, cols}, x);
    std::vector<double> rmax(size_t(rows), -INFINITY), rmin(size_t(rows), INFINITY);
    std::vector<double> cmax(size_t(cols), -INFINITY);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double v = x[size_t(i * cols + j)];
        rmax[size_t(i)] = std::max(rmax[size_t(i)], v);
        rmin[size_t(i)] = std::min(rmin[size_t(i)], v);
        cmax[size_t(j)] = std::max(cmax[size_t(j)], v);
      }
    CHECK(values(run(OpKind::max, {a}, dims_attr({1}, false))) == rmax);
    CHECK(values(run(OpKind::min, {a}, dims_attr({1}, false))) == rmin);
    CHECK(values(run(OpKind::max, {a}, dims_attr({0}, false))) == cmax);
  }
  // Infinities are ordinary values; a NaN anywhere wins, in rows and in columns.
  std::vector<double> x(2000, 1.0);
  x[10] = -INFINITY;
  x[1500] = INFINITY;
  check_close(values(run(OpKind::min, {f32({2000}, x)}, dims_attr({0}, false))), {-INFINITY});
  check_close(values(run(OpKind::max, {f32({2000}, x)}, dims_attr({0}, false))), {INFINITY});
  x[1999] = kNaN;
  check_close(values(run(OpKind::min, {arr(DType::f64, {2000}, x)}, dims_attr({0}, false))),
              {kNaN});
  Arr cols_nan = f32({4, 500}, std::vector<double>(2000, 2.0));
  cols_nan.v.ptr<float>()[3 * 500 + 123] = NAN;
  std::vector<double> got = values(run(OpKind::max, {cols_nan}, dims_attr({0}, false)));
  CHECK(std::isnan(got[123]));
  CHECK(got[122] == 2.0);
  CHECK(got[124] == 2.0);
}
