// libtorch spellings Kiln takes as they are: sizes().vec() and stride(d),
// devices from strings, eye(n, m), logspace, hardswish and hardsigmoid with
// PyTorch's gradients at their kinks, Embedding::from_pretrained, and
// BatchNorm's num_batches_tracked with momentum nullopt (a cumulative average),
// eagerly and traced.
#include <cmath>

#include "test_util.h"

namespace kiln {

using test::at_line;

TEST_CASE("sizes().vec(), strides().vec() and stride(d)") {
  Tensor x = zeros({2, 3, 4});
  std::vector<int64_t> s = x.sizes().vec(), st = x.strides().vec();
  CHECK(s == std::vector<int64_t>{2, 3, 4});
  CHECK(st == std::vector<int64_t>{12, 4, 1});
  CHECK(x.stride(0) == 12);
  CHECK(x.stride(-1) == 1);
  CHECK(x.transpose(0, 2).stride(0) == 1);
  KILN_CHECK_ERROR(x.stride(3), "dim 3 is out of range");
  // A Shape still is a vector: compared, copied and built from one.
  const Shape from_vec = std::vector<int64_t>{2, 3, 4};
  CHECK(from_vec == x.sizes());
  CHECK(x.sizes() == s);
}

TEST_CASE("devices from libtorch's strings") {
  CHECK(Device("cpu") == Device(kCPU));
  CHECK(Device("cuda") == Device(kCUDA, 0));
  CHECK(Device(std::string("cuda:3")) == Device(kCUDA, 3));
  CHECK(Device("cuda:3").str() == "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:128", "cuda:01", "CPU", ""}) {
    const std::string got = std::string("got \"") + bad + "\"";
    KILN_CHECK_ERROR(Device{std::string_view(bad)}, "Device: expected \"cpu\", \"cuda\" or",
                     got.c_str());
  }
  CHECK(Device::parse("cuda:0") == Device(kCUDA, 0));
  CHECK_FALSE(Device::parse("cuda").has_value());  // files name the index
}

TEST_CASE("eye(n, m) and logspace") {
  CHECK(equal(eye(2, 3), from_vector(std::vector<double>{1, 0, 0, 0, 1, 0}, {2, 3}, kFloat32)));
  CHECK(equal(eye(3, 1, kInt64), from_vector(std::vector<double>{1, 0, 0}, {3, 1}, kInt64)));
  CHECK(eye(0, 4).sizes() == Shape{0, 4});
  KILN_CHECK_ERROR(eye(2, -1), "eye(): expected n >= 0 and m >= 0, got 2 and -1");
  CHECK(equal(logspace(0, 2, 3), from_vector(std::vector<double>{1, 10, 100}, {3}, kFloat32)));
  CHECK(equal(logspace(0, 3, 4, 2.0, kFloat64),
              from_vector(std::vector<double>{1, 2, 4, 8}, {4}, kFloat64)));
  CHECK(logspace(1, 1, 1).item<float>() == 10.0f);
  CHECK(logspace(0, 1, 0).numel() == 0);
  // Traced, the same values.
  auto f = jit([](Tensor x) { return x + logspace(-1, 1, 5, 10.0, kFloat64); });
  CHECK(allclose(f(zeros({5}, kFloat64)), logspace(-1, 1, 5, 10.0, kFloat64), 1e-15, 0));
  KILN_CHECK_ERROR(logspace(0, 1, -1), "logspace(): number of steps must be non-negative");
}

TEST_CASE("hardswish and hardsigmoid: PyTorch's values and gradients, at the kinks too") {
  const std::vector<double> at = {-4, -3, -1.5, 0, 1.5, 3, 4};
  // PyTorch: hardswish(x) = x min(max(x + 3, 0), 6) / 6; its gradient 0 below
  // -3, x / 3 + 1/2 on [-3, 3], 1 above; hardsigmoid's gradient 1/6 strictly
  // inside (-3, 3) and 0 elsewhere.
  const std::vector<double> swish = {0, 0, -0.375, 0, 1.125, 3, 4};
  const std::vector<double> swish_grad = {0, -0.5, 0, 0.5, 1, 1.5, 1};
  const std::vector<double> sigm = {0, 0, 0.25, 0.5, 0.75, 1, 1};
  const std::vector<double> sigm_grad = {0, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0, 0};
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto run = [&](auto fn, const std::vector<double>& value, const std::vector<double>& grad) {
      Tensor x = from_vector(at, {7}, kFloat64).requires_grad_();
      auto step = [&](Tensor in) {
        Tensor y = fn(in);
        y.sum().backward();
        return y;
      };
      Tensor y = traced ? jit(step)(x) : step(x);
      CHECK(equal(y.detach(), from_vector(value, {7}, kFloat64)));
      CHECK(allclose(x.grad(), from_vector(grad, {7}, kFloat64), 1e-15, 1e-15));
    };
    run([](const Tensor& x) { return nn::functional::hardswish(x); }, swish, swish_grad);
    run([](const Tensor& x) { return nn::functional::hardsigmoid(x); }, sigm, sigm_grad);
  }
  // The modules, and finite differences away from the kinks.
  nn::Hardswish hs;
  nn::Hardsigmoid hsig;
  Tensor x0 = from_vector(std::vector<double>{-3.5, -2.2, -0.4, 0.9, 2.7, 3.3}, {6}, kFloat64);
  auto sum_of = [](auto& m) { return [&m](const Tensor& x) { return m(x).sum(); }; };
  CHECK(allclose(test::autograd_grad(sum_of(hs), x0), test::numeric_grad(sum_of(hs), x0), 1e-6, 1e-8));
  CHECK(allclose(test::autograd_grad(sum_of(hsig), x0), test::numeric_grad(sum_of(hsig), x0), 1e-6,
                 1e-8));
}

TEST_CASE("Embedding::from_pretrained keeps the table, frozen unless told") {
  Tensor table = arange(12, kFloat32).reshape({4, 3});
  auto frozen = nn::Embedding::from_pretrained(table);
  CHECK(frozen->weight.is_same(table));
  CHECK_FALSE(frozen->weight.requires_grad());
  CHECK(equal(frozen(from_vector(std::vector<double>{2, 0}, {2}, kInt64)),
              from_vector(std::vector<double>{6, 7, 8, 0, 1, 2}, {2, 3}, kFloat32)));
  auto trained = nn::Embedding::from_pretrained(
      table.clone(), nn::EmbeddingFromPretrainedOptions().freeze(false).padding_idx(1));
  CHECK(trained->weight.requires_grad());
  trained(from_vector(std::vector<double>{1, 3, 1}, {3}, kInt64)).sum().backward();
  // The padding row gets no gradient; it keeps its values (not zeroed).
  CHECK(equal(trained->weight.grad().sum(1),
              from_vector(std::vector<double>{0, 0, 0, 3}, {4}, kFloat32)));
  CHECK(trained->weight.select(0, 1).sum().item<float>() == 12);
  KILN_CHECK_ERROR(nn::Embedding::from_pretrained(zeros({3})), "expected embeddings [V, D]");
}

TEST_CASE("BatchNorm counts its batches; momentum nullopt averages them all") {
  manual_seed(2);
  const std::vector<Tensor> batches = {randn({6, 3}), randn({6, 3}).mul(Scalar(2)),
                                       randn({6, 3}).add(Scalar(1))};
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    nn::BatchNorm1d bn(nn::BatchNormOptions(3).momentum(std::nullopt));
    CHECK(bn->num_batches_tracked.dtype() == kInt64);
    CHECK(bn->num_batches_tracked.dim() == 0);
    auto step = [&](Tensor x) { return bn(x); };
    auto compiled = jit(step);
    for (const Tensor& b : batches) (void)(traced ? compiled(b) : step(b));
    CHECK(bn->num_batches_tracked.item<int64_t>() == 3);
    // The cumulative average of the batches' means and unbiased variances.
    Tensor mean = zeros({3}), var = zeros({3});
    for (const Tensor& b : batches) {
      mean = mean.add(b.mean(0));
      var = var.add(b.var(0));
    }
    CHECK(allclose(bn->running_mean, mean.div(Scalar(3)), 1e-5, 1e-6));
    CHECK(allclose(bn->running_var, var.div(Scalar(3)), 1e-5, 1e-6));
    // Evaluation leaves the count alone.
    bn->eval();
    (void)bn(batches[0]);
    CHECK(bn->num_batches_tracked.item<int64_t>() == 3);
  }
  // With a momentum the count still runs; the buffer is in the state.
  nn::BatchNorm2d bn2(nn::BatchNormOptions(2).momentum(0.5));
  (void)bn2(randn({2, 2, 3, 3}));
  (void)bn2(randn({2, 2, 3, 3}));
  CHECK(bn2->num_batches_tracked.item<int64_t>() == 2);
  bool listed = false;
  for (const auto& [name, t] : bn2->named_buffers()) listed |= name == "num_batches_tracked";
  CHECK(listed);
  CHECK(bn2->repr() == "BatchNorm2d(2, eps=1e-05, momentum=0.5)");
  nn::BatchNorm1d cumulative(nn::BatchNormOptions(4).momentum(std::nullopt));
  CHECK(cumulative->repr() == "BatchNorm1d(4, eps=1e-05, momentum=None)");
  // Without running statistics there is no counter.
  nn::BatchNorm1d plain(nn::BatchNormOptions(4).track_running_stats(false));
  CHECK_FALSE(plain->num_batches_tracked.defined());
}

}  // namespace kiln

namespace kiln {

TEST_CASE("optimizers take parameters that do not require grad, and leave them alone") {
  // A frozen first layer among the model's parameters, as a fine-tuning
  // program passes them; eager and traced steps alike, then unfrozen.
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    manual_seed(4);
    nn::Linear frozen(3, 4), head(4, 2);
    frozen->weight.requires_grad_(false);
    frozen->bias.requires_grad_(false);
    std::vector<Tensor> params = frozen->parameters();
    for (const Tensor& p : head->parameters()) params.push_back(p);
    optim::Adam opt(params, optim::AdamOptions(0.1));
    const Tensor x = randn({5, 3}), before = frozen->weight.clone();
    auto step = [&](Tensor in) {
      opt.zero_grad();
      Tensor loss = head(frozen(in).relu()).square().mean();
      loss.backward();
      opt.step();
      return loss;
    };
    auto compiled = jit(step);
    const Tensor head_before = head->weight.clone();
    for (int i = 0; i < 3; ++i) (void)(traced ? compiled(x) : step(x));
    CHECK(equal(frozen->weight, before));
    CHECK_FALSE(frozen->weight.grad().defined());
    CHECK_FALSE(equal(head->weight, head_before));
  }
  // The same run both ways, unfrozen half way: the same values.
  std::vector<Tensor> result;
  for (bool traced : {false, true}) {
    manual_seed(5);
    nn::Linear frozen(3, 4), head(4, 2);
    frozen->weight.requires_grad_(false);
    std::vector<Tensor> params = frozen->parameters();
    for (const Tensor& p : head->parameters()) params.push_back(p);
    optim::SGD opt(params, optim::SGDOptions(0.1).momentum(0.9));
    const Tensor x = randn({5, 3});
    auto step = [&](Tensor in) {
      opt.zero_grad();
      Tensor loss = head(frozen(in).tanh()).square().mean();
      loss.backward();
      opt.step();
      return loss;
    };
    auto compiled = jit(step);
    for (int i = 0; i < 4; ++i) {
      if (i == 2) frozen->weight.requires_grad_(true);
      (void)(traced ? compiled(x) : step(x));
    }
    result.push_back(frozen->weight.clone());
  }
  CHECK(allclose(result[0], result[1], 1e-6, 1e-7));
  KILN_CHECK_ERROR(optim::Adam({Tensor()}, optim::AdamOptions(0.1)), "undefined tensor");
}

}  // namespace kiln
