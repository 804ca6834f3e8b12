// vector_exp (runtime/vector_exp.h), the exp of the attention step's score
// blocks: within 2 ulp of std::exp over the whole range of float and double,
// the special values exact, both as compiled for the base ISA and in a loop
// compiled for every ISA the CPU picks from (KILN_VECTOR_CLONES).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/vector_exp.h"

using namespace kiln;

namespace {

template <class T>
void exp_plain(T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = vector_exp(x[i]);
}
KILN_VECTOR_CLONES void exp_cloned(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = vector_exp(x[i]);
}
KILN_VECTOR_CLONES void exp_cloned(double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = vector_exp(x[i]);
}

// Distance in units in the last place (bit patterns on one ordered line).
template <class T>
int64_t ulps(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  auto line = [](T x) {
    const I i = std::bit_cast<I>(x);
    return i < 0 ? int64_t(std::numeric_limits<I>::min()) - int64_t(i) : int64_t(i);
  };
  return std::abs(line(a) - line(b));
}

// exp in double, rounded to T: the correctly rounded float, within an ulp for double.
template <class T>
T exact(T x) {
  return T(std::exp(double(x)));
}

template <class T>
void check_exp(void (*f)(T*, int64_t)) {
  const T lo = sizeof(T) == 4 ? T(-120) : T(-760), hi = sizeof(T) == 4 ? T(95) : T(720);
  std::vector<T> xs;
  for (T x = lo; x < hi; x += T(0.0007) + std::abs(x) * T(1e-4)) xs.push_back(x);
  for (T x = T(1e-30); x < T(1); x *= T(3)) {  // near 0 on both sides
    xs.push_back(x);
    xs.push_back(-x);
  }
  std::vector<T> ys = xs;
  f(ys.data(), int64_t(ys.size()));
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, ulps(ys[i], exact(xs[i])));
  CHECK(worst <= 2);

  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> special = {T(0),
                            -T(0),
                            -inf,
                            inf,
                            std::numeric_limits<T>::quiet_NaN(),
                            T(-1e30),
                            T(1e30),
                            std::numeric_limits<T>::lowest(),
                            std::numeric_limits<T>::max(),
                            T(1),
                            T(-1)};
  std::vector<T> out = special;
  f(out.data(), int64_t(out.size()));
  CHECK(out[0] == T(1));
  CHECK(out[1] == T(1));
  CHECK(out[2] == T(0));
  CHECK(out[3] == inf);
  CHECK(std::isnan(out[4]));
  CHECK(out[5] == T(0));
  CHECK(out[6] == inf);
  CHECK(out[7] == T(0));
  CHECK(out[8] == inf);
  CHECK(ulps(out[9], exact(T(1))) <= 1);
  CHECK(ulps(out[10], exact(T(-1))) <= 1);
}

}  // namespace

TEST_CASE("vector_exp is within 2 ulp of exp for float and double, special values exact") {
  SUBCASE("float, base ISA") {
    check_exp<float>(exp_plain<float>);
  }
  SUBCASE("float, the CPU's clone") {
    check_exp<float>(exp_cloned);
  }
  SUBCASE("double, base ISA") {
    check_exp<double>(exp_plain<double>);
  }
  SUBCASE("double, the CPU's clone") {
    check_exp<double>(exp_cloned);
  }
}

TEST_CASE("vector_exp overflows and underflows where exp does, through the subnormals") {
  // The last finite float and the first that overflows; results down to the
  // smallest subnormal and the first 0.
  std::vector<float> x = {88.72f, 88.73f, -87.0f, -95.0f, -103.0f, -103.9f, -104.0f, -110.0f};
  std::vector<float> y = x;
  exp_cloned(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    CHECK(std::isinf(y[i]) == std::isinf(exact(x[i])));
    CHECK(ulps(y[i], exact(x[i])) <= 2);
  }
  std::vector<double> xd = {709.78, 709.79, -708.0, -740.0, -745.1, -745.2};
  std::vector<double> yd = xd;
  exp_cloned(yd.data(), int64_t(yd.size()));
  for (size_t i = 0; i < xd.size(); ++i) {
    CAPTURE(xd[i]);
    CHECK(std::isinf(yd[i]) == std::isinf(std::exp(xd[i])));
    CHECK(ulps(yd[i], std::exp(xd[i])) <= 2);
  }
}
