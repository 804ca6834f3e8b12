// The layers of real models as modules: a traced step updates batch norm's
// running statistics as eager mode does; train()/eval() retraces; dropout in a
// compiled function draws fresh masks every call, the same stream as eagerly.
#include <doctest/doctest.h>

#include <kiln/kiln.h>

using namespace kiln;

namespace {

double max_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST_CASE("BatchNorm2d: running statistics, traced equals eager; eval() retraces") {
  manual_seed(3);
  Tensor x = randn({4, 3, 5, 5});
  nn::BatchNorm2d eager_bn(3), traced_bn(3);
  auto f = jit([&](Tensor in) { return traced_bn(in).sum(); });
  for (int i = 0; i < 3; ++i) {
    Tensor want = eager_bn(x * (i + 1)).sum();
    Tensor got = f(x * (i + 1));
    CHECK(std::abs(got.item<double>() - want.item<double>()) < 1e-3);
  }
  CHECK(max_diff(traced_bn->running_mean, eager_bn->running_mean) < 1e-6);
  CHECK(max_diff(traced_bn->running_var, eager_bn->running_var) < 1e-5);
  CHECK(traced_bn->named_buffers().size() == 3);  // running_mean, running_var, num_batches_tracked
  CHECK(traced_bn->num_batches_tracked.item<int64_t>() == 3);
  CHECK(eager_bn->num_batches_tracked.item<int64_t>() == 3);
  const int64_t misses = f.stats().misses;
  traced_bn->eval();
  eager_bn->eval();
  Tensor before = traced_bn->running_mean.clone();
  CHECK(std::abs(f(x).item<double>() - eager_bn(x).sum().item<double>()) < 1e-3);
  CHECK(f.stats().misses == misses + 1);  // the mode is part of the plan's guard
  CHECK(max_diff(traced_bn->running_mean, before) == 0);  // eval: statistics untouched
}

TEST_CASE("dropout in a compiled function: fresh masks per call, the eager stream") {
  Tensor x = ones({1000});
  auto f = jit([](Tensor in) { return nn::functional::dropout(in, 0.5, true); });
  manual_seed(11);
  Tensor a = f(x), b = f(x);
  CHECK(max_diff(a, b) > 0);  // the offset advanced between calls
  const double kept = a.ne(0).to(kFloat64).mean().item<double>();
  CHECK(kept > 0.45);
  CHECK(kept < 0.55);
  CHECK(max_diff(a.masked_fill(a.eq(0), 2.0), a.masked_fill(a.eq(0), 2.0)) == 0);
  manual_seed(11);
  Tensor ea = nn::functional::dropout(x, 0.5, true), eb = nn::functional::dropout(x, 0.5, true);
  CHECK(max_diff(a, ea) == 0);  // traced draws are eager mode's draws
  CHECK(max_diff(b, eb) == 0);
}

TEST_CASE("embedding, layer norm and the new losses reject bad input clearly") {
  Tensor w = randn({5, 3});
  CHECK_THROWS_WITH_AS(nn::functional::embedding(tensor({1, 7}), w),
                       doctest::Contains("embedding: index 7 is out of range for size 5"), Error);
  CHECK_THROWS_WITH_AS(nn::functional::layer_norm(randn({2, 4}), {3}),
                       doctest::Contains("not the trailing shape"), Error);
  CHECK_THROWS_WITH_AS(cat({randn({2, 3}), randn({3, 2})}, 0), doctest::Contains("except in dim 0"),
                       Error);
  CHECK_THROWS_WITH_AS(randint(3, 3, {2}), doctest::Contains("expected low < high"), Error);
  CHECK_THROWS_WITH_AS(nn::Dropout(1.5), doctest::Contains("probability"), Error);
}
