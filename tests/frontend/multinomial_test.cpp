// multinomial (frontend/sort_ops.cpp) and random_: the draws follow the
// weights, traced draws are eager draws, and bad weights are an error naming
// the line, eagerly and at every call of a compiled plan (check_distribution).
#include <algorithm>
#include <cmath>
#include <set>

#include "test_util.h"

namespace kiln {

TEST_CASE("multinomial with replacement draws in proportion to the weights") {
  manual_seed(3);
  const int64_t n = 200000;
  Tensor w = from_vector(std::vector<double>{1, 0, 2, 3, 0, 4}, {6}, kFloat32);
  Tensor d = w.multinomial(n, true);
  CHECK(d.dtype() == kInt64);
  CHECK(d.sizes() == Shape{n});
  const std::vector<int64_t> counts = d.bincount({}, 6).to_vector<int64_t>();
  const double want[6] = {0.1, 0, 0.2, 0.3, 0, 0.4};
  for (int i = 0; i < 6; ++i) {
    // Within 5 standard deviations of n p; a zero weight is never drawn.
    const double sd = std::sqrt(n * want[i] * (1 - want[i]));
    CHECK_MESSAGE(std::abs(double(counts[size_t(i)]) - n * want[i]) <= 5 * sd + 1e-9,
                  "category ", i, " drawn ", counts[size_t(i)], " times");
  }
  // Trailing zero weights are never drawn either (u times the total rounding up
  // to the total would land past the last non-zero weight).
  Tensor tail = from_vector(std::vector<double>{0, 1e-30, 0, 0}, {4}, kFloat64);
  CHECK(tail.multinomial(1000, true).eq(Scalar(1)).all().item<bool>());
}

TEST_CASE("multinomial without replacement draws each category at most once a row") {
  manual_seed(4);
  Tensor w = from_vector(std::vector<double>{0.5, 0, 3, 1, 0, 2, 1, 1, 1, 1}, {2, 5}, kFloat64);
  for (int trial = 0; trial < 20; ++trial) {
    Tensor d = w.multinomial(3, false);
    REQUIRE(d.sizes() == Shape{2, 3});
    const std::vector<int64_t> v = d.to_vector<int64_t>();
    // Row 0 has exactly three non-zero weights: those are its draws.
    std::set<int64_t> row0(v.begin(), v.begin() + 3), row1(v.begin() + 3, v.end());
    CHECK(row0 == std::set<int64_t>{0, 2, 3});
    CHECK(row1.size() == 3);
  }
  // The first draw of the race follows the weights: category 2 (weight 3 of
  // 4.5) comes first about 2/3 of the time.
  manual_seed(5);
  Tensor first = w.select(0, 0).unsqueeze(0).expand({20000, 5}).contiguous().multinomial(1, false);
  const double share = first.eq(Scalar(2)).to(kFloat64).mean().item<double>();
  CHECK(std::abs(share - 2.0 / 3.0) < 0.02);
}

TEST_CASE("traced multinomial draws what eager draws") {
  Tensor w = from_vector(std::vector<double>{0.2, 1, 0, 3, 0.5, 0.5, 2, 0, 1, 1, 1, 1}, {3, 4},
                         kFloat32);
  auto with = jit([](Tensor x) { return x.softmax(1).multinomial(6, true); });
  auto without = jit([](Tensor x) { return multinomial(x, 2, false); });
  manual_seed(11);
  Tensor e1 = w.softmax(1).multinomial(6, true), e2 = multinomial(w, 2, false);
  manual_seed(11);
  Tensor t1 = with(w), t2 = without(w);
  CHECK(equal(e1, t1));
  CHECK(equal(e2, t2));
  // A Generator of its own, too.
  Generator g;
  g.manual_seed(21);
  Tensor a = w.multinomial(5, true, g);
  g.manual_seed(21);
  CHECK(equal(a, w.multinomial(5, true, g)));
}

TEST_CASE("multinomial refuses weights that are no distribution, eagerly and traced") {
  const Tensor neg = from_vector(std::vector<double>{1, -0.5, 2}, {3}, kFloat32);
  const Tensor zero = zeros({2, 3});
  const Tensor nan = from_vector(std::vector<double>{1, NAN, 2}, {3}, kFloat32);
  const Tensor two = from_vector(std::vector<double>{1, 0, 2}, {3}, kFloat32);
  KILN_CHECK_ERROR(neg.multinomial(1), "multinomial", "expected finite weights >= 0", "-0.5",
                   "multinomial_test.cpp");
  KILN_CHECK_ERROR(zero.multinomial(1), "multinomial", "positive sum", "row 0");
  KILN_CHECK_ERROR(nan.multinomial(1, true), "expected finite weights >= 0");
  KILN_CHECK_ERROR(two.multinomial(3), "cannot draw 3 samples without replacement", "2 non-zero");
  KILN_CHECK_ERROR(two.multinomial(4), "cannot draw 4 samples without replacement from 3 categories");
  KILN_CHECK_ERROR(two.multinomial(0, true), "expected num_samples > 0, got 0");
  KILN_CHECK_ERROR(zeros({2, 2, 2}).multinomial(1), "expected weights [n] or [rows, n]");
  KILN_CHECK_ERROR(arange(3).multinomial(1), "expected float weights, got i64");
  // Compiled, the check runs at every call: good weights first, then bad ones.
  auto draw = jit([](Tensor x) { return x.multinomial(2); });
  CHECK(draw(from_vector(std::vector<double>{1, 1, 1}, {3}, kFloat32)).sizes() == Shape{2});
  KILN_CHECK_ERROR(draw(neg), "multinomial", "expected finite weights >= 0", "multinomial_test.cpp");
  KILN_CHECK_ERROR(draw(two.mul(Scalar(0))), "positive sum");
}

TEST_CASE("random_ fills with randint's draws in the tensor's dtype") {
  manual_seed(8);
  Tensor a = empty({5000}, kInt64).random_(-3, 4);
  CHECK(a.min().item<int64_t>() == -3);
  CHECK(a.max().item<int64_t>() == 3);
  Tensor f = zeros({5000}, kFloat32).random_(10);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.eq(f.floor()).all().item<bool>());
  CHECK(f.min().item<float>() == 0);
  CHECK(f.max().item<float>() == 9);
  manual_seed(8);
  CHECK(equal(empty({5000}, kInt64).random_(-3, 4), a));
  KILN_CHECK_ERROR(empty({2}, kInt64).random_(4, 4), "randint", "low < high");
}

}  // namespace kiln
