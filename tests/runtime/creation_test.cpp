// Creation ops: constant, literal, arange; and philox, the counter-based draw
// every random op is built from.
#include <doctest/doctest.h>

#include <cmath>

#include "ir/error.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("constant fills every element in the result dtype") {
  CHECK(values(create(OpKind::constant, DType::f32, {2, 2}, Attrs{{AttrKey::value, 1.5}})) ==
        std::vector<double>{1.5, 1.5, 1.5, 1.5});
  CHECK(values(create(OpKind::constant, DType::i32, {3}, Attrs{{AttrKey::value, -2.7}})) ==
        std::vector<double>{-2, -2, -2});
  CHECK(values(create(OpKind::constant, DType::b8, {2}, Attrs{{AttrKey::value, 0.5}})) ==
        std::vector<double>{1, 1});
  CHECK(values(create(OpKind::constant, DType::f64, {}, Attrs{{AttrKey::value, int64_t{3}}})) ==
        std::vector<double>{3});
  // Integer attributes stay exact beyond 2^53.
  const int64_t big = (int64_t(1) << 60) + 1;
  Arr c = create(OpKind::constant, DType::i64, {1}, Attrs{{AttrKey::value, big}});
  CHECK(c.v.ptr<int64_t>()[0] == big);
}

TEST_CASE("literal: row-major data converted to the result dtype") {
  Arr l = create(OpKind::literal, DType::f64, {2, 2},
                 Attrs{{AttrKey::data, std::vector<double>{1.5, -2, 0.25, 8}}});
  CHECK(values(l) == std::vector<double>{1.5, -2, 0.25, 8});
  const int64_t big = (int64_t(1) << 62) + 3;
  Arr i = create(OpKind::literal, DType::i64, {2},
                 Attrs{{AttrKey::data, std::vector<int64_t>{big, -1}}});
  CHECK(i.v.ptr<int64_t>()[0] == big);
  CHECK(i.v.ptr<int64_t>()[1] == -1);
  CHECK(values(create(OpKind::literal, DType::f32, {3},
                      Attrs{{AttrKey::data, std::vector<double>{4}}})) ==
        std::vector<double>{4, 4, 4});
  CHECK_THROWS_AS(
      create(OpKind::literal, DType::f32, {3}, Attrs{{AttrKey::data, std::vector<double>{1, 2}}}),
      Error);
}

TEST_CASE("arange: start + i * step") {
  CHECK(values(create(OpKind::arange, DType::f32, {4},
                      Attrs{{AttrKey::start, 0.5}, {AttrKey::step, int64_t{2}}})) ==
        std::vector<double>{0.5, 2.5, 4.5, 6.5});
  CHECK(values(create(OpKind::arange, DType::i64, {3},
                      Attrs{{AttrKey::start, int64_t{10}}, {AttrKey::step, int64_t{-3}}})) ==
        std::vector<double>{10, 7, 4});
  CHECK(values(create(OpKind::arange, DType::f64, {3},
                      Attrs{{AttrKey::start, 1.0}, {AttrKey::step, 0.1}})) ==
        std::vector<double>{1.0, 1.0 + 0.1, 1.0 + 2 * 0.1});
}

// philox(key, counter), the op every random draw is built from (frontend/random.cpp).
Arr philox(int64_t key, int64_t n, DType counters = DType::i64) {
  return run(OpKind::philox, {arr(DType::i64, {}, {double(key)}), iota(counters, {n})});
}

TEST_CASE("philox: counter-based uniforms in [0, 1)") {
  const int64_t n = 200000;
  Arr a = philox(42, n), b = philox(42, n), c = philox(43, n);
  REQUIRE(a.v.dtype == DType::f32);
  const float* pa = a.v.ptr<float>();
  double sum = 0, sq = 0;
  int64_t same_as_b = 0, same_as_c = 0;
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, pa[i]);
    hi = std::max(hi, pa[i]);
    sum += pa[i];
    sq += double(pa[i]) * pa[i];
    same_as_b += pa[i] == b.v.ptr<float>()[i];
    same_as_c += pa[i] == c.v.ptr<float>()[i];
  }
  CHECK(lo >= 0.0f);
  CHECK(hi < 1.0f);
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(sq / n - (sum / n) * (sum / n) == doctest::Approx(1.0 / 12).epsilon(0.02));
  CHECK(same_as_b == n);
  CHECK(same_as_c < n / 1000);
  // Element i is philox_uniform(key, counter i), whatever the counters' dtype.
  CHECK(pa[12345] == philox_uniform(42, 12345));
  Arr d = philox(42, 3, DType::f64);
  CHECK(values(d) == std::vector<double>{pa[0], pa[1], pa[2]});
}

TEST_CASE("philox: Box-Muller on the pairs (2i, 2i + 1) gives standard normals") {
  const int64_t n = 200000;
  Arr u = philox(7, 2 * n);
  const float* p = u.v.ptr<float>();
  double sum = 0, sq = 0;
  int64_t within_1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    // As frontend/random.cpp's randn: 1 - u1 is in (0, 1], so the log is finite.
    const double z = std::sqrt(-2 * std::log(1.0 - p[2 * i])) * std::cos(2 * M_PI * p[2 * i + 1]);
    CHECK_FALSE(!std::isfinite(z));
    sum += z;
    sq += z * z;
    within_1 += std::fabs(z) < 1;
  }
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(sq / n == doctest::Approx(1.0).epsilon(0.02));
  CHECK(double(within_1) / n == doctest::Approx(0.6827).epsilon(0.01));
}
