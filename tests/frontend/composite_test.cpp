// Composite ops of the op table (ops.def's decomp: softsign, mish): values and
// gradients against their formulas, eager == traced bitwise (both run the one
// expansion), no composite node in a trace, errors naming the op.
#include <doctest/doctest.h>

#include "test_util.h"

#include "frontend/settings.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

double mish_ref(double x) { return x * std::tanh(std::log1p(std::exp(x))); }
double softsign_ref(double x) { return x / (1 + std::abs(x)); }

// The composite's value and its gradient (of sum(f(x) * w)), eagerly or traced.
std::pair<Tensor, Tensor> value_and_grad(Tensor (*f)(const Tensor&, Loc), const Tensor& x0,
                                         const Tensor& w, bool traced) {
  Tensor x = x0.detach().requires_grad_();
  if (!traced) {
    Tensor y = f(x, Loc::current());
    return {y.detach(), autograd::grad({(y * w).sum()}, {x})[0]};
  }
  auto step = jit([&](Tensor a) {
    Tensor y = f(a, Loc::current());
    return std::make_tuple(y, autograd::grad({(y * w).sum()}, {a})[0]);
  });
  auto [y, g] = step(x);
  return {y, g};
}

}  // namespace

TEST_CASE("softsign and mish match their formulas, values and gradients (f64)") {
  const std::vector<double> xs = {-30, -8, -2.5, -1, -0.3, 0.2, 1, 3, 9, 25, 100};
  Tensor x = from_vector(xs, {int64_t(xs.size())}, kFloat64);
  const std::vector<double> soft = F::softsign(x).to_vector<double>();
  const std::vector<double> mish = F::mish(x).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    CAPTURE(xs[i]);
    CHECK(soft[i] == doctest::Approx(softsign_ref(xs[i])).epsilon(1e-15));
    CHECK(mish[i] == doctest::Approx(mish_ref(xs[i])).epsilon(1e-14));
  }
  // Their gradients are autodiff's of the expansion: finite differences agree,
  // and mish's stays finite where exp(x) overflows.
  for (auto f : {+[](const Tensor& t) { return F::softsign(t).sum(); },
                 +[](const Tensor& t) { return F::mish(t).sum(); }}) {
    Tensor g = test::autograd_grad(f, x);
    Tensor fd = test::numeric_grad(f, x);
    CHECK(allclose(g, fd, 1e-6, 1e-7));
  }
  Tensor big = full({3}, 800.0, TensorOptions(kFloat64)).requires_grad_();
  F::mish(big).sum().backward();
  CHECK(big.grad().to_vector<double>() == std::vector<double>{1, 1, 1});
}

TEST_CASE("a composite traced equals it eager, bit for bit, values and gradients") {
  // Small tensors (reference kernels eagerly) and large ones (compiled eager
  // kernels of the same math as the fused kernel).
  for (int64_t n : {int64_t{37}, int64_t{1} << 16}) {
    for (DType dt : {kFloat32, kFloat64}) {
      CAPTURE(n);
      CAPTURE(dtype_name(dt));
      manual_seed(3);
      Tensor x = (randn({n}) * 4).to(dt), w = randn({n}).to(dt);
      for (auto f : {&F::softsign, &F::mish}) {
        // mish's transcendentals: libm's eagerly on a small tensor, the compiled
        // kernels' when traced; the expansion is the same, the last bits are not.
        const bool exact = f == &F::softsign || n >= settings().eager_kernel_min_elements;
        auto [ye, ge] = value_and_grad(f, x, w, false);
        auto [yt, gt] = value_and_grad(f, x, w, true);
        if (exact) {
          CHECK(yt.equal(ye));
          CHECK(gt.equal(ge));
        } else {
          CHECK(allclose(yt, ye, 1e-5, 1e-6));
          CHECK(allclose(gt, ge, 1e-5, 1e-6));
        }
      }
    }
  }
}

TEST_CASE("a traced composite is its ops: no composite node, one fused kernel") {
  auto f = jit([](Tensor x) { return F::mish(x) + F::softsign(x); });
  Tensor x = randn({64, 100});
  (void)f(x);
  const std::string ir = f.graph(x).str();
  CHECK(ir.find("mish") == std::string::npos);
  CHECK(ir.find("softsign") == std::string::npos);
  CHECK(ir.find("tanh") != std::string::npos);
  CHECK(ir.find("log1p") != std::string::npos);
}

TEST_CASE("a composite's errors name it and the user's line") {
  Tensor b = tensor({1.f, 0.f}).gt(0.5);
  const std::string at = "composite_test.cpp:" + std::to_string(__LINE__ + 1);
  KILN_CHECK_ERROR(F::softsign(b), "softsign", "abs: expected a numeric tensor, got bool", at.c_str());
}
