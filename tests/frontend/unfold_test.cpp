// Tensor::unfold as the table's unfold op (ir/ops.def): a view whose windows
// may overlap, as torch's. Writes into the base are seen through it, eagerly
// and traced; writes into it are refused, naming the line; its gradient adds
// up the overlapping windows, against finite differences and traced.
#include "test_util.h"

namespace kiln {
namespace {
std::string at_line(int l) {
  return "unfold_test.cpp:" + std::to_string(l);
}
}  // namespace

TEST_CASE("unfold is a view of overlapping windows: strides, and the base's writes seen") {
  Tensor x = arange(6, kFloat32);
  Tensor w = x.unfold(0, 3, 2);  // [[0,1,2],[2,3,4]]
  CHECK(w.sizes() == Shape{2, 3});
  CHECK(w.stride(0) == 2);
  CHECK(w.stride(1) == 1);
  CHECK(w.flatten().to_vector<double>() == std::vector<double>{0, 1, 2, 2, 3, 4});
  x.add_(10);
  CHECK(w.flatten().to_vector<double>() == std::vector<double>{10, 11, 12, 12, 13, 14});

  // Traced: the windows of the written base, and the same values as eager mode.
  auto body = [](Tensor a) {
    Tensor v = a.unfold(1, 2, 1);
    a.mul_(2);
    return v.sum(-1);
  };
  Tensor in = arange(8, kFloat64).reshape({2, 4});
  const std::vector<double> eager = body(in.clone()).flatten().to_vector<double>();
  CHECK(eager == std::vector<double>{2, 6, 10, 18, 22, 26});
  CHECK(jit(body)(in.clone()).flatten().to_vector<double>() == eager);
}

TEST_CASE("unfold refuses in-place writes into its windows, eagerly and traced") {
  auto write = [](Tensor a) {
    Tensor v = a.unfold(0, 2, 1);
    v.zero_();
    return a;
  };
  const std::string at = at_line(__LINE__ - 3);
  KILN_CHECK_ERROR(write(arange(4, kFloat32)), "in-place operation on a view of unfold()",
                   "clone() it first", at.c_str());
  KILN_CHECK_ERROR(jit(write)(arange(4, kFloat32)), "view of unfold()", at.c_str());
  // Its own storage, once cloned.
  Tensor c = arange(4, kFloat32).unfold(0, 2, 1).clone();
  c.zero_();
  CHECK(c.sum().item<double>() == 0);
}

TEST_CASE("unfold's gradient adds the overlapping windows up, eagerly and traced") {
  for (auto [size, step] : {std::pair<int64_t, int64_t>{3, 1}, {2, 2}, {2, 3}, {1, 1}, {5, 1}}) {
    CAPTURE(size);
    CAPTURE(step);
    auto f = [size, step](const Tensor& x) {
      Tensor w = x.unfold(1, size, step);
      return (w * w.cos()).sum();
    };
    Tensor x0 = randn({3, 5}, kFloat64);
    test::check_close(test::autograd_grad(f, x0), test::numeric_grad(f, x0), 1e-6);
    Tensor x = x0.clone().requires_grad_();
    auto traced = jit([f](Tensor a) {
      Tensor loss = f(a);
      loss.backward();
      return loss;
    });
    Tensor loss = traced(x);
    test::check_close(loss, f(x0), 1e-12);
    test::check_close(x.grad(), test::autograd_grad(f, x0), 1e-12);
  }
}

TEST_CASE("unfold of a scalar, of no windows, and bad windows") {
  CHECK(scalar_tensor(3.0).unfold(0, 1, 1).to_vector<double>() == std::vector<double>{3});
  CHECK(zeros({2, 3}).unfold(1, 0, 1).sizes() == Shape{2, 4, 0});
  const std::string at = at_line(__LINE__ + 1);
  KILN_CHECK_ERROR(zeros({2, 3}).unfold(1, 4, 1), "unfold: expected 0 <= size <= 3", at.c_str());
  KILN_CHECK_ERROR(zeros({2, 3}).unfold(1, 2, 0), "step > 0");
  KILN_CHECK_ERROR(zeros({2, 3}).unfold(2, 1, 1), "unfold");
}

}  // namespace kiln
