// Eager conv2d and pooling through compiled composites (frontend/eager_composite.h):
// the op-by-op composite's values and gradients at several batch sizes and
// dtypes, double backward, and the paths that stay op by op (inside a trace,
// KILN_JIT=0, KILN_EAGER_KERNELS=0).
#include <doctest/doctest.h>

#include <kiln/kiln.h>

#include <functional>

#include "frontend/eager_composite.h"
#include "frontend/settings.h"
#include "tests/frontend/test_util.h"

using namespace kiln;

namespace {

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// The op's value and the gradients of every input of (op(inputs) * g).sum().
std::vector<Tensor> value_and_grads(const Op& op, const std::vector<Tensor>& inputs,
                                    uint64_t seed) {
  Tensor y = op(inputs);
  manual_seed(seed);
  Tensor g = randn(y.sizes(), TensorOptions(y.dtype()));
  std::vector<Tensor> r{y.detach()};
  for (const Tensor& t : autograd::grad({(y * g).sum()}, inputs)) r.push_back(t);
  return r;
}

struct Case {
  const char* name;
  Shape weight;  // empty: a pooling op, one input
  bool bias;
  Op op;
};

std::vector<Case> cases() {
  return {
      {"conv2d, bias, padding 1",
       {6, 3, 3, 3},
       true,
       [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], 1, 1); }},
      {"conv2d, no bias, stride 2, dilation 2, 3 groups",
       {6, 1, 3, 3},
       false,
       [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], Tensor(), 2, 2, 2, 3); }},
      {"max_pool2d 3x3, stride 2, padding 1, ceil_mode",
       {},
       false,
       [](const std::vector<Tensor>& v) { return max_pool2d(v[0], 3, 2, 1, 1, true); }},
      {"avg_pool2d 2x2, padding 1, not counting the padding",
       {},
       false,
       [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], 2, 2, 1, false, false); }},
  };
}

std::vector<Tensor> inputs_for(const Case& c, int64_t batch, DType dt) {
  const TensorOptions o(dt);
  std::vector<Tensor> in{randn({batch, 3, 9, 8}, o).requires_grad_()};
  if (!c.weight.empty()) {
    in.push_back((randn(c.weight, o) * 0.3).requires_grad_());
    if (c.bias) in.push_back(randn({c.weight[0]}, o).requires_grad_());
  }
  return in;
}

}  // namespace

TEST_CASE(
    "eager conv2d and pooling run compiled, with the op-by-op composite's values and gradients") {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Case& c : cases()) {
      CAPTURE(c.name);
      CAPTURE(dtype_name(dt));
      // A new batch size retraces (and makes the batch dynamic): each is checked.
      for (int64_t batch : {4, 7, 4, 2}) {
        CAPTURE(batch);
        manual_seed(uint64_t(batch));
        const std::vector<Tensor> in = inputs_for(c, batch, dt);
        const uint64_t calls = detail::compiled_composite_calls();
        std::vector<Tensor> compiled = value_and_grads(c.op, in, 11);
        CHECK(detail::compiled_composite_calls() == calls + 1);
        std::vector<Tensor> op_by_op;
        {
          test::ScopedValue op_by_op_path(settings().eager_kernels, false);
          op_by_op = value_and_grads(c.op, in, 11);
        }
        CHECK(detail::compiled_composite_calls() == calls + 1);
        REQUIRE(compiled.size() == op_by_op.size());
        const double tol = dt == kFloat64 ? 1e-12 : 2e-5;
        for (size_t i = 0; i < compiled.size(); ++i) {
          CAPTURE(i);
          test::check_close(compiled[i], op_by_op[i], tol, tol);
        }
      }
    }
  }
}

TEST_CASE("a compiled eager composite is one tape node with its own key per weight shape") {
  const size_t before = detail::compiled_composites();
  manual_seed(1);
  // Weight shapes no other test of this binary uses.
  Tensor x = randn({2, 4, 6, 6}), w = randn({5, 4, 3, 3}).requires_grad_();
  Tensor y = conv2d(x, w);
  CHECK(y.requires_grad());
  CHECK(detail::compiled_composites() == before + 1);
  (void)conv2d(x, randn({3, 4, 3, 3}));  // another weight shape: another composite
  CHECK(detail::compiled_composites() == before + 2);
  (void)conv2d(randn({3, 4, 6, 6}), w.detach());  // another batch: the same composite
  CHECK(detail::compiled_composites() == before + 2);
  y.sum().backward();
  Tensor want = w.grad().clone();
  w.grad().zero_();
  {
    test::ScopedValue op_by_op_path(settings().eager_kernels, false);
    conv2d(x, w).sum().backward();
  }
  test::check_close(w.grad(), want, 1e-5, 1e-5);
  // No gradient wanted: the forward alone.
  {
    NoGradGuard no_grad;
    CHECK_FALSE(conv2d(x, w).requires_grad());
  }
}

TEST_CASE("double backward through compiled eager conv2d and max_pool2d (create_graph)") {
  manual_seed(2);
  Tensor x = randn({2, 2, 6, 6}, kFloat64).requires_grad_();
  Tensor w = randn({3, 2, 3, 3}, kFloat64).requires_grad_();
  auto second = [&] {
    Tensor y = max_pool2d(conv2d(x, w, Tensor(), 1, 1), 2).pow(2).sum();
    Tensor gx = autograd::grad({y}, {x}, {}, true, true)[0];
    return autograd::grad({gx.pow(2).sum()}, {w})[0];
  };
  const Tensor compiled = second();
  Tensor op_by_op;
  {
    test::ScopedValue op_by_op_path(settings().eager_kernels, false);
    op_by_op = second();
  }
  test::check_close(compiled, op_by_op, 1e-10, 1e-10);
  CHECK(compiled.abs().sum().item<double>() > 0);
}

TEST_CASE("eager composites stay op by op inside a trace and with the JIT off") {
  manual_seed(3);
  Tensor x = randn({2, 3, 5, 5});
  auto f = jit([](Tensor a, Tensor w) { return conv2d(a, w, Tensor(), 1, 2); }, "conv_in_trace");
  const uint64_t calls = detail::compiled_composite_calls();
  Tensor w = randn({7, 3, 2, 2});
  Tensor traced = f(x, w);
  CHECK(detail::compiled_composite_calls() == calls);  // the trace recorded the composite's ops
  set_jit_enabled(false);
  Tensor eager = conv2d(x, w, Tensor(), 1, 2);
  set_jit_enabled(true);
  CHECK(detail::compiled_composite_calls() == calls);
  test::check_close(traced, eager, 1e-5, 1e-5);
  (void)conv2d(x, w, Tensor(), 1, 2);
  CHECK(detail::compiled_composite_calls() == calls + 1);
}

TEST_CASE("an operand written in place before backward is an error, never a gradient of new values") {
  manual_seed(4);
  Tensor x = randn({2, 3, 5, 5}), w = randn({4, 3, 3, 3}).requires_grad_();
  Tensor y = conv2d(x, w);  // the weight's gradient reads x
  x.add_(1.0);
  const std::string e = test::error_of([&] { y.sum().backward(); });
  CHECK(e.find("modified by an in-place operation") != std::string::npos);
  CHECK(e.find("conv2d") != std::string::npos);
  CHECK(e.find("eager_composite_test.cpp") != std::string::npos);
  CHECK_FALSE(w.grad().defined());
  // A pooling op's error names it (the key's attributes are not the name).
  Tensor a = randn({1, 2, 4, 4}).requires_grad_();
  Tensor b = a * 2.0;
  Tensor pooled = max_pool2d(b, 2);
  b.add_(1.0);
  const std::string e2 = test::error_of([&] { pooled.sum().backward(); });
  CHECK(e2.find("gradient of 'max_pool2d'") != std::string::npos);
}
