// nn modules and optimizers.
#include "test_util.h"

using namespace kiln;
using kiln::test::check_close;

TEST_CASE("Linear: shapes, default init bounds, parameters") {
  nn::Linear fc(1000, 100);
  CHECK(fc->weight.sizes() == Shape{100, 1000});
  CHECK(fc->bias.sizes() == Shape{100});
  double bound = 1 / std::sqrt(1000.0);
  CHECK(fc->weight.abs().max().item<float>() <= bound);
  CHECK(fc->weight.abs().max().item<float>() > 0.9 * bound);
  CHECK(fc->parameters().size() == 2);
  CHECK(fc->weight.requires_grad());
  CHECK(fc(ones({64, 1000})).sizes() == Shape{64, 100});
  KILN_CHECK_ERROR(fc(ones({64, 999})), "last dim 1000", "[64,999]", "nn_optim_test.cpp");
}

TEST_CASE("Sequential: named parameters, train/eval, repr") {
  nn::Sequential seq(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  auto named = seq->named_parameters();
  REQUIRE(named.size() == 4);
  CHECK(named[0].first == "0.weight");
  CHECK(named[3].first == "2.bias");
  CHECK(seq->children().size() == 3);
  seq->eval();
  CHECK(!seq->children()[0]->is_training());
  seq->train();
  CHECK(seq->children()[2]->is_training());
  CHECK(seq(ones({5, 4})).sizes() == Shape{5, 2});
  CHECK(seq->repr().find("(1): ReLU()") != std::string::npos);
}

namespace {
struct Net : nn::Module {
  nn::Linear fc1{4, 8}, fc2{8, 2};
  Net() : Module("Net") {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) { return fc2(fc1(x).relu()); }
};
}  // namespace

TEST_CASE("a user module registers its children") {
  Net net;
  CHECK(net.parameters().size() == 4);
  CHECK(net.named_parameters()[2].first == "fc2.weight");
  CHECK(net.forward(ones({3, 4})).sizes() == Shape{3, 2});
}

TEST_CASE("SGD with momentum and weight decay matches the formula") {
  Tensor p = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  std::vector<double> pv{1, 2}, buf{0, 0};
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    (p * p).sum().backward();
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = 2 * pv[i] + 0.01 * pv[i];
      buf[i] = 0.9 * buf[i] + g;
      pv[i] -= 0.1 * buf[i];
    }
  }
  check_close(p, from_vector(pv, {2}, kFloat64), 1e-12);
}

TEST_CASE("Adam matches the formula") {
  Tensor p = tensor({1.0, -3.0}, kFloat64).requires_grad_();
  optim::Adam opt({p}, optim::AdamOptions(0.01));
  std::vector<double> pv{1, -3}, m{0, 0}, v{0, 0};
  for (int t = 1; t <= 5; ++t) {
    opt.zero_grad();
    (p * p * p).sum().backward();
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = 3 * pv[i] * pv[i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
      pv[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  check_close(p, from_vector(pv, {2}, kFloat64), 1e-6);
}

TEST_CASE("Adam and AdamW with amsgrad equal PyTorch's, eager and traced") {
  // A target that jumps, so the second moment falls after step 2 and the
  // running maximum is what divides (torch.optim.Adam/AdamW(lr=0.1, amsgrad=True)).
  const std::vector<double> targets{0.0, 5.0, 0.0, 0.0};
  for (bool traced : {false, true})
    for (bool decoupled : {false, true}) {
      CAPTURE(traced);
      CAPTURE(decoupled);
      Tensor p = tensor({1.0, -2.0, 3.0}, kFloat64).requires_grad_();
      std::unique_ptr<optim::Optimizer> opt;
      if (decoupled)
        opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p},
                                             optim::AdamWOptions(0.1).amsgrad(true));
      else
        opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p},
                                            optim::AdamOptions(0.1).amsgrad(true));
      auto body = [&](Tensor t) {
        opt->zero_grad();
        (p - t).pow(2).sum().backward();
        opt->step();
        return p.detach();
      };
      auto step = jit(body, "amsgrad_step");
      for (double t : targets) {
        Tensor target = full({3}, t, kFloat64);
        traced ? step(target) : body(target);
      }
      const std::vector<double> want =
          decoupled
              ? std::vector<double>{0.9908978216537446, -1.6398004253263796, 2.766366013121193}
              : std::vector<double>{0.9946208927542407, -1.647170654293404, 2.7777167832855674};
      check_close(p, from_vector(want, {3}, kFloat64), 1e-12);
      CHECK(opt->state().size() == 1 + 3);  // step, m, v and the running maximum
    }
}

TEST_CASE("training reduces a loss") {
  manual_seed(0);
  Tensor x = randn({32, 4});
  Tensor y = x.matmul(tensor({1.f, -2.f, 0.5f, 3.f}).reshape({4, 1}));
  nn::Sequential model(nn::Linear(4, 16), nn::Tanh(), nn::Linear(16, 1));
  optim::Adam opt(model->parameters(), 0.05);
  nn::MSELoss loss_fn;
  float first = 0, last = 0;
  for (int i = 0; i < 200; ++i) {
    Tensor loss = loss_fn(model(x), y);
    if (i == 0) first = loss.item<float>();
    last = loss.item<float>();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  CHECK(last < 0.05 * first);
}

TEST_CASE("cross entropy") {
  Tensor logits = tensor({{2.f, 0.f, 0.f}, {0.f, 0.f, 3.f}});
  Tensor target = tensor({0, 2});
  float l0 = -std::log(std::exp(2.f) / (std::exp(2.f) + 2));
  float l1 = -std::log(std::exp(3.f) / (std::exp(3.f) + 2));
  CHECK(nn::CrossEntropyLoss()(logits, target).item<float>() == doctest::Approx((l0 + l1) / 2));
  CHECK(nn::functional::one_hot(target, 3).to_vector<bool>() ==
        std::vector<bool>{true, false, false, false, false, true});
}
