// Eager autograd: gradients against finite differences (float64), accumulation,
// retain_graph, create_graph (second derivatives), NoGradGuard, detach, custom
// functions, and autograd::grad.
#include "test_util.h"

using namespace kiln;
using kiln::test::autograd_grad;
using kiln::test::check_close;
using kiln::test::numeric_grad;

namespace {

Tensor input(Shape s, uint64_t seed) {
  manual_seed(seed);
  return randn(std::move(s), kFloat64);
}

void check_grad(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0,
                double rtol = 1e-6) {
  check_close(autograd_grad(f, x0), numeric_grad(f, x0), rtol, 1e-7);
}

}  // namespace

TEST_CASE("gradients of composite ops match finite differences") {
  Tensor x = input({3, 4}, 1);
  Tensor w = input({4, 5}, 2);
  Tensor b = input({5}, 3);
  SUBCASE("mean") {
    check_grad([](const Tensor& t) { return (t * t).mean(); }, x);
  }
  SUBCASE("var and std") {
    check_grad([](const Tensor& t) { return t.var({1}).sum(); }, x);
    check_grad([](const Tensor& t) { return t.std({0}, false).sum(); }, x);
  }
  SUBCASE("softmax and log_softmax") {
    Tensor wt = input({3, 4}, 9);
    check_grad([&](const Tensor& t) { return (t.softmax(1) * wt).sum(); }, x);
    check_grad([&](const Tensor& t) { return (t.log_softmax(-1) * wt).sum(); }, x);
    check_grad([&](const Tensor& t) { return (t.softmax(0) * wt).sum(); }, x);
  }
  SUBCASE("linear layer") {
    check_grad([&](const Tensor& t) { return t.matmul(w).add(b).relu().pow(2).sum(); }, x);
    check_grad([&](const Tensor& t) { return x.matmul(t).add(b).tanh().sum(); }, w);
  }
  SUBCASE("losses") {
    Tensor target = input({3, 4}, 4);
    check_grad([&](const Tensor& t) { return nn::functional::mse_loss(t, target); }, x);
    Tensor classes = tensor({0, 3, 1});
    check_grad([&](const Tensor& t) { return nn::functional::cross_entropy(t, classes); }, x);
  }
  SUBCASE("views and movement") {
    check_grad([](const Tensor& t) { return (t.t() * t.t().exp()).sum(); }, x);
    check_grad([](const Tensor& t) { return t.slice(1, 1, 4, 2).pow(3).sum(); }, x);
    check_grad([](const Tensor& t) { return t.select(0, 1).sigmoid().sum(); }, x);
    check_grad([](const Tensor& t) { return t.reshape({2, 6}).sum(0).pow(2).sum(); }, x);
    check_grad([](const Tensor& t) { return t.unsqueeze(0).expand({2, 3, 4}).sin().sum(); }, x);
  }
  SUBCASE("max reductions and clamp") {
    check_grad([](const Tensor& t) { return t.amax({1}).sum() + t.min(); }, x);
    check_grad([](const Tensor& t) { return t.clamp(-0.5, 0.5).pow(2).sum(); }, x);
  }
  SUBCASE("broadcasting") {
    Tensor col = input({3, 1}, 5);
    check_grad([&](const Tensor& t) { return (t * col - col / (t * t + 1)).sum(); }, x);
    check_grad([&](const Tensor& c) { return (x * c).pow(2).sum(); }, col);
  }
}

TEST_CASE("backward on the course's functions") {
  Tensor x = tensor({-1.f}).requires_grad_();
  (3 - x + (x / 2).pow(2)).backward();
  CHECK(x.grad().item<float>() == doctest::Approx(-1.5));
  x.grad().zero_();
  (3 - (x / 2).pow(2)).backward();
  CHECK(x.grad().item<float>() == doctest::Approx(0.5));
  // Without zeroing, gradients accumulate.
  (3 - x + (x / 2).pow(2)).backward();
  CHECK(x.grad().item<float>() == doctest::Approx(-1.0));
}

TEST_CASE("a value used twice gets both gradients") {
  Tensor x = tensor({3.0}, kFloat64).requires_grad_();
  Tensor y = x * x + x;
  y.backward();
  CHECK(x.grad().item<double>() == 7);
}

TEST_CASE("non-scalar backward needs a gradient") {
  Tensor x = tensor({1.f, 2.f}).requires_grad_();
  Tensor y = x * 2;
  KILN_CHECK_ERROR(y.backward(), "scalar", "shape [2]", "autograd_test.cpp");
  y.backward(tensor({1.f, 10.f}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 20});
}

TEST_CASE("retain_graph and the freed-graph error") {
  Tensor x = tensor({2.f}).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(x.grad().item<float>() == 8);
  KILN_CHECK_ERROR(y.backward(), "second time", "retain_graph", "autograd_test.cpp");
}

TEST_CASE("autograd::grad frees only what it ran; a later backward reads what each op saved") {
  // As PyTorch: the gradient with respect to a non-leaf x stops at x, so x's
  // own producer (exp, which saved its result) is neither run nor freed, and a
  // second graph reading x differentiates after the first one was freed.
  manual_seed(5);
  Tensor leaf = randn({5, 4}, kFloat64).requires_grad_();
  Tensor w = randn({3, 4}, kFloat32).requires_grad_();
  Tensor x = leaf.exp().to(kFloat32);
  Tensor first = x.matmul(w.t()).sum();
  Tensor second = x.matmul(w.t()).log_softmax(1).mul(2.0).sum();
  const std::vector<Tensor> g1 = autograd::grad({first}, {x, w});  // frees first's graph
  const std::vector<Tensor> g2 = autograd::grad({second}, {x, w});  // used to read a freed x
  REQUIRE(g2[0].defined());
  REQUIRE(g2[1].defined());
  const std::vector<Tensor> again =
      autograd::grad({x.matmul(w.t()).log_softmax(1).mul(2.0).sum()}, {x, w});
  check_close(g2[0], again[0]);
  check_close(g2[1], again[1]);
  check_close(g1[1], x.sum(0).expand({3, 4}));
  x.sum().backward();  // through exp, which the grads above did not run
  check_close(leaf.grad(), leaf.exp().detach());
}

TEST_CASE("create_graph gives second derivatives") {
  Tensor x = tensor({2.0, -1.0}, kFloat64).requires_grad_();
  Tensor y = x.pow(3).sum();
  auto g = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true);
  check_close(g[0], tensor({12.0, 3.0}, kFloat64));  // 3x^2
  g[0].sum().backward();
  check_close(x.grad(), tensor({12.0, -6.0}, kFloat64));  // 6x
  // Through backward(create_graph=true) and a tanh network.
  Tensor z = tensor({0.3, -0.7}, kFloat64).requires_grad_();
  Tensor t = z.tanh().pow(2).sum();
  t.backward(Tensor(), false, /*create_graph=*/true);
  Tensor dz = z.grad();
  z.set_grad(Tensor());
  dz.sum().backward();
  // d/dz [2 tanh(z) (1 - tanh^2 z)] = 2 (1 - t^2)(1 - 3 t^2)
  auto zv = std::vector<double>{0.3, -0.7};
  std::vector<double> expected;
  for (double v : zv) {
    double th = std::tanh(v);
    expected.push_back(2 * (1 - th * th) * (1 - 3 * th * th));
  }
  check_close(z.grad(), from_vector(expected, {2}, kFloat64));
}

TEST_CASE("NoGradGuard and detach") {
  Tensor x = tensor({1.f}).requires_grad_();
  {
    NoGradGuard no_grad;
    CHECK(!(x * 2).requires_grad());
  }
  CHECK((x * 2).requires_grad());
  CHECK(!(x * 2).detach().requires_grad());
  CHECK(x.is_leaf());
  CHECK(!(x * 2).is_leaf());
  KILN_CHECK_ERROR(x.add_(1), "leaf", "NoGradGuard", "autograd_test.cpp");
  KILN_CHECK_ERROR(ones({2}).backward(), "does not require grad");
}

TEST_CASE("in-place change of a saved tensor is detected") {
  Tensor x = tensor({1.f, 2.f}).requires_grad_();
  Tensor y = x.exp();
  Tensor z = (y * y).sum();
  {
    NoGradGuard no_grad;
    y.mul_(2);
  }
  KILN_CHECK_ERROR(z.backward(), "modified by an in-place operation");
}

namespace {
struct Cube : autograd::Function<Cube> {
  static Tensor forward(autograd::Context* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::Context* ctx, std::vector<Tensor> g) {
    Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * 3 * x * x};
  }
};
}  // namespace

TEST_CASE("custom autograd functions") {
  Tensor x = tensor({1.0, -2.0}, kFloat64).requires_grad_();
  Tensor y = Cube::apply(x);
  CHECK(y.to_vector<double>() == std::vector<double>{1, -8});
  (y * tensor({1.0, 2.0}, kFloat64)).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 24});
  check_grad([](const Tensor& t) { return Cube::apply(t.sin()).sum(); }, input({4}, 7));
}

TEST_CASE("autograd::grad with respect to intermediates") {
  Tensor x = tensor({1.f, 2.f}).requires_grad_();
  Tensor h = x * 3;
  Tensor y = (h * h).sum();
  auto g = autograd::grad({y}, {h, x});
  CHECK(g[0].to_vector<float>() == std::vector<float>{6, 12});
  CHECK(g[1].to_vector<float>() == std::vector<float>{18, 36});
  CHECK(!x.grad().defined());  // grad() does not accumulate
}

TEST_CASE(
    "an embedding's gradient is added into an existing .grad in place, bit for bit as traced") {
  // The gradient of a gather is scatter_add(0, index, g): with a .grad already
  // there, eager backward scatters into it (no zeros, no full-size sum), so
  // each row folds its contributions onto the old value in token order, as the
  // traced step does (simplify's add_scatter).
  manual_seed(3);
  const int64_t vocab = 4096, dim = 64;
  Tensor table = (randn({vocab, dim}) * 0.02).requires_grad_();
  Tensor tokens = randint(0, 50, {512});  // many repeats: the fold order matters
  Tensor weight = randn({512, dim});
  auto step = [&](Tensor idx) {
    Tensor loss = (nn::functional::embedding(idx, table) * weight).sum();
    loss.backward();
    return loss;
  };
  step(tokens);  // makes .grad
  Tensor grad = table.grad();
  const void* data = grad.data_ptr();
  step(tokens);
  CHECK(table.grad().data_ptr() == data);  // the same tensor, written in place
  CHECK(grad.equal(table.grad()));

  Tensor eager_grad = table.grad().clone();
  table.grad().zero_();
  auto traced = jit(step);
  table.grad().zero_();
  traced(tokens);  // the first call may run eagerly while compiling: reset and go again
  table.grad().zero_();
  traced(tokens);
  traced(tokens);
  Tensor traced_grad = table.grad().clone();
  table.grad().zero_();
  step(tokens);
  step(tokens);
  CHECK(table.grad().equal(traced_grad));
  CHECK(table.grad().equal(eager_grad));
}

TEST_CASE("a value used by several ops gets its gradient summed in the same order eagerly and traced") {
  // x feeds exp, maximum and mul; recorded in that order. Eager backward once
  // rebuilt the tape depth-first from the loss (maximum before exp), so x's
  // three contributions were added in another order than the trace's autodiff
  // adds them: the last bits of x.grad differed on about 14% of the elements.
  manual_seed(5);
  Tensor x0 = randn({1 << 16}) * 4, w = randn({1 << 16});
  auto step = [&](Tensor x) {
    Tensor a = x.exp();
    Tensor c = x.clamp_min(0);
    Tensor y = x * (c + a);
    (y * w).sum().backward();
    return y;
  };
  Tensor xe = x0.clone().requires_grad_();
  step(xe);
  Tensor xt = x0.clone().requires_grad_();
  auto traced = jit(step, "three_uses");
  traced(xt);
  xt.grad().zero_();
  traced(xt);
  CHECK(traced.stats().hits >= 1);
  CHECK(xt.grad().equal(xe.grad()));
}
