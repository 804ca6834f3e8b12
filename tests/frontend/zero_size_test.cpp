// Tensors with a dim of size 0 and 0-D tensors where kiln-fuzz's zero-size
// programs found Kiln leaving PyTorch 1.13's rules (tools/fuzz): each case
// eagerly and traced.
#include <cmath>

#include "test_util.h"

namespace kiln {
namespace {

TEST_CASE("searchsorted and bucketize of a 0-D value give a 0-D position, as PyTorch") {
  const Tensor seq = tensor({-1.0, 0.5, 2.0});
  auto f = [&](Tensor v) {
    return std::vector<Tensor>{searchsorted(seq, v), bucketize(v, seq, false, true),
                               searchsorted(seq, Scalar(1.0))};
  };
  const Tensor v = full({}, 0.5, kFloat64);
  for (const std::vector<Tensor>& r : {f(v), jit(f)(v)}) {
    for (const Tensor& x : r) CHECK(x.sizes() == Shape{});
    CHECK(r[0].item<int64_t>() == 1);  // torch.searchsorted(seq, tensor(0.5)) = tensor(1)
    CHECK(r[1].item<int64_t>() == 2);  // right: after the equal one
    CHECK(r[2].item<int64_t>() == 2);
  }
  // Into an empty sequence every value goes at 0.
  CHECK(bucketize(v, zeros({0}, kFloat64)).sizes() == Shape{});
  CHECK(bucketize(v, zeros({0}, kFloat64)).item<int64_t>() == 0);
}

TEST_CASE("a softmax along a dim of size 4 of a [4, 0] tensor compiles: no rows, nothing to read") {
  // The fused max-sub-exp-sum kernel has no rows; lowering refused its read of
  // the max as "at another row".
  auto f = [](Tensor x) {
    Tensor y = x.log_softmax(-2).flatten();
    return std::vector<Tensor>{y, y.sum(), x.softmax(0)};
  };
  const Tensor x = zeros({4, 0}, kFloat64);
  for (const std::vector<Tensor>& r : {f(x), jit(f)(x)}) {
    CHECK(r[0].sizes() == Shape{0});
    CHECK(r[1].item<double>() == 0);
    CHECK(r[2].sizes() == Shape{4, 0});
  }
  auto g = jit([](Tensor x) {
    Tensor l = x.log_softmax(0).sum();
    l.backward();
    return l;
  });
  const Tensor y = zeros({4, 0}, TensorOptions(kFloat64).requires_grad(true));
  CHECK(g(y).item<double>() == 0);
  CHECK(y.grad().sizes() == Shape{4, 0});
}

TEST_CASE(
    "aminmax along a dim with elements of an empty tensor is empty; of an empty dim an error") {
  auto f = [](Tensor x) {
    auto [lo, hi] = x.aminmax(-1, true);
    return std::vector<Tensor>{lo, hi};
  };
  const Tensor x = zeros({0, 4, 4}, kFloat64);
  for (const std::vector<Tensor>& r : {f(x), jit(f)(x)}) {
    CHECK(r[0].sizes() == Shape{0, 4, 1});
    CHECK(r[1].sizes() == Shape{0, 4, 1});
  }
  CHECK_THROWS_WITH_AS(x.aminmax(0), doctest::Contains("aminmax: expected reduction dim 0"), Error);
  CHECK_THROWS_WITH_AS(x.aminmax(), doctest::Contains("aminmax"), Error);
}

TEST_CASE("cdist of points with no coordinates is 0 for every p, inf included") {
  auto f = [](Tensor a, Tensor b) {
    return std::vector<Tensor>{cdist(a, b, INFINITY), cdist(a, b, 2.0), cdist(a, b, 1.0)};
  };
  const Tensor a = zeros({2, 0}, TensorOptions(kFloat64).requires_grad(true));
  const Tensor b = zeros({3, 0}, kFloat64);
  for (const std::vector<Tensor>& r : {f(a, b), jit(f)(a, b)})
    for (const Tensor& d : r) {
      CHECK(d.sizes() == Shape{2, 3});
      CHECK(d.eq(0.0).all().item<bool>());
      CHECK(d.requires_grad());  // as PyTorch's
    }
}

TEST_CASE("attention's gradient over a batch of 0 heads is empty (it divided by the batch)") {
  auto f = [](Tensor q, Tensor k, Tensor v) {
    Tensor out = nn::functional::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    Tensor l = out.sum();
    l.backward();
    return std::vector<Tensor>{out, l};
  };
  for (bool traced : {false, true}) {
    const TensorOptions o = TensorOptions(kFloat32).requires_grad(true);
    Tensor q = zeros({0, 1, 2}, o), k = ones({1, 2}, o), v = ones({1, 2}, o);
    const std::vector<Tensor> r = traced ? jit(f)(q, k, v) : f(q, k, v);
    CHECK(r[0].sizes() == Shape{0, 1, 2});
    CHECK(r[1].item<float>() == 0);
    CHECK(q.grad().sizes() == Shape{0, 1, 2});
    CHECK(k.grad().eq(0.0).all().item<bool>());
    CHECK(v.grad().eq(0.0).all().item<bool>());
  }
}

TEST_CASE("an in-place write into an empty expand() writes nothing and is no error, as PyTorch") {
  auto f = [](Tensor a, Tensor b) {
    Tensor v = a.expand({3, 0});
    v.mul_(b);
    Tensor w = a.unsqueeze(0).expand({2, 0});
    w.add_(1.0);
    return std::vector<Tensor>{v, w, a};
  };
  for (bool traced : {false, true}) {
    const Tensor a = zeros({0}, kFloat64), b = zeros({0}, kFloat64);
    const std::vector<Tensor> r = traced ? jit(f)(a, b) : f(a, b);
    CHECK(r[0].sizes() == Shape{3, 0});
    CHECK(r[1].sizes() == Shape{2, 0});
    CHECK(r[2].sizes() == Shape{0});
  }
  // With elements shared the write is refused, as before.
  CHECK_THROWS_AS(zeros({1}, kFloat64).expand({3}).mul_(2.0), Error);
}

TEST_CASE(
    "cat leaves out 1-D pieces of size 0 whatever the others' shapes (PyTorch's legacy rule)") {
  auto f = [](Tensor a, Tensor e) {
    return std::vector<Tensor>{cat({a, e, a}, -2), cat({e, a}, 1), cat({e, e}, 0)};
  };
  const Tensor a = ones({3, 1}, TensorOptions(kFloat32).requires_grad(true));
  const Tensor e = zeros({0}, kFloat64);  // its dtype still counts: f64, as torch.cat's
  for (const std::vector<Tensor>& r : {f(a, e), jit(f)(a, e)}) {
    CHECK(r[0].sizes() == Shape{6, 1});
    CHECK(r[0].dtype() == kFloat64);
    CHECK(r[1].sizes() == Shape{3, 1});
    CHECK(r[2].sizes() == Shape{0});
    CHECK(r[0].sum().item<double>() == 6);
  }
  CHECK_THROWS_AS(cat({a, zeros({2}, kFloat32)}),
                  Error);  // a 1-D piece with elements is no exception
}

}  // namespace
}  // namespace kiln
