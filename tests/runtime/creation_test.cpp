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

// philox with attributes: {dtype=f64}, {dtype=i64}, {dtype=i64, low, high}.
Arr philox_draw(int64_t key, int64_t n, const Attrs& attrs, int64_t first = 0) {
  return run(OpKind::philox, {arr(DType::i64, {}, {double(key)}), iota(DType::i64, {n}, double(first))},
             attrs);
}

Attrs int_draw(int64_t low, int64_t high) {
  return Attrs{{AttrKey::dtype, DType::i64}, {AttrKey::low, low}, {AttrKey::high, high}};
}

TEST_CASE("philox is Philox-4x32-10: the published known answer at key 0, counter 0") {
  // Random123's kat_vectors: philox4x32 10 rounds, counter {0, 0, 0, 0}, key {0, 0} ->
  // {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}; philox_bits is words 0:1.
  CHECK(philox_bits(0, 0) == 0x6627e8d5e169c58dull);
  // The f32 draw is the top 24 bits, as before words 0 and 1 were joined.
  CHECK(philox_uniform(0, 0) == float(0x6627e8d5u >> 8) * 0x1p-24f);
  CHECK(philox_uniform_f64(0, 0) == double(0x6627e8d5e169c58dull >> 11) * 0x1p-53);
  // A rejected draw is taken again from the block at counter word 2 = attempt.
  CHECK(philox_bits(0, 0, 1) != philox_bits(0, 0));
  CHECK(philox_bits(0, 0, 1) != philox_bits(0, 1));
}

TEST_CASE("philox f64: 53 random bits, whose top 24 are the f32 draw") {
  const int64_t n = 200000;
  Arr d = philox_draw(9, n, Attrs{{AttrKey::dtype, DType::f64}});
  Arr f = philox_draw(9, n, {});
  REQUIRE(d.v.dtype == DType::f64);
  const double* pd = d.v.ptr<double>();
  const float* pf = f.v.ptr<float>();
  double sum = 0, sq = 0, lo = 1, hi = 0;
  int64_t not_f32 = 0, low_bit = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, pd[i]);
    hi = std::max(hi, pd[i]);
    sum += pd[i];
    sq += pd[i] * pd[i];
    not_f32 += double(float(pd[i])) != pd[i];
    low_bit += std::ldexp(pd[i], 53) - 2 * std::floor(std::ldexp(pd[i], 52)) == 1;  // bit 53
    CHECK_FALSE(std::floor(std::ldexp(pd[i], 24)) != std::ldexp(double(pf[i]), 24));
    CHECK_FALSE(pd[i] != philox_uniform_f64(9, i));
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(sq / n - (sum / n) * (sum / n) == doctest::Approx(1.0 / 12).epsilon(0.02));
  // With 24 bits every draw would be an f32 value and the lowest of 53 bits 0.
  CHECK(not_f32 > n - n / 1000);
  CHECK(double(low_bit) / n == doctest::Approx(0.5).epsilon(0.02));
}

TEST_CASE("philox i64: all 64 bits, and integers in [low, high) without bias") {
  const int64_t n = 100000;
  Arr raw = philox_draw(3, n, Attrs{{AttrKey::dtype, DType::i64}});
  const int64_t* pr = raw.v.ptr<int64_t>();
  int64_t negative = 0, top_half = 0;
  for (int64_t i = 0; i < n; ++i) {
    CHECK_FALSE(uint64_t(pr[i]) != philox_bits(3, i));
    negative += pr[i] < 0;
    top_half += (uint64_t(pr[i]) >> 31 & 1) == 1;
  }
  CHECK(double(negative) / n == doctest::Approx(0.5).epsilon(0.02));
  CHECK(double(top_half) / n == doctest::Approx(0.5).epsilon(0.02));

  // Small ranges: every value, each about equally often.
  Arr small = philox_draw(3, n, int_draw(-3, 4));
  std::vector<int64_t> count(7);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = small.v.ptr<int64_t>()[i];
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++count[size_t(v + 3)];
  }
  for (int64_t c : count) CHECK(double(c) / n == doctest::Approx(1.0 / 7).epsilon(0.05));

  // A range of 3 * 2^62: modulo (and multiply-shift without rejection) put half of
  // the draws into the lowest third; an unbiased draw a third. A quarter of first
  // attempts are rejected here.
  const int64_t low = INT64_MIN, high = int64_t(1) << 62;
  Arr wide = philox_draw(5, n, int_draw(low, high));
  int64_t lowest_third = 0, beyond_2_62 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = wide.v.ptr<int64_t>()[i];
    REQUIRE(v < high);
    lowest_third += v < low + (int64_t(1) << 62);
    beyond_2_62 += v >= 0;
  }
  CHECK(double(lowest_third) / n == doctest::Approx(1.0 / 3).epsilon(0.03));
  CHECK(double(beyond_2_62) / n == doctest::Approx(1.0 / 3).epsilon(0.03));

  // The whole int64 range but INT64_MAX, and a range at the top.
  Arr all = philox_draw(5, 1000, int_draw(INT64_MIN, INT64_MAX));
  Arr top = philox_draw(5, 1000, int_draw(INT64_MAX - 2, INT64_MAX));
  for (int64_t i = 0; i < 1000; ++i) {
    CHECK_FALSE(all.v.ptr<int64_t>()[i] == INT64_MAX);
    CHECK_FALSE(top.v.ptr<int64_t>()[i] < INT64_MAX - 2);
    CHECK_FALSE(top.v.ptr<int64_t>()[i] == INT64_MAX);
  }
  // Element i is low + philox_below(key, counter i, high - low).
  CHECK(wide.v.ptr<int64_t>()[777] == int64_t(uint64_t(low) + philox_below(5, 777, 3ull << 62)));
}
