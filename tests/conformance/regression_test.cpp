// Regression tests for the silent traced-vs-eager differences the matrix was
// built to catch, and the gradient conventions at ties and kinks (PyTorch's),
// stated explicitly where finite differences cannot say what is right.
#include <functional>
#include <optional>

#include "conformance.h"
#include "frontend/test_util.h"

using namespace kiln;

namespace {

Tensor leaf(std::vector<double> v, Shape s, DType dt = kFloat64) {
  return from_vector(v, s, TensorOptions(dt)).requires_grad_();
}

std::vector<double> grad_of(const Tensor& t) {
  return t.grad().to_vector<double>();
}

}  // namespace

TEST_CASE("detach() inside a traced function stops the gradient of its compiled backward") {
  auto g = jit([](Tensor x) { return x * x.detach(); });
  Tensor a = leaf({1, -2, 3}, {3});
  g(a).sum().backward();
  CHECK(grad_of(a) == std::vector<double>{1, -2, 3});  // eager and PyTorch: a, not 2a
}

TEST_CASE("backward() inside a trace writes .grad of the function's own arguments, accumulating") {
  auto f = jit([](Tensor x) {
    Tensor y = (x * x).sum();
    y.backward();
    return y;
  });
  Tensor a = leaf({1, 2, 3}, {3});
  f(a);
  REQUIRE(a.grad().defined());
  CHECK(grad_of(a) == std::vector<double>{2, 4, 6});
  f(a);  // the cached plan again: gradients add up as in eager mode
  CHECK(grad_of(a) == std::vector<double>{4, 8, 12});
  CHECK(f.stats().hits >= 1);

  // An argument computed by eager ops: the gradient flows on to its leaf.
  Tensor b = leaf({1, 2}, {2});
  f(b * 3);
  CHECK(grad_of(b) == std::vector<double>{18, 36});

  // Reading the argument's .grad() inside the trace, when it already has one, is refused.
  auto reads = jit([](Tensor x) {
    (x * x).sum().backward();
    return x.grad() * 1.0;
  });
  Tensor c = leaf({1, 2}, {2});
  CHECK(reads(c).to_vector<double>() == std::vector<double>{2, 4});
  KILN_CHECK_ERROR(reads(c), "reads .grad() of its argument 0", "already holds a gradient");
}

TEST_CASE("Adam keeps its step count and bias corrections in f64") {
  // Two f64 parameters, one traced step each way, against the closed form of Adam's first steps.
  for (bool traced : {false, true}) {
    Tensor w = leaf({0.5, -1.25}, {2});
    optim::Adam opt({w}, optim::AdamOptions(0.1));
    auto step = [&](Tensor x) {
      opt.zero_grad();
      Tensor loss = (w * x).sum();
      loss.backward();
      opt.step();
      return loss;
    };
    auto traced_step = jit(step);
    Tensor x = from_vector({3.0, -7.0}, {2}, TensorOptions(kFloat64));
    for (int i = 0; i < 3; ++i) traced ? traced_step(x) : step(x);
    // Constant gradient g: m_t/(1-b1^t) = g and v_t/(1-b2^t) = g^2, so each step moves
    // lr*g/(|g|+eps).
    const double eps = 1e-8;
    const std::vector<double> got = w.to_vector<double>();
    CHECK(got[0] == doctest::Approx(0.5 - 3 * 0.1 * 3 / (3 + eps)).epsilon(1e-14));
    CHECK(got[1] == doctest::Approx(-1.25 + 3 * 0.1 * 7 / (7 + eps)).epsilon(1e-14));
  }
}

TEST_CASE("gradient conventions at ties and kinks are PyTorch's, eager and traced") {
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto run = [&](std::function<Tensor(Tensor)> f, Tensor x) {
      Tensor y = traced ? jit(f)(x) : f(x);
      y.sum().backward();
      return grad_of(x);
    };
    auto maxdim = [](Tensor x) { return std::get<0>(x.max(1)); };
    // max(dim) gives the gradient to the index it returns (the first maximum).
    CHECK(run(maxdim, leaf({1, 3, 3, 2, 2, 2}, {2, 3})) == std::vector<double>{0, 1, 0, 1, 0, 0});
    // amax and max() split it evenly among ties.
    CHECK(run([](Tensor x) { return x.amax({1}); }, leaf({1, 3, 3, 2, 2, 2}, {2, 3})) ==
          std::vector<double>{0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3});
    CHECK(run([](Tensor x) { return x.max(); }, leaf({4, 1, 4, 0}, {4})) ==
          std::vector<double>{0.5, 0, 0.5, 0});
    // maximum splits 0.5/0.5 between tied operands.
    Tensor y = from_vector({1.0, 0.0}, {2}, TensorOptions(kFloat64));
    CHECK(run([&](Tensor x) { return x.maximum(y); }, leaf({1, 2}, {2})) ==
          std::vector<double>{0.5, 1});
    // abs, relu and sign have gradient 0 at 0.
    CHECK(run([](Tensor x) { return x.abs() + x.relu() + x.sign(); }, leaf({0, -1, 2}, {3})) ==
          std::vector<double>{0, -1, 2});
  }
}

TEST_CASE("a tensor reached only through comparisons gets no gradient, traced as eager") {
  for (bool inside : {false, true}) {
    Tensor a = leaf({1, -1}, {2}), b = leaf({2, -3}, {2});
    auto f = jit([&](Tensor x) {
      Tensor l = (x * b.gt(0).to(kFloat64)).sum();
      if (inside) l.backward();
      return l;
    });
    Tensor l = f(a);
    if (!inside) l.backward();
    CHECK(a.grad().defined());
    CHECK_FALSE(b.grad().defined());
  }
}

TEST_CASE("a no-grad block inside a trace cuts the gradient as in eager mode") {
  auto f = jit([](Tensor x) {
    Tensor y;
    {
      NoGradGuard no_grad;
      y = x * 2;
    }
    return x * y;
  });
  Tensor a = leaf({1, 3}, {2});
  f(a).sum().backward();
  CHECK(grad_of(a) == std::vector<double>{2, 6});  // d(x * c)/dx with c = 2x held constant
}

namespace {

// Runs `body` eagerly and traced (twice, so the cached plan runs too) on fresh
// copies of `x` (requiring grad), backward from the sum of its first output,
// and checks that outputs and x.grad() agree; returns the eager x.grad().
std::vector<double> same_both_ways(const std::function<std::vector<Tensor>(Tensor)>& body,
                                   const std::vector<double>& x, const Shape& shape) {
  auto traced = jit(body);
  Tensor xe = leaf(x, shape);
  std::vector<Tensor> oe = body(xe);
  oe[0].sum().backward();
  for (int call = 0; call < 2; ++call) {
    Tensor xt = leaf(x, shape);
    std::vector<Tensor> ot = traced(xt);
    REQUIRE(ot.size() == oe.size());
    for (size_t i = 0; i < oe.size(); ++i) {
      CHECK(ot[i].requires_grad() == oe[i].requires_grad());
      CHECK(ot[i].to_vector<double>() == oe[i].to_vector<double>());
    }
    ot[0].sum().backward();
    REQUIRE(xt.grad().defined());
    CHECK(grad_of(xt) == grad_of(xe));
  }
  return grad_of(xe);
}

}  // namespace

TEST_CASE("an in-place op on a view writes into the viewed tensor, with PyTorch's gradients") {
  // y = 2x; y[0:1] *= 3 makes y = (6x0, 2x1): d sum(y)/dx = (6, 2), eagerly
  // (the base takes the history of the write, PyTorch's CopySlices) and traced
  // (the write is a where() into the base).
  auto narrow_mul = [](Tensor x) {
    Tensor y = x * 2.0;
    y.narrow(0, 0, 1).mul_(3.0);
    return std::vector<Tensor>{y};
  };
  CHECK(same_both_ways(narrow_mul, {1, 2}, {2}) == std::vector<double>{6, 2});

  // Views of views, a transpose and a strided slice: z = x * 1, written through
  // z.t()[1][::2] += x[0, 1] * 10.
  auto nested = [](Tensor x) {
    Tensor z = x * 1.0;
    Tensor col = z.t().select(0, 1).slice(0, 0, std::nullopt, 2);
    col.add_(x.select(0, 0).select(0, 1) * 10.0);
    return std::vector<Tensor>{z, col};
  };
  same_both_ways(nested, {1, 2, 3, 4, 5, 6}, {3, 2});

  // A write into the base shows in a view taken before it, and the view's
  // gradient follows the base's new history.
  auto base_write = [](Tensor x) {
    Tensor y = x * 1.0;
    Tensor v = y.slice(0, 1, 3);
    y.mul_(x);
    return std::vector<Tensor>{v, y};
  };
  CHECK(same_both_ways(base_write, {1, 2, 3}, {3}) == std::vector<double>{0, 4, 6});

  // A matmul of vectors returns a reshaped view: writing it in place is fine.
  auto dot_relu = [](Tensor x) {
    Tensor d = x.matmul(x);
    d.relu_();
    return std::vector<Tensor>{d};
  };
  same_both_ways(dot_relu, {0.5, -1.5}, {2});
}

TEST_CASE("in-place writes through views of captured tensors and detached views") {
  // A view of a captured parameter returned after an optimizer step in the same
  // traced body shows the updated parameter, as the eager view does.
  auto run = [](bool traced) {
    Tensor w = leaf({1, 2, 3}, {3});
    optim::SGD opt({w}, 0.5);
    auto body = [&]() {
      Tensor v = w.select(0, 1);
      Tensor loss = (v * v).sum();
      loss.backward();
      opt.step();
      return std::vector<Tensor>{v, loss};
    };
    std::vector<Tensor> out = traced ? jit(body)() : body();
    return std::vector<double>{out[0].item<double>(), w.to_vector<double>()[1]};
  };
  CHECK(run(false) == std::vector<double>{0, 0});  // 2 - 0.5 * 2 * 2
  CHECK(run(true) == run(false));

  // A write into a detached view changes the data of its base but not its
  // history: the gradient still flows to the old value.
  auto detached = [](Tensor x) {
    Tensor y = x * 3.0;
    y.detach().add_(1.0);
    return std::vector<Tensor>{y * x};
  };
  // y * x with y = 3x + 1 and dy/dx = 3: d/dx = y + 3x = 6x + 1.
  CHECK(same_both_ways(detached, {1, 2}, {2}) == std::vector<double>{7, 13});
}

TEST_CASE("clone() inside a trace is a copy: writing it leaves the captured tensor alone") {
  Tensor c = from_vector({1.0, 2.0}, {2}, TensorOptions(kFloat64));
  auto f = jit([&](Tensor a) {
    Tensor v = c.clone();
    v.add_(a.sum());
    return v;
  });
  Tensor a = from_vector({1.0, 1.0}, {2}, TensorOptions(kFloat64));
  for (int call = 0; call < 3; ++call) CHECK(f(a).to_vector<double>() == std::vector<double>{3, 4});
  CHECK(c.to_vector<double>() == std::vector<double>{1, 2});
}

TEST_CASE("x.mul_(y) keeps x's old value for y's gradient, as PyTorch keeps original self") {
  Tensor x = from_vector({2.0, 3.0}, {2}, TensorOptions(kFloat64));
  Tensor y = leaf({5, 7}, {2});
  x.mul_(y);
  x.sum().backward();
  CHECK(grad_of(y) == std::vector<double>{2, 3});
  CHECK(x.to_vector<double>() == std::vector<double>{10, 21});
}

TEST_CASE("a captured tensor given a value that requires grad inside a trace requires grad") {
  auto run = [](bool traced) {
    Tensor c = from_vector({1.0, 2.0}, {2}, TensorOptions(kFloat64));
    Tensor a = leaf({3, 4}, {2});
    auto body = [&](Tensor x) {
      c.add_(x * x);
      return std::vector<Tensor>{c.sum()};
    };
    Tensor loss = traced ? jit(body)(a)[0] : body(a)[0];
    CHECK(loss.requires_grad());
    loss.backward();
    return grad_of(a);
  };
  CHECK(run(false) == std::vector<double>{6, 8});
  CHECK(run(true) == run(false));
}

TEST_CASE("an in-place write into an expand() is an error in both modes, as in PyTorch") {
  auto body = [](Tensor x) {
    Tensor e = x.expand({2, 2});
    e.add_(1.0);  // line of the error
    return e;
  };
  Tensor a = from_vector({1.0, 2.0}, {2}, TensorOptions(kFloat64));
  KILN_CHECK_ERROR(body(a), "expand()", "share one memory location", "regression_test.cpp");
  KILN_CHECK_ERROR(jit(body)(a), "expand()", "share one memory location", "regression_test.cpp");
}

TEST_CASE("two optimizer steps inside one trace: the second backward reaches the updated parameters") {
  // The step writes w under NoGradGuard; the second loss must still differentiate
  // with respect to w (eager: w stays a leaf), not stop at the update.
  auto run = [](bool traced) {
    Tensor w = leaf({0.5, -1.5, 2.0}, {3});
    optim::SGD opt({w}, 0.1);
    auto two_steps = [&](Tensor x) {
      Tensor first;
      for (int k = 0; k < 2; ++k) {
        opt.zero_grad();
        Tensor loss = ((w * x - 1.0) * (w * x - 1.0)).sum();
        loss.backward();
        opt.step();
        if (k == 0) first = loss;
      }
      return first;
    };
    Tensor x = from_vector({1.0, 2.0, -1.0}, {3}, TensorOptions(kFloat64));
    Tensor l = traced ? jit(two_steps)(x) : two_steps(x);
    return std::make_pair(w.to_vector<double>(), l.item<double>());
  };
  auto [w_eager, l_eager] = run(false);
  auto [w_traced, l_traced] = run(true);
  CHECK(l_traced == doctest::Approx(l_eager));
  REQUIRE(w_traced.size() == w_eager.size());
  for (size_t i = 0; i < w_eager.size(); ++i) CHECK(w_traced[i] == doctest::Approx(w_eager[i]).epsilon(1e-12));
}

TEST_CASE("a tensor written in place under NoGradGuard inside a trace keeps requires_grad and its gradient") {
  auto body = [](Tensor c, Tensor a) {
    {
      NoGradGuard ng;
      c.sub_(a);
    }
    Tensor loss = (c * c).sum();
    loss.backward();
    return std::vector<Tensor>{c, loss};
  };
  Tensor a = from_vector({1.0, 2.0}, {2}, TensorOptions(kFloat64));
  Tensor ce = leaf({3.0, 5.0}, {2}), ct = leaf({3.0, 5.0}, {2});
  auto oe = body(ce, a);
  auto ot = jit(body)(ct, a);
  CHECK(ot[0].requires_grad() == oe[0].requires_grad());
  CHECK(ot[0].to_vector<double>() == oe[0].to_vector<double>());
  REQUIRE(ct.grad().defined());
  CHECK(grad_of(ct) == grad_of(ce));  // 2 (c - a) = {4, 6}
  CHECK(grad_of(ct) == std::vector<double>{4, 6});
}

TEST_CASE("eager backward checks only the saved tensors a gradient reads, as PyTorch") {
  // add and sum save nothing their gradient reads: a second backward works.
  Tensor a = leaf({1, 2}, {2});
  Tensor s = (a + 1.0).sum();
  s.backward();
  s.backward();
  CHECK(grad_of(a) == std::vector<double>{2, 2});
  // mul reads its operands: the second backward is refused.
  Tensor b = leaf({1, 2}, {2});
  Tensor m = (b * b).sum();
  m.backward();
  KILN_CHECK_ERROR(m.backward(), "backward through the graph a second time", "retain_graph");

  // y = x * 2 reads nothing of y, so writing y in place before y * x is fine;
  // exp's gradient reads its result, so writing that in place is refused.
  Tensor x = leaf({0.5, 1.5}, {2});
  Tensor y = x * 2.0;
  {
    NoGradGuard no_grad;
    y.add_(1.0);
  }
  (y * x).sum().backward();
  // d/dx sum(y x) = y + 2x with y's new values 2x + 1 and its history x * 2: 4x + 1.
  CHECK(grad_of(x) == std::vector<double>{3, 7});
  Tensor z = leaf({0.5}, {1});
  Tensor e = z.exp();
  {
    NoGradGuard no_grad;
    e.mul_(2.0);
  }
  KILN_CHECK_ERROR(e.sum().backward(), "needed for the gradient of 'exp'", "modified by an in-place");
}

TEST_CASE("in-place writes to a traced function's arguments reach the caller's tensors") {
  auto body = [](Tensor x, Tensor y) {
    x.add_(1.0);
    y.mul_(x);
    return x * 2.0;
  };
  auto f = jit(body);
  for (int call = 0; call < 2; ++call) {  // the cached plan writes them too
    Tensor xe = from_vector({1.0, 2.0}, {2}, TensorOptions(kFloat64));
    auto strided = [] { return from_vector({3.0, 9.0, -1.0, 9.0}, {4}, TensorOptions(kFloat64)).slice(0, 0, 4, 2); };
    Tensor ye = strided(), yt = strided();
    Tensor xt = xe.clone();
    Tensor oe = body(xe, ye), ot = f(xt, yt);
    CHECK(ot.to_vector<double>() == oe.to_vector<double>());
    CHECK(xt.to_vector<double>() == xe.to_vector<double>());
    CHECK(yt.to_vector<double>() == ye.to_vector<double>());
  }
}

TEST_CASE("reductions over size-1 dims compile: softmax, var and min over one element") {
  auto body = [](Tensor x) {
    return std::vector<Tensor>{x.softmax(2), x.log_softmax(0), x.var({2}, /*unbiased=*/false), std::get<0>(x.min(2)),
                               x.sum({0, 2}) + x.amax({0})};
  };
  Tensor x = from_vector({0.5, -1.0, 2.0, 0.25}, {1, 4, 1}, TensorOptions(kFloat64));
  auto oe = body(x);
  auto ot = jit(body)(x);
  REQUIRE(ot.size() == oe.size());
  for (size_t i = 0; i < oe.size(); ++i) {
    CAPTURE(i);
    CHECK(allclose(ot[i], oe[i], 1e-12, 1e-12));
  }
}

TEST_CASE("an argument written in place keeps its old value for the compiled backward") {
  // x.mul_(w) with w requiring grad: d sum/dw is x's value before the write,
  // also when the traced call's backward runs after the call wrote x back.
  auto body = [](Tensor x, Tensor w) {
    x.mul_(w);
    return std::vector<Tensor>{x.sum()};
  };
  auto run = [&](bool traced) {
    Tensor x = from_vector({2.0, 3.0}, {2}, TensorOptions(kFloat64));
    Tensor w = leaf({5, 7}, {2});
    Tensor loss = traced ? jit(body)(x, w)[0] : body(x, w)[0];
    loss.backward();
    CHECK(x.to_vector<double>() == std::vector<double>{10, 21});
    CHECK(!x.grad().defined());  // x is no leaf after the write: no .grad, as eagerly
    return grad_of(w);
  };
  CHECK(run(false) == std::vector<double>{2, 3});
  CHECK(run(true) == run(false));

  // backward() inside: the argument that became a non-leaf gets no .grad.
  auto inside = jit([](Tensor x, Tensor w) {
    x.mul_(w);
    Tensor loss = x.sum();
    loss.backward();
    return loss;
  });
  Tensor x = from_vector({2.0, 3.0}, {2}, TensorOptions(kFloat64));
  Tensor w = leaf({5, 7}, {2});
  inside(x, w);
  CHECK(!x.grad().defined());
  CHECK(grad_of(w) == std::vector<double>{2, 3});
}

TEST_CASE("a captured parameter returned as is shows its value before the step in the same body") {
  auto run = [](bool traced) {
    Tensor w = leaf({1, 2}, {2});
    optim::SGD opt({w}, 0.5);
    auto body = [&]() {
      Tensor before = w.clone();
      Tensor loss = (w * w).sum();
      loss.backward();
      opt.step();
      return std::vector<Tensor>{before, loss};
    };
    std::vector<Tensor> out = traced ? jit(body)() : body();
    return out[0].to_vector<double>();
  };
  CHECK(run(false) == std::vector<double>{1, 2});
  CHECK(run(true) == run(false));
}

// Each runs the same body eagerly and traced on fresh copies and compares them.
namespace {
template <class MakeState, class Body, class Compare>
void eager_and_traced(MakeState make, Body body, Compare compare, int calls = 2) {
  auto se = make(), st = make();
  auto traced = jit([&]() { return body(st); });
  for (int c = 0; c < calls; ++c) {
    std::vector<Tensor> oe = body(se), ot = traced();
    compare(se, st, oe, ot);
  }
}
void same(const Tensor& a, const Tensor& b) {
  REQUIRE(a.defined() == b.defined());
  if (a.defined()) kiln::test::check_close(a, b, 1e-12);
}
}  // namespace

TEST_CASE("a captured tensor written with a value that requires grad takes that history after the call") {
  // kiln-fuzz --seed 2 --program 295: c0 -= c1[4] makes c0 a non-leaf, eagerly and traced.
  struct S { Tensor c0 = from_vector({-1.5, 0.75}, {1, 2}, kFloat64); Tensor c1 = leaf({1, 2, 3, 4, 5, 6}, {3, 2}); };
  eager_and_traced([] { return S{}; },
                   [](S& s) -> std::vector<Tensor> {
                     s.c0.sub_(s.c1.narrow(0, 2, 1));
                     return {s.c0.sum()};
                   },
                   [](S& e, S& t, auto& oe, auto& ot) {
                     CHECK(t.c0.requires_grad());
                     oe[0].backward();
                     ot[0].backward();
                     same(e.c1.grad(), t.c1.grad());  // the second call's gradient goes through the first's
                     same(e.c0, t.c0);
                   });
}

TEST_CASE("backward through a captured tensor's history freed by a backward inside the trace fails as eagerly") {
  // kiln-fuzz --seed 2 --program 688.
  auto make = [] { return std::pair{from_vector({1.5, -0.5}, {2}, kFloat64), leaf({2, 3}, {2})}; };
  auto body = [](std::pair<Tensor, Tensor>& s) {
    Tensor v = s.first.mul_(s.second);
    Tensor loss = v.sum();
    loss.backward();
    return std::vector<Tensor>{loss};
  };
  auto se = make(), st = make();
  auto traced = jit([&]() { return body(st); });
  body(se);
  traced();
  KILN_CHECK_ERROR(body(se), "second time");
  KILN_CHECK_ERROR(traced(), "second time");
}

TEST_CASE("an argument no output gradient reaches keeps .grad undefined after a backward through the call") {
  // kiln-fuzz --seed 1 --program 246: a2 reaches only a0, whose history the loss does not use.
  auto f = jit([](Tensor a0, Tensor a1, Tensor a2) {
    a0.sub_(a2);
    return std::vector<Tensor>{a1, a1.sum()};
  });
  Tensor a0 = from_vector({1, 2}, {2}, kFloat64), a1 = leaf({3}, {1}), a2 = leaf({4, 5}, {2});
  f(a0, a1, a2)[1].backward();
  CHECK(a1.grad().defined());
  CHECK_FALSE(a2.grad().defined());
}

TEST_CASE("a view op that changes nothing under NoGradGuard gives a tensor that does not require grad") {
  // kiln-fuzz --seed 7 --program 1965: squeeze of a dim that is not 1 returned the tensor itself.
  Tensor a = leaf({1, 2}, {2});
  Tensor p = a.pow(2.0);
  NoGradGuard no_grad;
  CHECK_FALSE(p.squeeze(0).requires_grad());
  CHECK_FALSE(p.reshape({2}).requires_grad());
  CHECK_FALSE(p.permute({0}).requires_grad());
  CHECK_FALSE(p.slice(0, 0, 2).requires_grad());
  Tensor v = p.reshape({2});
  v.add_(1);  // still a view: the write reaches p
  CHECK(p.to_vector<double>() == std::vector<double>{2, 5});
}

TEST_CASE("a write into a detached view gives its base the data, not a gradient path") {
  // kiln-fuzz --seed 7 --program 689: a0.detach().sub_(a1); v @ a0 gave a1 twice its gradient.
  auto body = [](Tensor a0, Tensor a1) {
    Tensor v = a0.detach();
    v.sub_(a1);
    return v.matmul(a0).sum();
  };
  auto traced = jit(body);
  Tensor e0 = from_vector({0.5, 1, -0.25}, {3}, kFloat64), t0 = e0.clone();
  Tensor e1 = leaf({2}, {1}), t1 = leaf({2}, {1});
  body(e0, e1).backward();
  traced(t0, t1).backward();
  same(e1.grad(), t1.grad());
  same(e0, t0);
}

TEST_CASE("a traced step refuses to read a .grad that a captured tensor's eager history would still change") {
  // kiln-fuzz --seed 7 --program 7271: the history's gradient arrives after the optimizer step.
  Tensor w = leaf({0.5}, {1});
  Tensor c = from_vector({-2}, {1}, kFloat64);
  optim::SGD opt({w}, 0.1);
  auto step = jit([&]() {
    c.sub_(w);
    Tensor loss = c.sum();
    loss.backward();
    opt.step();
    return loss;
  });
  step();  // c has no history before the first call
  KILN_CHECK_ERROR(step(), "captured tensor computed by eager ops", ".grad()", "optimizer");
}

TEST_CASE("x.grad() read inside a trace passes no gradient on, as eagerly") {
  auto body = [](Tensor& w) {
    Tensor l = (w * w).sum();
    l.backward();
    return (w.grad() * w).sum();  // d/dw = grad (2w), not 4w through the gradient's own graph
  };
  Tensor we = leaf({1.5, -2}, {2}), wt = leaf({1.5, -2}, {2});
  Tensor oe = body(we);
  auto f = jit([&]() { return body(wt); });
  Tensor ot = f();
  we.set_grad(Tensor());
  wt.set_grad(Tensor());
  oe.backward();
  ot.backward();
  CHECK(grad_of(we) == std::vector<double>{3, -4});
  CHECK(grad_of(wt) == std::vector<double>{3, -4});
}

TEST_CASE("a traced training step that returns its loss saves nothing for a backward that can only fail") {
  // The body's backward() frees the loss's graph: a second backward fails eagerly,
  // so the compiled call builds no backward and keeps no residuals for it.
  auto make = [] { return std::pair{leaf({0.5, -1.5, 2.0}, {3}), from_vector({1.0, 2.0, -1.0}, {3}, kFloat64)}; };
  auto step = [](std::pair<Tensor, Tensor>& s, bool retain) {
    Tensor loss = (s.first * s.second).tanh().sum();
    loss.backward(Tensor(), retain);
    return std::vector<Tensor>{loss};
  };
  for (bool retain : {false, true}) {
    CAPTURE(retain);
    auto se = make(), st = make();
    auto traced = jit([&]() { return step(st, retain); });
    Tensor le = step(se, retain)[0];
    Tensor lt = traced()[0];
    CHECK(lt.requires_grad() == le.requires_grad());
    test::check_close(lt, le, 1e-12, 1e-12);
    if (retain) {  // the graph is kept: a second backward adds the same gradient again
      CHECK(traced.graph(false).outputs.size() > 1);  // what the backward reads is saved
      le.backward();
      lt.backward();
      test::check_close(st.first.grad(), se.first.grad(), 1e-12, 1e-12);
    } else {
      KILN_CHECK_ERROR(le.backward(), "second time");
      KILN_CHECK_ERROR(lt.backward(), "second time");
      // The loss alone, and x's gradient as an update: nothing saved (tanh's
      // result, y) for a backward.
      const Graph g = traced.graph(false);
      CHECK(g.outputs.size() == 1);
      CHECK(g.updates.size() == 1);
      test::check_close(st.first.grad(), se.first.grad(), 1e-12, 1e-12);
    }
  }
}
