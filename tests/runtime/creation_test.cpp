// Creation ops: constant, literal, arange, and the counter-based rand/randn.
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

TEST_CASE("rand: counter-based uniforms in [0, 1)") {
  const int64_t n = 200000;
  Arr a = create(OpKind::rand, DType::f32, {n}, Attrs{{AttrKey::seed, int64_t{42}}});
  Arr b = create(OpKind::rand, DType::f32, {n}, Attrs{{AttrKey::seed, int64_t{42}}});
  Arr c = create(OpKind::rand, DType::f32, {n}, Attrs{{AttrKey::seed, int64_t{43}}});
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
  // Element i is uniform_at(seed, i), whatever the dtype.
  CHECK(pa[12345] == uniform_at(42, 12345));
  Arr d = create(OpKind::rand, DType::f64, {3}, Attrs{{AttrKey::seed, int64_t{42}}});
  CHECK(values(d) == std::vector<double>{pa[0], pa[1], pa[2]});
}

TEST_CASE("randn: Box-Muller normals") {
  const int64_t n = 200000;
  Arr a = create(OpKind::randn, DType::f32, {n}, Attrs{{AttrKey::seed, int64_t{7}}});
  const float* p = a.v.ptr<float>();
  double sum = 0, sq = 0;
  int64_t within_1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    CHECK_FALSE(!std::isfinite(p[i]));
    sum += p[i];
    sq += double(p[i]) * p[i];
    within_1 += std::fabs(p[i]) < 1;
  }
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(sq / n == doctest::Approx(1.0).epsilon(0.02));
  CHECK(double(within_1) / n == doctest::Approx(0.6827).epsilon(0.01));
  CHECK(p[999] == normal_at(7, 999));
  float u1 = uniform_at(7, 2 * 999), u2 = uniform_at(7, 2 * 999 + 1);
  CHECK(
      normal_at(7, 999) ==
      doctest::Approx(std::sqrt(-2 * std::log(1.0 - u1)) * std::cos(2 * M_PI * u2)).epsilon(1e-5));
}
