// scaled_dot_product_attention: the streaming attention op against the
// composite softmax(q k^T * scale) v, values and gradients, eagerly and traced,
// all three or any of q, k and v (eager == traced, bitwise);
// the mask and dropout path; memory O(T * d) at T = 4096; clear errors.
#include <doctest/doctest.h>

#include "test_util.h"

#include "runtime/allocator.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  Tensor s = q.matmul(k.transpose(-2, -1)) * scale;
  if (causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    Tensor hidden = arange(S).unsqueeze(0) > arange(L).unsqueeze(1);  // key j > query i
    s = s.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  }
  return s.softmax(-1).matmul(v);
}

bool close(const Tensor& a, const Tensor& b, double tol) {
  return a.sizes() == b.sizes() && allclose(a, b, tol, tol);
}

}  // namespace

TEST_CASE("attention equals the composite, values and gradients, eager and traced, causal or not") {
  manual_seed(3);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    // Heads broadcast: k and v shared by the 3 heads of q.
    Tensor q = randn({2, 3, 70, 8}, kFloat64).requires_grad_(),
           k = randn({2, 1, 150, 8}, kFloat64).requires_grad_(),
           v = randn({2, 1, 150, 5}, kFloat64).requires_grad_();
    Tensor g = randn({2, 3, 70, 5}, kFloat64);
    auto grads = [&](const Tensor& out) {
      auto r = autograd::grad({(out * g).sum()}, {q, k, v});
      return std::vector<Tensor>{out.detach(), r[0], r[1], r[2]};
    };
    const double scale = 1 / std::sqrt(8.0);
    const std::vector<Tensor> want = grads(composite(q, k, v, causal, scale));
    const std::vector<Tensor> eager =
        grads(F::scaled_dot_product_attention(q, k, v, {}, 0.0, causal));
    auto step = jit([&](Tensor a, Tensor b, Tensor c) {
      Tensor out = F::scaled_dot_product_attention(a, b, c, {}, 0.0, causal);
      auto r = autograd::grad({(out * g).sum()}, {a, b, c});
      return std::make_tuple(out, r[0], r[1], r[2]);
    });
    auto [o, dq, dk, dv] = step(q, k, v);
    const std::vector<Tensor> traced{o, dq, dk, dv};
    for (size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      CHECK(close(eager[i], want[i], 1e-10));
      CHECK(close(traced[i], want[i], 1e-10));
    }
  }
}

TEST_CASE(
    "attention's gradients for some of q, k and v: the composite's, eager == traced bitwise") {
  manual_seed(6);
  // Several blocks of queries and keys, two heads: the gradient step's chunks.
  Tensor q = randn({2, 200, 16}), k = randn({2, 300, 16}), v = randn({2, 300, 8});
  Tensor g = randn({2, 200, 8});
  for (int mask = 1; mask < 8; ++mask) {
    CAPTURE(mask);
    std::vector<Tensor> x = {q.detach().requires_grad_(mask & 1),
                             k.detach().requires_grad_(mask & 2),
                             v.detach().requires_grad_(mask & 4)};
    std::vector<Tensor> wrt;
    for (int i = 0; i < 3; ++i)
      if (mask & (1 << i)) wrt.push_back(x[size_t(i)]);
    const std::vector<Tensor> want =
        autograd::grad({(composite(x[0], x[1], x[2], true, 0.25) * g).sum()}, wrt);
    const std::vector<Tensor> eager = autograd::grad(
        {(F::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true, 0.25) * g).sum()}, wrt);
    auto step = jit([&](Tensor a, Tensor b, Tensor c) {
      Tensor out = F::scaled_dot_product_attention(a, b, c, {}, 0.0, true, 0.25);
      std::vector<Tensor> in = {a, b, c}, w;
      for (int i = 0; i < 3; ++i)
        if (mask & (1 << i)) w.push_back(in[size_t(i)]);
      std::vector<Tensor> r = autograd::grad({(out * g).sum()}, w);
      while (r.size() < 3) r.push_back(out);
      return std::make_tuple(r[0], r[1], r[2]);
    });
    auto [t0, t1, t2] = step(x[0], x[1], x[2]);
    const std::vector<Tensor> traced{t0, t1, t2};
    for (size_t j = 0; j < wrt.size(); ++j) {
      CAPTURE(j);
      CHECK(eager[j].sizes() == wrt[j].sizes());
      CHECK(close(eager[j], want[j], 1e-4));
      CHECK(traced[j].equal(eager[j]));
    }
  }
}

TEST_CASE("attention with a mask or dropout is the composite; a scale; f32") {
  manual_seed(4);
  Tensor q = randn({4, 6}), k = randn({9, 6}), v = randn({9, 3});
  Tensor keep = rand({4, 9}) > 0.3;
  keep.narrow(1, 0, 1).fill_(true);  // every row sees a key
  Tensor s = (q.matmul(k.t()) * 0.25).masked_fill(keep.logical_not(), -INFINITY);
  CHECK(close(F::scaled_dot_product_attention(q, k, v, keep, 0.0, false, 0.25),
              s.softmax(-1).matmul(v), 1e-5));
  Tensor bias = randn({4, 9});
  CHECK(close(F::scaled_dot_product_attention(q, k, v, bias),
              (q.matmul(k.t()) / std::sqrt(6.0) + bias).softmax(-1).matmul(v), 1e-5));
  CHECK(close(F::scaled_dot_product_attention(q, k, v, {}, 0.0, true, 0.5),
              composite(q, k, v, true, 0.5), 1e-5));
}

TEST_CASE("attention at T = 4096 holds no T x T matrix, eager or traced, forward or backward") {
  manual_seed(5);
  const int64_t T = 4096, d = 64;  // a T x T f32 matrix is 64 MiB
  Tensor q = randn({1, 1, T, d}).requires_grad_(), k = randn({1, 1, T, d}).requires_grad_(),
         v = randn({1, 1, T, d}).requires_grad_();
  auto step = [&](Tensor a, Tensor b, Tensor c) {
    Tensor out = F::scaled_dot_product_attention(a, b, c, {}, 0.0, true);
    auto r = autograd::grad({out.sum()}, {a, b, c});
    return std::make_tuple(out, r[0], r[1], r[2]);
  };
  auto traced = jit(step);
  auto held = [] {
    const AllocatorStats s = cpu_allocator_stats();
    return s.bytes_in_use + s.bytes_cached;
  };
  for (int mode = 0; mode < 2; ++mode) {
    CAPTURE(mode);
    cpu_empty_cache();
    auto [o, dq, dk, dv] = mode == 0 ? step(q, k, v) : traced(q, k, v);
    CHECK(held() <
          (24u << 20));  // q, k, v, out, 3 gradients, 1 MiB each, and temporaries of that size
    CHECK(std::isfinite(dk.abs().sum().item<double>()));
  }
  // The test can fail: the composite holds the scores.
  cpu_empty_cache();
  {
    Tensor out = F::scaled_dot_product_attention(q, k, v, ones({T, T}, kBool));
    CHECK(held() >= (64u << 20));
  }
}

TEST_CASE("attention's bad arguments are clear errors; no second derivatives") {
  Tensor q = randn({3, 4}), k = randn({5, 4}), v = randn({5, 2});
  KILN_CHECK_ERROR(F::scaled_dot_product_attention(q, randn({5, 3}), v),
                   "scaled_dot_product_attention:", "expected k as wide as q",
                   "attention_test.cpp:");
  KILN_CHECK_ERROR(F::scaled_dot_product_attention(q, k, randn({4, 2})), "v as long as k");
  KILN_CHECK_ERROR(F::scaled_dot_product_attention(q.to(kInt64), k, v),
                   "expected floating-point q, k and v");
  KILN_CHECK_ERROR(F::scaled_dot_product_attention(randn({4}), k, v), "rank >= 2");
  KILN_CHECK_ERROR(F::scaled_dot_product_attention(q, k, v, ones({3, 5}, kBool), 0.0, true),
                   "not both");
  KILN_CHECK_ERROR(F::scaled_dot_product_attention(q, k, v, {}, 1.0), "dropout_p in [0, 1)");
  Tensor x = q.clone().requires_grad_();
  Tensor out = F::scaled_dot_product_attention(x, k, v);
  Tensor gx = autograd::grad({out.pow(2).sum()}, {x}, {}, true, true)[0];
  KILN_CHECK_ERROR(autograd::grad({gx.sum()}, {x}), "second derivatives", "not supported");
}
