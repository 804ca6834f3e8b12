// Compiled training: backward() inside a trace, whole training steps as one
// plan with in-place parameter updates, traced functions differentiated from
// eager code, second derivatives, custom functions inside traces.
#include "test_util.h"

#include "frontend/settings.h"

#include <unistd.h>
#include <filesystem>
#include <fstream>

using namespace kiln;
using kiln::test::check_close;

namespace {

struct Sigmoid2 : autograd::Function<Sigmoid2> {
  static Tensor forward(autograd::Context* ctx, Tensor x) {
    Tensor y = 1 / (1 + (-x).exp());
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(autograd::Context* ctx, std::vector<Tensor> g) {
    Tensor y = ctx->get_saved_variables()[0];
    return {g[0] * y * (1 - y)};
  }
};

// The summary.txt that f.dump writes for these arguments.
template <class F, class... A>
std::string dumped_summary(const F& f, const std::string& tag, const A&... args) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (tag + std::to_string(::getpid()));
  f.dump(dir.string(), args...);
  std::string summary;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "summary.txt") {
      std::ifstream in(e.path());
      summary.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  fs::remove_all(dir);
  return summary;
}

}  // namespace

TEST_CASE("backward() inside a trace gives the eager gradients") {
  manual_seed(1);
  Tensor x = randn({4, 3}, kFloat64);
  Tensor w = randn({3, 2}, kFloat64).requires_grad_();
  Tensor b = randn({2}, kFloat64).requires_grad_();
  auto loss_fn = [&](const Tensor& in) { return (in.matmul(w) + b).tanh().pow(2).sum(); };

  loss_fn(x).backward();
  Tensor gw = w.grad().clone(), gb = b.grad().clone();
  w.set_grad(Tensor());
  b.set_grad(Tensor());

  auto step = jit([&](Tensor in) {
    Tensor l = loss_fn(in);
    l.backward();
    return l;
  });
  Tensor l = step(x);
  check_close(l, loss_fn(x).detach(), 1e-12);
  REQUIRE(w.grad().defined());
  check_close(w.grad(), gw, 1e-10);
  check_close(b.grad(), gb, 1e-10);
  // A second call accumulates, as eager backward() does (one retrace: .grad now exists).
  step(x);
  check_close(w.grad(), gw * 2, 1e-10);
  CHECK(step.stats().misses == 2);
  step(x);
  check_close(w.grad(), gw * 3, 1e-10);
  CHECK(step.stats().misses == 2);
}

TEST_CASE("the two-layer net trains traced exactly as eager, 500 steps") {
  constexpr int64_t N = 64, D_in = 1000, H = 100, D_out = 10;
  manual_seed(0);
  Tensor x = randn({N, D_in}), y = randn({N, D_out});
  Tensor w1_init = randn({D_in, H}), w2_init = randn({H, D_out});
  const double lr = 1e-6;

  auto train = [&](bool traced) {
    Tensor w1 = w1_init.clone().requires_grad_(), w2 = w2_init.clone().requires_grad_();
    auto step = [&](Tensor in, Tensor target) {
      Tensor loss = (in.mm(w1).clamp_min(0).mm(w2) - target).pow(2).sum();
      loss.backward();
      {
        NoGradGuard no_grad;
        w1 -= lr * w1.grad();
        w2 -= lr * w2.grad();
        w1.grad().zero_();
        w2.grad().zero_();
      }
      return loss;
    };
    auto compiled = jit(step, "two_layer_step");
    std::vector<float> losses;
    const void* w1_data = w1.data_ptr<float>();
    for (int t = 0; t < 500; ++t)
      losses.push_back((traced ? compiled(x, y) : step(x, y)).item<float>());
    if (traced) {
      CHECK(w1.data_ptr<float>() == w1_data);  // updated in place
      CHECK(compiled.stats().misses <= 2);
    }
    return losses;
  };
  std::vector<float> eager = train(false), traced = train(true);
  for (size_t t = 0; t < eager.size(); ++t)
    CHECK_MESSAGE(std::abs(eager[t] - traced[t]) <= 1e-3f * std::abs(eager[t]) + 1e-3f, "step ", t,
                  ": eager ", eager[t], " traced ", traced[t]);
  CHECK(traced.back() < 1e-2f * traced.front());
}

// Over many steps, eager and traced training drift apart chaotically: f32 sums
// in another order move a pre-activation within rounding of zero to the other
// side of a ReLU, and Adam's normalised update turns that one sample's
// difference into a step of nearly lr (the digits MLP on a Zen 3: 4e-8 after 28
// steps, 2e-4 at step 29). So each traced step here starts from the eager
// run's state (parameters, Adam's moments and step count, the generator) and
// must land where the eager step lands.
TEST_CASE("an MLP with dropout and Adam: each traced step lands where the eager step does") {
  manual_seed(3);
  auto make = [] {
    return nn::Sequential(nn::Linear(64, 128), nn::ReLU(), nn::Dropout(0.1), nn::Linear(128, 10));
  };
  nn::Sequential eager_model = make(), traced_model = make();
  optim::Adam eager_opt(eager_model->parameters(), 2e-3),
      traced_opt(traced_model->parameters(), 2e-3);
  auto step_of = [](nn::Sequential& m, optim::Adam& opt) {
    return [&m, &opt](Tensor x, Tensor labels) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy(m(x), labels);
      loss.backward();
      opt.step();
      return loss;
    };
  };
  auto eager_step = step_of(eager_model, eager_opt);
  auto traced_step = jit(step_of(traced_model, traced_opt), "lockstep_mlp");
  // Digits-like inputs: pixels in [0, 1], a third of them exactly zero.
  Tensor pixels = rand({640, 64}), labels = (rand({640}) * 10).to(kInt64);
  pixels = where(pixels > 0.33, pixels, zeros({1}));
  auto copy_into = [](std::vector<Tensor> to, const std::vector<Tensor>& from) {
    NoGradGuard no_grad;
    REQUIRE(to.size() == from.size());
    for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
  };
  for (int t = 0; t < 30; ++t) {
    copy_into(traced_model->parameters(), eager_model->parameters());
    if (t > 0) copy_into(traced_opt.state(), eager_opt.state());  // made by the first step
    Tensor x = pixels.narrow(0, (t % 10) * 64, 64), y = labels.narrow(0, (t % 10) * 64, 64);
    const Tensor rng = get_rng_state();
    const double eager_loss = eager_step(x, y).item<double>();
    set_rng_state(rng);
    const double traced_loss = traced_step(x, y).item<double>();
    CHECK(traced_loss == doctest::Approx(eager_loss).epsilon(1e-6));
    const std::vector<Tensor> pe = eager_model->parameters(), pt = traced_model->parameters();
    // Within a hundredth of a step (lr): a gradient near Adam's eps is divided by
    // about eps, so its rounding differences move the update by ~1e-6 here; an
    // update missed or applied twice is a whole step.
    for (size_t i = 0; i < pe.size(); ++i)
      CHECK_MESSAGE((pe[i] - pt[i]).abs().max().item<double>() < 2e-5, "step ", t, ", parameter ",
                    i);
  }
  CHECK(traced_step.stats().misses <= 2);  // the first step makes Adam's state: one retrace
}

TEST_CASE("nn + SGD with momentum, zero_grad and step inside a trace") {
  manual_seed(2);
  Tensor x = randn({32, 8}), y = randn({32, 1});
  auto run = [&](bool traced) {
    manual_seed(5);
    nn::Sequential model(nn::Linear(8, 16), nn::Tanh(), nn::Linear(16, 1));
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    nn::MSELoss loss_fn;
    auto step = [&](Tensor in, Tensor target) {
      opt.zero_grad();
      Tensor loss = loss_fn(model(in), target);
      loss.backward();
      opt.step();
      return loss;
    };
    auto compiled = jit(step, "sgd_step");
    std::vector<float> losses;
    for (int t = 0; t < 100; ++t)
      losses.push_back((traced ? compiled(x, y) : step(x, y)).item<float>());
    return losses;
  };
  auto eager = run(false), traced = run(true);
  for (size_t t = 0; t < eager.size(); ++t)
    CHECK(traced[t] == doctest::Approx(eager[t]).epsilon(1e-4));
}

TEST_CASE("a traced function called from eager code differentiates through a compiled backward") {
  manual_seed(3);
  Tensor w = randn({5, 3}, kFloat64).requires_grad_();
  auto f = jit([&](Tensor x) { return (x.matmul(w).sigmoid() * x.sum(1, true)).sum(); });
  Tensor x = randn({4, 5}, kFloat64).requires_grad_();
  Tensor out = f(x);
  CHECK(out.requires_grad());
  out.backward();
  Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  (x.matmul(w).sigmoid() * x.sum(1, true)).sum().backward();
  check_close(gx, x.grad(), 1e-10);
  check_close(gw, w.grad(), 1e-10);
  CHECK(f.stats().eager_calls == 0);
}

TEST_CASE("second derivatives compile: a Hessian-vector product of a small MLP") {
  manual_seed(4);
  Tensor w1 = randn({3, 4}, kFloat64), w2 = randn({4, 1}, kFloat64);
  Tensor x = randn({6, 3}, kFloat64), v = randn({3, 4}, kFloat64);
  auto hvp = [&](Tensor w) {
    Tensor loss = x.matmul(w).tanh().matmul(w2).pow(2).sum();
    Tensor g = autograd::grad({loss}, {w}, {}, true, /*create_graph=*/true)[0];
    return autograd::grad({(g * v).sum()}, {w})[0];
  };
  Tensor eager = hvp(w1.clone().requires_grad_());
  auto compiled = jit([&](Tensor w) { return hvp(w); });
  Tensor traced = compiled(w1.clone().requires_grad_());
  check_close(traced, eager, 1e-9, 1e-10);
  // Against finite differences of the gradient along v.
  auto grad_at = [&](const Tensor& w) {
    Tensor wr = w.clone().requires_grad_();
    x.matmul(wr).tanh().matmul(w2).pow(2).sum().backward();
    return wr.grad();
  };
  double eps = 1e-6;
  Tensor fd = (grad_at(w1 + eps * v) - grad_at(w1 - eps * v)) / (2 * eps);
  check_close(traced, fd, 1e-5, 1e-6);
}

TEST_CASE("a custom function inside a trace uses its own backward") {
  manual_seed(6);
  Tensor w = randn({4, 3}, kFloat64).requires_grad_();
  Tensor x = randn({5, 4}, kFloat64);
  auto step = jit([&](Tensor in) {
    Tensor l = Sigmoid2::apply(in.matmul(w)).sum();
    l.backward();
    return l;
  });
  step(x);
  Tensor traced = w.grad().clone();
  w.set_grad(Tensor());
  Sigmoid2::apply(x.matmul(w)).sum().backward();
  check_close(traced, w.grad(), 1e-10);
}

namespace {
// A deliberately "wrong" backward (twice the true derivative) shows whose rule ran.
struct SquareTwiceGrad : autograd::Function<SquareTwiceGrad> {
  static Tensor forward(autograd::Context* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static std::vector<Tensor> backward(autograd::Context* ctx, std::vector<Tensor> g) {
    return {g[0] * 4 * ctx->get_saved_variables()[0]};
  }
};
}  // namespace

TEST_CASE("a traced custom function's gradient comes from the user's backward") {
  Tensor w = tensor({1.0, -2.0, 3.0}, kFloat64).requires_grad_();
  auto g = jit([&](Tensor) {
    Tensor l = SquareTwiceGrad::apply(w).sum();
    l.backward();
    return l;
  });
  CHECK(g(tensor({0.0}, kFloat64)).item<double>() == 14);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{4, -8, 12});
}

TEST_CASE(
    "an MLP (784-1024-1024-10, batch 256, cross-entropy, Adam) trains traced as eager, 500 steps") {
  manual_seed(7);
  Tensor x = randn({256, 784});
  Tensor labels = (rand({256}) * 10).to(kInt64);
  auto run = [&](bool traced) {
    manual_seed(8);
    nn::Sequential model(nn::Linear(784, 1024), nn::ReLU(), nn::Linear(1024, 1024), nn::ReLU(),
                         nn::Linear(1024, 10));
    optim::Adam opt(model->parameters(), 1e-3);
    nn::CrossEntropyLoss loss_fn;
    auto step = [&](Tensor in, Tensor target) {
      opt.zero_grad();
      Tensor loss = loss_fn(model(in), target);
      loss.backward();
      opt.step();
      return loss;
    };
    auto compiled = jit(step, "mlp_adam_step");
    std::vector<float> losses;
    for (int t = 0; t < 500; ++t)
      losses.push_back((traced ? compiled(x, labels) : step(x, labels)).item<float>());
    if (traced) CHECK(compiled.stats().eager_calls == 0);
    return losses;
  };
  auto eager = run(false), traced = run(true);
  float worst = 0;
  for (size_t t = 0; t < eager.size(); ++t)
    worst = std::max(worst, std::abs(eager[t] - traced[t]) / std::max(std::abs(eager[t]), 1e-3f));
  CHECK_MESSAGE(worst < 2e-3f, "largest relative difference between the loss curves: ", worst);
  CHECK(traced.back() < 0.1f * traced.front());
}

TEST_CASE(
    "merged plan steps (epilogues per block of rows, Adam inside the weight gradients' products) "
    "train as unmerged ones") {
  // Large enough that the products split over threads, each block's epilogue on its own.
  manual_seed(21);
  Tensor x = randn({128, 96});
  Tensor labels = (rand({128}) * 10).to(kInt64);
  auto run = [&](bool merge, std::string* summary) {
    test::ScopedValue<bool> merged(settings().merge_steps, merge);
    manual_seed(22);
    nn::Sequential model(nn::Linear(96, 256), nn::ReLU(), nn::Linear(256, 192), nn::ReLU(),
                         nn::Linear(192, 10));
    optim::Adam opt(model->parameters(), 1e-3);
    auto step = jit(
        [&](Tensor in, Tensor target) {
          opt.zero_grad();
          Tensor loss = nn::functional::cross_entropy(model(in), target);
          loss.backward();
          opt.step();
          return loss;
        },
        merge ? "adam_merged" : "adam_apart");
    for (int t = 0; t < 5; ++t) step(x, labels);
    if (summary) *summary = dumped_summary(step, "kiln_merge_", x, labels);
    std::vector<Tensor> params;
    for (const Tensor& p : model->parameters()) params.push_back(p.detach().clone());
    return params;
  };
  std::string merged_summary, apart_summary;
  std::vector<Tensor> merged = run(true, &merged_summary), apart = run(false, &apart_summary);
  REQUIRE(merged.size() == apart.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    CAPTURE(i);
    CHECK(merged[i].to_vector<float>() == apart[i].to_vector<float>());
  }
  // The weights' Adam updates are the epilogues of their gradients' products
  // (each gradient kept in `.grad` too): inside the BLAS step merged, a step after
  // it apart; so are the forward's bias and ReLU. No weight's update is a step of
  // its own.
  auto count = [](const std::string& text, const std::string& piece) {
    size_t n = 0;
    for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++n;
    return n;
  };
  CHECK(count(merged_summary, "_matmul_mul_add (matmul)") == 3);
  CHECK(count(merged_summary, "_gemm (matmul)") == 0);
  CHECK(count(apart_summary, "_matmul_mul_add_gemm (matmul)") == 3);
  CHECK(count(apart_summary, "_add_relu_gemm") == 2);
  CHECK(count(merged_summary, "elementwise_mul_add_sqrt") == 0);
}

TEST_CASE("traced softmax cross-entropy gradients equal finite differences") {
  manual_seed(9);
  Tensor x = randn({6, 5}, kFloat64);
  Tensor labels = tensor({0, 3, 2, 1, 3, 0});  // 4 classes: indices 0..3
  Tensor w0 = randn({5, 4}, kFloat64);
  Tensor w = w0.clone().requires_grad_();
  auto step = jit([&](Tensor in) {
    Tensor l = nn::functional::cross_entropy(in.matmul(w), labels);
    l.backward();
    return l;
  });
  step(x);
  auto loss_at = [&](const Tensor& wv) {
    return nn::functional::cross_entropy(x.matmul(wv), labels);
  };
  check_close(w.grad(), test::numeric_grad(loss_at, w0), 1e-6, 1e-8);
}

TEST_CASE("an SGD update of a matmul's weight is one BLAS call accumulating into the weight") {
  manual_seed(11);
  Tensor x = randn({16, 8}), y = randn({16, 4});
  Tensor w_init = randn({8, 4});
  auto run = [&](bool traced, std::string* summary) {
    Tensor w = w_init.clone().requires_grad_();
    auto step = [&](Tensor in, Tensor target) {
      w.set_grad(Tensor());
      Tensor loss = (in.matmul(w) - target).pow(2).sum();
      loss.backward();
      NoGradGuard no_grad;
      w -= 0.01 * w.grad();
      w.set_grad(Tensor());
      return loss;
    };
    auto compiled = jit(step, "sgd_accumulate");
    for (int t = 0; t < 5; ++t) traced ? compiled(x, y) : step(x, y);
    if (summary) *summary = dumped_summary(compiled, "kiln_acc_", x, y);
    return w.detach().clone();
  };
  std::string summary;
  Tensor eager = run(false, nullptr), traced = run(true, &summary);
  check_close(traced, eager, 1e-5, 1e-6);
  CHECK(summary.find("matmul_accumulate") != std::string::npos);
}

TEST_CASE("a gradient a plan left zero is a constant until something writes it") {
  manual_seed(12);
  Tensor x = randn({8, 5}), y = randn({8, 3});
  Tensor w_init = randn({5, 3});
  auto run = [&](bool traced, std::vector<std::string>* reasons) {
    Tensor w = w_init.clone().requires_grad_();
    auto step = [&](Tensor in, Tensor target) {
      Tensor loss = (in.matmul(w) - target).pow(2).sum();
      loss.backward();
      NoGradGuard no_grad;
      w -= 0.01 * w.grad();
      w.grad().zero_();
      return loss;
    };
    auto compiled = jit(step, "zero_grad_step");
    for (int t = 0; t < 6; ++t) {
      if (t == 4) {
        NoGradGuard no_grad;
        w.grad().add_(1.0);  // an eager write the next compiled call must see
      }
      traced ? compiled(x, y) : step(x, y);
    }
    if (reasons) *reasons = compiled.stats().miss_reasons;
    return w.detach().clone();
  };
  std::vector<std::string> reasons;
  Tensor eager = run(false, nullptr), traced = run(true, &reasons);
  check_close(traced, eager, 1e-5, 1e-6);
  bool saw = false;
  for (auto& r : reasons) saw = saw || r.find("written since") != std::string::npos;
  CHECK(saw);
}
