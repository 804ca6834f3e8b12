// Regression tests for the second reliability round (issue 32): silent wrong
// results found by probing as a new user and as an attacker would. Each case
// names the defect it pins; eager and traced are checked alike.
#include "test_util.h"

#include <cstdint>
#include <limits>

#include "ir/printer.h"

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

namespace {

// Runs `body` eagerly and traced on fresh copies of `make()` and checks that
// both raise the same "modified by an in-place operation" error (or neither),
// with equal gradients when neither does.
void same_in_place_verdict(const std::function<Tensor()>& make,
                           const std::function<Tensor(Tensor)>& body, bool expect_error) {
  auto run = [&](bool traced, std::string* error) {
    Tensor x = make();
    *error = test::error_of([&] {
      Tensor loss = traced ? jit(body)(x) : body(x);
      if (loss.requires_grad()) loss.backward();
    });
    return x;
  };
  std::string eager_error, traced_error;
  Tensor e = run(false, &eager_error), t = run(true, &traced_error);
  CHECK(eager_error.empty() != expect_error);
  CHECK(traced_error.empty() != expect_error);
  if (expect_error) {
    CHECK(eager_error.find("was modified by an in-place operation") != std::string::npos);
    CHECK(traced_error.find("was modified by an in-place operation") != std::string::npos);
  } else if (e.grad().defined() || t.grad().defined()) {
    test::check_close(t.grad(), e.grad(), 1e-12, 1e-14);
  }
}

Tensor leaf4() { return from_vector({1.25, -0.5, 0.75, 2.0}, {4}, TensorOptions(kFloat64).requires_grad(true)); }

}  // namespace

TEST_CASE("traced raises where eager raises for values an in-place write replaced (#32.5)") {
  // The fuzzer's cases (seed 99): exp's, pow's and max's saved values overwritten.
  same_in_place_verdict(leaf4, [](Tensor a) { return a.exp().mul_(-1.5).sum(); }, true);
  same_in_place_verdict(leaf4, [](Tensor a) { return (a.abs() + 0.5).pow(a).mul_(-1.5).sum(); }, true);
  same_in_place_verdict(leaf4, [](Tensor a) {
    Tensor m = a.amax({0});
    { NoGradGuard g; a.sub_(1); }
    return m.sum();
  }, true);
  // mul saved a non-leaf argument that a write then replaced.
  same_in_place_verdict(leaf4, [](Tensor a) {
    Tensor h = a * 1, w = a * 2;
    Tensor p = w * h;
    h.add_(1);
    return p.sum();
  }, true);
  // Inside the trace, with backward() there.
  same_in_place_verdict(leaf4, [](Tensor a) {
    Tensor l = a.exp().mul_(2).sum();
    l.backward();
    return l.detach();
  }, true);
  // x.mul_(y) keeps x's old value for y's gradient (PyTorch's original self) ...
  same_in_place_verdict(leaf4, [](Tensor a) { Tensor x = a * 1; x.mul_(a); return x.sum(); }, false);
  // ... but nothing else of it: x.mul_(x) saved x twice, as PyTorch raises.
  same_in_place_verdict(leaf4, [](Tensor a) { Tensor x = a * 1; x.mul_(x); return x.sum(); }, true);
  // A write whose old value no gradient reads is fine (add's gradient reads nothing).
  same_in_place_verdict(leaf4, [](Tensor a) { Tensor x = a + 1; x.add_(3); return (x * 2).sum(); }, false);
  // Equal ops recorded twice stay two tape nodes: writing one's result leaves the other intact.
  same_in_place_verdict(leaf4, [](Tensor a) {
    Tensor y = a.exp(), z = a.exp();
    y.mul_(2);
    return z.sum();
  }, false);
}

TEST_CASE("a write after a traced call into a value its backward reads raises, as eagerly (#32.5)") {
  auto f = [](Tensor x, Tensor w) { return (x * w).exp(); };
  auto traced = jit(f);
  for (int mode = 0; mode < 2; ++mode) {
    CAPTURE(mode);
    auto call = [&](Tensor x, Tensor w) { return mode ? traced(x, w) : f(x, w); };
    {  // the output exp saved, written by the caller
      Tensor x = tensor({1., 2.}, kFloat64), w = leaf4().narrow(0, 0, 2).detach().requires_grad_();
      Tensor y = call(x, w);
      { NoGradGuard g; y.mul_(2); }
      KILN_CHECK_ERROR(y.sum().backward(), "'exp' was modified by an in-place operation");
    }
    {  // an argument mul saved for w's gradient
      Tensor x = tensor({1., 2.}, kFloat64), w = tensor({0.5, 0.25}, kFloat64).requires_grad_();
      Tensor y = call(x, w);
      x.add_(1);
      KILN_CHECK_ERROR(y.sum().backward(), "'mul' was modified by an in-place operation");
    }
    {  // no write: the backward runs, with the same gradient both ways
      Tensor x = tensor({1., 2.}, kFloat64), w = tensor({0.5, 0.25}, kFloat64).requires_grad_();
      call(x, w).sum().backward();
      test::check_close(w.grad(), tensor({std::exp(0.5), 2 * std::exp(0.5)}, kFloat64), 1e-12, 0);
    }
  }
}

TEST_CASE("a view made before its base's in-place write follows the write eagerly (#32.5's class)") {
  // v1 * v2 recorded v2's stale history: only the first operand's view was brought up to date.
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto body = [](Tensor a) {
      Tensor v1 = a * 1, v2 = v1.select(0, 2);
      v1.mul_(2);
      return (v1 * v2).sum();
    };
    Tensor a = tensor({-0.2, -0.5, 0.02, -1.4}, kFloat64).requires_grad_();
    (traced ? jit(body)(a) : body(a)).backward();
    // loss = 4 a_2 sum(a): d/da_i = 4 a_2, d/da_2 = 4 sum(a) + 4 a_2.
    test::check_close(a.grad(), tensor({0.08, 0.08, -8.24, 0.08}, kFloat64), 1e-12, 1e-14);
  }
}

TEST_CASE("index_select, gather and embedding read only the rows they pick (#36)") {
  // A one-hot product gave [nan, nan] here: 0 * inf.
  const Tensor x = tensor({{1.f, 2.f}, {INFINITY, 3.f}});
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto pick = [](Tensor t) { return t.index_select(0, tensor({int64_t(0)})); };
    auto rows = [](Tensor t) { return nn::functional::embedding(tensor({int64_t(0), int64_t(0)}), t); };
    auto cols = [](Tensor t) { return t.gather(1, tensor({int64_t(1), int64_t(1)}).reshape({2, 1})); };
    Tensor a = traced ? jit(pick)(x) : pick(x), b = traced ? jit(rows)(x) : rows(x), c = traced ? jit(cols)(x) : cols(x);
    CHECK(a.to_vector<float>() == std::vector<float>{1, 2});
    CHECK(b.to_vector<float>() == std::vector<float>{1, 2, 1, 2});
    CHECK(c.to_vector<float>() == std::vector<float>{2, 3});
  }
  // A traced embedding lookup and its gradient: one gather kernel, one scatter_add kernel.
  Tensor w = randn({50, 8}).requires_grad_();
  const Tensor ids = tensor({int64_t(3), int64_t(49), int64_t(3), int64_t(0)});
  auto f = jit([&](Tensor i) {
    Tensor loss = nn::functional::embedding(i, w).pow(2).sum();
    loss.backward();
    return loss;
  });
  Tensor l = f(ids);
  Tensor we = w.detach().clone().requires_grad_();
  Tensor le = nn::functional::embedding(ids, we).pow(2).sum();
  le.backward();
  CHECK(l.item<float>() == doctest::Approx(le.item<float>()).epsilon(1e-6));
  test::check_close(w.grad(), we.grad(), 0, 0);  // the same additions in the same order
  const std::string ir = print_graph(f.graph(ids));
  CHECK(ir.find("gather") != std::string::npos);
  CHECK(ir.find("scatter_add") != std::string::npos);
  CHECK(ir.find("matmul") == std::string::npos);
  KILN_CHECK_ERROR(f(tensor({int64_t(50)})), "embedding", "index 50 is out of range for size 50");
}
