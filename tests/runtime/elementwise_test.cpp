// Elementwise reference kernels against closed forms: every unary and binary
// op, where and cast, over dtypes, broadcasting and non-contiguous views.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double gelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double sign(double x) {
  return double((0 < x) - (x < 0));
}

struct UnaryRow {
  OpKind op;
  std::function<double(double)> f;
};

const std::vector<UnaryRow>& unary_rows() {
  static const std::vector<UnaryRow> rows = {
      {OpKind::neg, [](double x) { return -x; }},
      {OpKind::abs, [](double x) { return std::fabs(x); }},
      {OpKind::sign, sign},
      {OpKind::exp, [](double x) { return std::exp(x); }},
      {OpKind::log, [](double x) { return std::log(x); }},
      {OpKind::sqrt, [](double x) { return std::sqrt(x); }},
      {OpKind::rsqrt, [](double x) { return 1 / std::sqrt(x); }},
      {OpKind::sin, [](double x) { return std::sin(x); }},
      {OpKind::cos, [](double x) { return std::cos(x); }},
      {OpKind::tanh, [](double x) { return std::tanh(x); }},
      {OpKind::sigmoid, sigmoid},
      {OpKind::relu, [](double x) { return x > 0 ? x : 0.0; }},
      {OpKind::gelu, gelu},
  };
  return rows;
}

struct BinaryRow {
  OpKind op;
  std::function<double(double, double)> f;
};

const std::vector<BinaryRow>& binary_rows() {
  static const std::vector<BinaryRow> rows = {
      {OpKind::add, [](double a, double b) { return a + b; }},
      {OpKind::sub, [](double a, double b) { return a - b; }},
      {OpKind::mul, [](double a, double b) { return a * b; }},
      {OpKind::div, [](double a, double b) { return a / b; }},
      {OpKind::pow, [](double a, double b) { return std::pow(a, b); }},
      {OpKind::maximum, [](double a, double b) { return std::max(a, b); }},
      {OpKind::minimum, [](double a, double b) { return std::min(a, b); }},
      {OpKind::eq, [](double a, double b) { return double(a == b); }},
      {OpKind::ne, [](double a, double b) { return double(a != b); }},
      {OpKind::lt, [](double a, double b) { return double(a < b); }},
      {OpKind::le, [](double a, double b) { return double(a <= b); }},
      {OpKind::gt, [](double a, double b) { return double(a > b); }},
      {OpKind::ge, [](double a, double b) { return double(a >= b); }},
      {OpKind::logical_and, [](double a, double b) { return double(a != 0 && b != 0); }},
      {OpKind::logical_or, [](double a, double b) { return double(a != 0 || b != 0); }},
  };
  return rows;
}

std::vector<double> map1(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> y;
  for (double v : x) y.push_back(f(v));
  return y;
}

}  // namespace

TEST_CASE("unary ops match their closed forms in f32 and f64") {
  const std::vector<double> mixed = {-2.5, -1.0, -0.25, 0.0, 0.5, 1.0, 3.0};
  const std::vector<double> positive = {0.125, 0.5, 1.0, 2.0, 9.0, 100.0};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const UnaryRow& row : unary_rows()) {
      CAPTURE(op_name(row.op));
      CAPTURE(dtype_name(dt));
      const auto& x = op_info(row.op).domain.low(0) > 0 ? positive : mixed;  // ops.def's domain
      std::vector<double> xr;  // inputs as the dtype holds them
      for (double v : x) xr.push_back(dt == DType::f32 ? double(float(v)) : v);
      Arr out = run(row.op, {arr(dt, {int64_t(x.size())}, x)});
      CHECK(out.v.dtype == dt);
      check_close(values(out), map1(xr, row.f), dt == DType::f32 ? 1e-6 : 1e-14, 1e-7);
    }
  }
}

TEST_CASE("unary ops on integers: exact, or promoted to f32") {
  const std::vector<double> x = {-7, -1, 0, 2, 5};
  for (DType dt : {DType::i32, DType::i64}) {
    CAPTURE(dtype_name(dt));
    Arr a = arr(dt, {5}, x);
    CHECK(values(run(OpKind::neg, {a})) == std::vector<double>{7, 1, 0, -2, -5});
    CHECK(values(run(OpKind::abs, {a})) == std::vector<double>{7, 1, 0, 2, 5});
    CHECK(values(run(OpKind::sign, {a})) == std::vector<double>{-1, -1, 0, 1, 1});
    CHECK(values(run(OpKind::relu, {a})) == std::vector<double>{0, 0, 0, 2, 5});
    Arr e = run(OpKind::exp, {a});
    CHECK(e.v.dtype == DType::f32);
    check_close(values(e), map1(x, [](double v) { return std::exp(v); }), 2e-7);
  }
  // The most negative i32 wraps on neg, as two's complement does.
  Arr m = arr(DType::i32, {1}, {double(std::numeric_limits<int32_t>::min())});
  CHECK(values(run(OpKind::neg, {m}))[0] == double(std::numeric_limits<int32_t>::min()));
}

TEST_CASE("float special values: NaN and infinities") {
  Arr x = f32({4}, {kNaN, std::numeric_limits<double>::infinity(), -0.0, -1.0});
  check_close(values(run(OpKind::relu, {x})), {kNaN, INFINITY, 0, 0});
  check_close(values(run(OpKind::sigmoid, {x})), {kNaN, 1.0, 0.5, sigmoid(-1.0)}, 2e-7);
  check_close(values(run(OpKind::sqrt, {x})), {kNaN, INFINITY, 0, kNaN});
  check_close(values(run(OpKind::log, {f32({2}, {0.0, -1.0})})), {-INFINITY, kNaN});
  // torch.sign: NaN and -0 give 0.
  check_close(values(run(OpKind::sign, {x})), {0, 1, 0, -1});
}

TEST_CASE("logical_not and cast") {
  Arr x = f32({4}, {0.0, 2.0, -0.0, kNaN});
  Arr n = run(OpKind::logical_not, {x});
  CHECK(n.v.dtype == DType::b8);
  CHECK(values(n) == std::vector<double>{1, 0, 1, 0});
  CHECK(values(run(OpKind::logical_not, {arr(DType::i64, {3}, {0, 5, -1})})) ==
        std::vector<double>{1, 0, 0});
  CHECK(values(run(OpKind::logical_not, {arr(DType::b8, {2}, {0, 1})})) ==
        std::vector<double>{1, 0});

  Arr y = f32({5}, {1.7, -1.7, 0.0, 2.5, 100.0});
  Arr to_i32 = run(OpKind::cast, {y}, Attrs{{AttrKey::dtype, DType::i32}});
  CHECK(to_i32.v.dtype == DType::i32);
  CHECK(values(to_i32) == std::vector<double>{1, -1, 0, 2, 100});
  Arr to_bool = run(OpKind::cast, {y}, Attrs{{AttrKey::dtype, DType::b8}});
  CHECK(values(to_bool) == std::vector<double>{1, 1, 0, 1, 1});
  Arr back = run(OpKind::cast, {to_bool}, Attrs{{AttrKey::dtype, DType::f64}});
  CHECK(values(back) == std::vector<double>{1, 1, 0, 1, 1});
  Arr big = arr(DType::i64, {1}, {double((int64_t(1) << 53) + 2)});
  CHECK(values(run(OpKind::cast, {big}, Attrs{{AttrKey::dtype, DType::f64}}))[0] ==
        double((int64_t(1) << 53) + 2));
}

TEST_CASE("binary ops match their closed forms in f32 and f64") {
  const std::vector<double> a = {-2.0, -0.5, 0.0, 1.5, 3.0, 2.0, 4.0, 0.25};
  const std::vector<double> b = {3.0, 2.0, 1.0, 1.5, -1.0, 0.5, 2.0, 0.25};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const BinaryRow& row : binary_rows()) {
      CAPTURE(op_name(row.op));
      CAPTURE(dtype_name(dt));
      std::vector<double> want;
      for (size_t i = 0; i < a.size(); ++i) want.push_back(row.f(a[i], b[i]));
      Arr out = run(row.op, {arr(dt, {8}, a), arr(dt, {8}, b)});
      check_close(values(out), want, dt == DType::f32 ? 2e-7 : 1e-15);
    }
  }
}

TEST_CASE("maximum and minimum propagate NaN") {
  Arr a = f32({3}, {kNaN, 1.0, kNaN});
  Arr b = f32({3}, {1.0, kNaN, kNaN});
  check_close(values(run(OpKind::maximum, {a, b})), {kNaN, kNaN, kNaN});
  check_close(values(run(OpKind::minimum, {a, b})), {kNaN, kNaN, kNaN});
  CHECK(values(run(OpKind::eq, {a, b})) == std::vector<double>{0, 0, 0});
  CHECK(values(run(OpKind::ne, {a, b})) == std::vector<double>{1, 1, 1});
}

TEST_CASE("integer binary ops") {
  Arr a = arr(DType::i32, {6}, {2, 3, -2, 7, 5, 2});
  Arr b = arr(DType::i32, {6}, {10, 0, 3, 2, -1, -1});
  CHECK(values(run(OpKind::pow, {a, b})) == std::vector<double>{1024, 1, -8, 49, 0, 0});
  CHECK(values(run(OpKind::add, {a, b})) == std::vector<double>{12, 3, 1, 9, 4, 1});
  CHECK(values(run(OpKind::mul, {a, b})) == std::vector<double>{20, 0, -6, 14, -5, -2});
  CHECK(values(run(OpKind::maximum, {a, b})) == std::vector<double>{10, 3, 3, 7, 5, 2});
  // True division: integers give f32.
  Arr d = run(OpKind::div, {a, b});
  CHECK(d.v.dtype == DType::f32);
  check_close(values(d), {0.2, INFINITY, -2.0 / 3, 3.5, -5, -2}, 1e-7);
  // pow of 1 and -1 to negative powers stays exact.
  Arr ones = arr(DType::i64, {3}, {1, -1, -1});
  Arr negs = arr(DType::i64, {3}, {-5, -3, -2});
  CHECK(values(run(OpKind::pow, {ones, negs})) == std::vector<double>{1, -1, 1});
}

TEST_CASE("mixed dtypes: arithmetic in the result dtype, comparisons in the promoted one") {
  Arr i = arr(DType::i64, {3}, {1, 2, 3});
  Arr f = f32({3}, {0.5, 0.25, -1.0});
  Arr s = run(OpKind::add, {i, f});
  CHECK(s.v.dtype == DType::f32);
  CHECK(values(s) == std::vector<double>{1.5, 2.25, 2.0});
  Arr w = run(OpKind::mul, {arr(DType::i32, {2}, {3, 4}), arr(DType::i64, {2}, {5, 6})});
  CHECK(w.v.dtype == DType::i64);
  CHECK(values(w) == std::vector<double>{15, 24});
  // 2^24 + 1 compares equal to 2^24 in f32, as torch does.
  Arr big = arr(DType::i32, {2}, {16777217, 3});
  Arr fl = f32({2}, {16777216, 2.5});
  CHECK(values(run(OpKind::eq, {big, fl})) == std::vector<double>{1, 0});
  CHECK(values(run(OpKind::gt, {big, fl})) == std::vector<double>{0, 1});
  // bool + bool is logical or, bool * bool logical and.
  Arr t = arr(DType::b8, {4}, {0, 0, 1, 1});
  Arr u = arr(DType::b8, {4}, {0, 1, 0, 1});
  CHECK(values(run(OpKind::add, {t, u})) == std::vector<double>{0, 1, 1, 1});
  CHECK(values(run(OpKind::mul, {t, u})) == std::vector<double>{0, 0, 0, 1});
  CHECK(values(run(OpKind::logical_and, {t, u})) == std::vector<double>{0, 0, 0, 1});
}

TEST_CASE("broadcasting") {
  Arr m = iota(DType::f32, {2, 3});  // [[0,1,2],[3,4,5]]
  CHECK(values(run(OpKind::add, {m, f32({3}, {10, 20, 30})})) ==
        std::vector<double>{10, 21, 32, 13, 24, 35});
  CHECK(values(run(OpKind::mul, {f32({2, 1}, {2, 3}), f32({1, 3}, {1, 10, 100})})) ==
        std::vector<double>{2, 20, 200, 3, 30, 300});
  Arr scalar = f32({}, {7});
  CHECK(values(run(OpKind::sub, {scalar, m})) == std::vector<double>{7, 6, 5, 4, 3, 2});
  CHECK(values(run(OpKind::sub, {m, scalar})) == std::vector<double>{-7, -6, -5, -4, -3, -2});
  Arr r = run(OpKind::add, {iota(DType::f64, {3, 1, 2}), iota(DType::f64, {4, 1}, 100)});
  CHECK(r.v.shape == Shape{3, 4, 2});
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(i * 2 + k + 100 + j);
  CHECK(values(r) == want);
}

TEST_CASE("non-contiguous inputs: transposed, sliced with a step, expanded") {
  Arr m = iota(DType::f32, {3, 4});
  Arr t = transposed(m);  // [4,3], strides [1,4]
  Arr s = run(OpKind::add, {t, iota(DType::f32, {4, 3}, 100)});
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(j * 4 + i + 100 + i * 3 + j);
  CHECK(values(s) == want);

  Arr sl = view_as(iota(DType::f64, {10}), OpKind::slice,
                   Attrs{{AttrKey::dim, int64_t{0}},
                         {AttrKey::start, int64_t{1}},
                         {AttrKey::end, int64_t{10}},
                         {AttrKey::step, int64_t{3}}});  // 1, 4, 7
  CHECK(values(run(OpKind::neg, {sl})) == std::vector<double>{-1, -4, -7});

  Arr e = view_as(f32({3, 1}, {1, 2, 3}), OpKind::expand,
                  Attrs{{AttrKey::shape, std::vector<int64_t>{3, 2}}});
  CHECK(values(run(OpKind::mul, {e, f32({3, 2}, {1, -1, 1, -1, 1, -1})})) ==
        std::vector<double>{1, -1, 2, -2, 3, -3});
}

TEST_CASE("large tensors split over cores agree with a plain loop") {
  const int64_t rows = 1000, cols = 1500;
  Arr a = iota(DType::f32, {rows, cols});
  Arr b = iota(DType::f32, {cols}, -7);
  Arr sum = run(OpKind::add, {a, b});
  Arr prod = run(OpKind::mul, {transposed(iota(DType::f32, {cols, rows})), a});
  const float* ps = sum.v.ptr<float>();
  const float* pp = prod.v.ptr<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float x = float(i * cols + j), y = float(j - 7), z = float(j * rows + i);
      bad += ps[i * cols + j] != x + y;
      bad += pp[i * cols + j] != z * x;
    }
  CHECK(bad == 0);
  Arr ex = run(OpKind::exp, {f32({}, {0.5})});
  CHECK(values(ex)[0] == doctest::Approx(std::exp(0.5)));
}

TEST_CASE("where: broadcasting condition and promoted branches") {
  Arr c = arr(DType::b8, {2, 1}, {1, 0});
  Arr a = f32({1, 3}, {1, 2, 3});
  Arr b = arr(DType::f64, {}, {-1});
  Arr w = run(OpKind::where, {c, a, b});
  CHECK(w.v.dtype == DType::f64);
  CHECK(w.v.shape == Shape{2, 3});
  CHECK(values(w) == std::vector<double>{1, 2, 3, -1, -1, -1});
  Arr c2 = arr(DType::b8, {4}, {1, 0, 0, 1});
  CHECK(values(run(OpKind::where, {c2, iota(DType::i32, {4}), iota(DType::i32, {4}, 10)})) ==
        std::vector<double>{0, 11, 12, 3});
}

TEST_CASE("where over long random masks: every run kind and element size picks exactly") {
  // The select is a bit mask over the branches' bytes (reference_elementwise.cpp):
  // dense branches and a broadcast scalar on either side, across vector widths,
  // keep each picked element's bits (-0.0, NaN) and nothing else.
  std::mt19937 rng(5);
  const int64_t n = 1001;
  std::vector<double> mask(static_cast<size_t>(n));
  for (double& m : mask) m = double(rng() % 2);
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::i8, DType::b8}) {
    CAPTURE(dtype_name(dt));
    const Arr c = arr(DType::b8, {n}, mask);
    std::vector<double> av(static_cast<size_t>(n)), bv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      av[size_t(i)] = dt == DType::b8 ? 1 : double(i % 100 + 1);
      bv[size_t(i)] = dt == DType::b8 ? 0 : -double(i % 50 + 1);
    }
    const Arr a = arr(dt, {n}, av), b = arr(dt, {n}, bv);
    const Arr sa = arr(dt, {}, {dt == DType::b8 ? 1.0 : 7.0});
    const Arr sb = arr(dt, {}, {dt == DType::b8 ? 0.0 : -7.0});
    const std::vector<double> full = values(run(OpKind::where, {c, a, b}));
    const std::vector<double> scalar_b = values(run(OpKind::where, {c, a, sb}));
    const std::vector<double> scalar_a = values(run(OpKind::where, {c, sa, b}));
    int bad = 0;
    for (size_t i = 0; i < size_t(n); ++i) {
      const bool m = mask[i] != 0;
      bad += full[i] != (m ? av[i] : bv[i]);
      bad += scalar_b[i] != (m ? av[i] : values(sb)[0]);
      bad += scalar_a[i] != (m ? values(sa)[0] : bv[i]);
    }
    CHECK(bad == 0);
  }
  // Special values keep their bits.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Arr c = arr(DType::b8, {4}, {1, 0, 1, 0});
  const std::vector<double> w =
      values(run(OpKind::where, {c, f32({4}, {-0.0, 1, nan, 2}), f32({4}, {3, -0.0, 4, nan})}));
  CHECK(std::signbit(w[0]));
  CHECK(std::signbit(w[1]));
  CHECK(std::isnan(w[2]));
  CHECK(std::isnan(w[3]));
}
