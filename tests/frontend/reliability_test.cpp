// Regression tests for the second reliability round (issue 32): silent wrong
// results found by probing as a new user and as an attacker would. Each case
// names the defect it pins; eager and traced are checked alike.
#include "test_util.h"

#include <cstdint>
#include <limits>

using namespace kiln;

namespace {

// A weight made as a view of a buffer that does not require grad.
Tensor view_weight() {
  Tensor buffer = arange(6, TensorOptions(kFloat64)).mul(0.1);
  Tensor w = buffer.reshape({3, 2});
  w.requires_grad_(true);
  return w;
}

}  // namespace

TEST_CASE("a leaf made as a view keeps requires_grad through in-place updates (#32.1)") {
  const Tensor x = from_vector({1, -2, 0.5, 3, 1, -1}, {2, 3}, kFloat64);
  // The same training step on a view weight and on a plain twin.
  auto step = [&](Tensor w) {
    Tensor loss = x.matmul(w).pow(2).sum();
    loss.backward();
    {
      NoGradGuard no_grad;
      w -= 0.01 * w.grad();
      w.grad().zero_();
    }
    return loss;
  };
  SUBCASE("eager, a manual update") {
    Tensor w = view_weight(), twin = view_weight().detach().clone().requires_grad_();
    for (int i = 0; i < 3; ++i) {
      CHECK(step(w).item<double>() == step(twin).item<double>());
      CHECK(w.requires_grad());
      CHECK(w.is_leaf());
    }
    test::check_close(w, twin, 0, 0);
  }
  SUBCASE("eager and traced, an optimizer") {
    for (bool traced : {false, true}) {
      CAPTURE(traced);
      Tensor w = view_weight(), twin = view_weight().detach().clone().requires_grad_();
      optim::SGD opt({w}, 0.01), opt_twin({twin}, 0.01);
      auto body = [&](optim::SGD& o, Tensor p) {
        o.zero_grad();
        Tensor loss = x.matmul(p).pow(2).sum();
        loss.backward();
        o.step();
        return loss;
      };
      auto f = jit([&](Tensor) { return body(opt, w); });
      for (int i = 0; i < 3; ++i) {
        Tensor l = traced ? f(x) : body(opt, w);
        CHECK(l.item<double>() == doctest::Approx(body(opt_twin, twin).item<double>()).epsilon(1e-12));
        CHECK(w.requires_grad());
        CHECK(w.is_leaf());
      }
      test::check_close(w, twin, 1e-12, 1e-14);
      test::check_close(w.grad(), twin.grad(), 1e-12, 1e-14);
    }
  }
  SUBCASE("the view still shares its buffer's data") {
    Tensor buffer = zeros({6}, kFloat64);
    Tensor w = buffer.view({2, 3});
    w.requires_grad_(true);
    {
      NoGradGuard no_grad;
      w += 1;
    }
    CHECK(buffer.sum().item<double>() == 6);
    CHECK(w.requires_grad());
    (w * w).sum().backward();
    test::check_close(w.grad(), full({2, 3}, 2.0, kFloat64), 0, 0);
  }
}

TEST_CASE("an in-place write to a non-leaf argument is allowed traced as eagerly (#32.3)") {
  auto body = [](Tensor h) {
    h.add_(1);
    return (h * h).sum();
  };
  auto traced = jit(body);
  for (int mode = 0; mode < 2; ++mode) {
    CAPTURE(mode);
    Tensor w = tensor({1., 2., -3.}, kFloat64).requires_grad_();
    Tensor h = w * 2;
    Tensor loss = mode == 0 ? body(h) : traced(h);
    CHECK(loss.item<double>() == doctest::Approx(9 + 25 + 25));
    test::check_close(h, tensor({3., 5., -5.}, kFloat64), 0, 0);
    CHECK(h.requires_grad());
    loss.backward();
    // d/dw sum((2w + 1)^2) = 4 (2w + 1)
    test::check_close(w.grad(), tensor({12., 20., -20.}, kFloat64), 1e-12, 0);
  }
  SUBCASE("with backward() inside the trace") {
    auto inside = jit([](Tensor h) {
      h.mul_(3);
      Tensor loss = h.sum();
      loss.backward();
      return loss;
    });
    Tensor w = tensor({1., 2.}, kFloat64).requires_grad_();
    Tensor e = tensor({1., 2.}, kFloat64).requires_grad_();
    Tensor he = e * 2;
    he.mul_(3);
    he.sum().backward();
    inside(w * 2);
    test::check_close(w.grad(), e.grad(), 0, 0);
  }
}

TEST_CASE("view arithmetic that would wrap is an error naming the call (#32.4)") {
  const int64_t big = std::numeric_limits<int64_t>::max();
  KILN_CHECK_ERROR(arange(5).narrow(0, big, 2), "narrow", "reliability_test.cpp");
  KILN_CHECK_ERROR(arange(5).narrow(0, 3, big), "narrow", "reliability_test.cpp");
  KILN_CHECK_ERROR(arange(5).narrow(0, -big, 2), "narrow", "reliability_test.cpp");
  KILN_CHECK_ERROR(arange(5).narrow(3, 0, 1), "narrow", "dim 3", "reliability_test.cpp");
  CHECK(arange(5).slice(0, 0, 5, big).numel() == 1);
  CHECK(arange(5).slice(0, -big, big).numel() == 5);
  KILN_CHECK_ERROR(arange(5).select(0, std::numeric_limits<int64_t>::min()), "select",
                   "reliability_test.cpp");
  KILN_CHECK_ERROR(arange(6).reshape({big, 2}), "reshape", "reliability_test.cpp");
  KILN_CHECK_ERROR(arange(6).view({-1, 0}), "reshape", "reliability_test.cpp");
  KILN_CHECK_ERROR(ones({2, 1}).expand({2, big}).sum(), "reliability_test.cpp");
  KILN_CHECK_ERROR(cat({ones({1}).expand({big / 4}), ones({1}).expand({big / 4}), ones({1}).expand({big / 4}), ones({1}).expand({big / 4 + 9})}), "cat", "more than 2^63-1",
                   "reliability_test.cpp");
  KILN_CHECK_ERROR(ones({3}).unsqueeze(big), "unsqueeze", "reliability_test.cpp");
  KILN_CHECK_ERROR(ones({3}).split(0), "split", "reliability_test.cpp");
  KILN_CHECK_ERROR(ones({3}).chunk(0), "chunk", "reliability_test.cpp");
}

TEST_CASE("sizes near 2^63 and more memory than the machine has are errors, never a crash (#32.6)") {
  const Tensor img = randn({1, 1, 4, 4});
  KILN_CHECK_ERROR(adaptive_avg_pool2d(img, {int64_t(1) << 62, 2}), "adaptive_avg_pool2d",
                   "reliability_test.cpp");
  KILN_CHECK_ERROR(adaptive_avg_pool2d(img, int64_t(1) << 40), "adaptive_avg_pool2d",
                   "reliability_test.cpp");
  KILN_CHECK_ERROR(adaptive_avg_pool2d(img, {int64_t(1) << 40, 1}), "out of CPU memory", "bytes",
                   "reliability_test.cpp");
  KILN_CHECK_ERROR(eye(int64_t(1) << 20), "out of CPU memory", "bytes", "reliability_test.cpp");
  KILN_CHECK_ERROR(eye(int64_t(1) << 40), "eye", "too large", "reliability_test.cpp");
  KILN_CHECK_ERROR(conv2d(img, ones({1, 1, 2, 2}), Tensor(), 1, 0, int64_t(1) << 62), "conv2d",
                   "reliability_test.cpp");
  KILN_CHECK_ERROR(max_pool2d(img, 2, 1, 1, int64_t(1) << 62), "max_pool2d", "reliability_test.cpp");
  KILN_CHECK_ERROR(max_pool2d(img, int64_t(1) << 62), "max_pool2d", "reliability_test.cpp");
  CHECK(avg_pool2d(img, 2, int64_t(1) << 62).sizes() == Shape{1, 1, 1, 1});  // one window
  CHECK(max_pool2d(img, 2, int64_t(1) << 62, 0, 1, true).sizes() == Shape{1, 1, 1, 1});
  // A compiled plan whose temporary does not fit: the same error, at the call.
  auto f = jit([](Tensor x) { return x.expand({int64_t(1) << 21, int64_t(1) << 21}).matmul(x.expand({int64_t(1) << 21, 1})).sum(); });
  KILN_CHECK_ERROR(f(ones({1})), "out of CPU memory", "bytes");
  CHECK(equal(eye(3), tensor({{1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}})));
  CHECK(eye(2, kFloat64).requires_grad() == false);
  test::check_close(adaptive_avg_pool2d(arange(16, kFloat32).reshape({1, 1, 4, 4}), {2, 3}),
                    tensor({{2.5f, 3.5f, 4.5f}, {10.5f, 11.5f, 12.5f}}).reshape({1, 1, 2, 3}));
}

TEST_CASE("integers compute in their own type; integer division by zero is an error (#32.2)") {
  const int64_t big = (int64_t(1) << 53) + 1;  // not a double
  CHECK(tensor({big}).item<int64_t>() == big);
  CHECK(tensor({{big, int64_t(1)}}).flatten().to_vector<int64_t>() == std::vector<int64_t>{big, 1});
  CHECK(full({2}, big, kInt64).to_vector<int64_t>() == std::vector<int64_t>{big, big});
  CHECK((tensor({int64_t(0)}) + big).item<int64_t>() == big);
  CHECK(arange(big, big + 3).to_vector<int64_t>() == std::vector<int64_t>{big, big + 1, big + 2});
  CHECK(zeros({1}, kInt64).fill_(big).item<int64_t>() == big);
  auto traced_add = jit([&](Tensor x) { return x + big; });
  CHECK(traced_add(tensor({int64_t(0)})).item<int64_t>() == big);

  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto run = [&](auto f, Tensor a, Tensor b) { return traced ? jit(f)(a, b) : f(a, b); };
    auto fmod = [](Tensor a, Tensor b) { return a.fmod(b); };
    auto rem = [](Tensor a, Tensor b) { return a.remainder(b); };
    using I = int64_t;
    const Tensor a = tensor({big, I(-7), I(7), I(-7), I(7), std::numeric_limits<I>::min()});
    const Tensor b = tensor({I(2), I(3), I(-3), I(-3), I(3), I(-1)});
    CHECK(run(fmod, a, b).to_vector<int64_t>() == std::vector<int64_t>{1, -1, 1, -1, 1, 0});
    CHECK(run(rem, a, b).to_vector<int64_t>() == std::vector<int64_t>{1, 2, -2, -1, 1, 0});
    KILN_CHECK_ERROR(run(fmod, tensor({5, 7}), tensor({1, 0})), "fmod: integer division by zero",
                     "reliability_test.cpp");
    KILN_CHECK_ERROR(run(rem, tensor({5, 7}), tensor({0, 1})), "remainder: integer division by zero",
                     "reliability_test.cpp");
    // Floats as torch.fmod and torch.remainder (C's fmod, Python's %).
    const Tensor x = tensor({5.5, -5.5, 5.5, -5.5, 1.0}, kFloat64), y = tensor({2.0, 2.0, -2.0, -2.0, 0.0}, kFloat64);
    const std::vector<double> f = run(fmod, x, y).to_vector<double>(), r = run(rem, x, y).to_vector<double>();
    CHECK(std::vector<double>(f.begin(), f.end() - 1) == std::vector<double>{1.5, -1.5, 1.5, -1.5});
    CHECK(std::vector<double>(r.begin(), r.end() - 1) == std::vector<double>{1.5, 0.5, -0.5, -1.5});
    CHECK(std::isnan(f.back()));
    CHECK(std::isnan(r.back()));
  }
  KILN_CHECK_ERROR(tensor({5, 7}).fmod(0), "fmod: integer division by zero", "reliability_test.cpp");
  KILN_CHECK_ERROR(tensor({5, 7}).remainder(0), "remainder: integer division by zero", "reliability_test.cpp");
  // Gradients as PyTorch's: d/da = 1, d/db = -trunc(a / b) (fmod) or -floor(a / b).
  Tensor a = tensor({5.5, -5.5}, kFloat64).requires_grad_(), b = tensor({2.0, 2.0}, kFloat64).requires_grad_();
  (a.fmod(b).sum() + a.remainder(b).sum()).backward();
  test::check_close(a.grad(), tensor({2.0, 2.0}, kFloat64), 0, 0);
  test::check_close(b.grad(), tensor({-2.0 - 2.0, 2.0 + 3.0}, kFloat64), 0, 0);
}
