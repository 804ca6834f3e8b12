// AdamW, RMSprop, learning-rate schedulers and gradient clipping: each against
// its formula (torch.optim's), and inside traced training steps, where the
// plan's parameters and optimizer state must equal eager mode's, a new
// learning rate needs no retrace and another changed hyperparameter retraces.
#include "test_util.h"

using namespace kiln;
using kiln::test::check_close;

TEST_CASE("AdamW: decoupled weight decay, then Adam's update, as the formula") {
  Tensor p = tensor({1.0, -3.0}, kFloat64).requires_grad_();
  optim::AdamW opt({p}, optim::AdamWOptions(0.01).weight_decay(0.1));
  std::vector<double> pv{1, -3}, m{0, 0}, v{0, 0};
  for (int t = 1; t <= 5; ++t) {
    opt.zero_grad();
    (p * p * p).sum().backward();
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = 3 * pv[i] * pv[i];
      pv[i] *= 1 - 0.01 * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
      pv[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  check_close(p, from_vector(pv, {2}, kFloat64), 1e-9);
  CHECK(optim::AdamWOptions().weight_decay_ == 0.01);  // torch.optim.AdamW's default
}

TEST_CASE("RMSprop, plain and centered with momentum and weight decay, as the formula") {
  for (bool centered : {false, true}) {
    CAPTURE(centered);
    const double lr = 0.01, alpha = 0.9, eps = 1e-8, wd = centered ? 0.05 : 0;
    const double mom = centered ? 0.5 : 0;
    Tensor p = tensor({1.0, -2.0, 0.5}, kFloat64).requires_grad_();
    optim::RMSprop opt({p}, optim::RMSpropOptions(lr).alpha(alpha).weight_decay(wd).momentum(mom)
                                .centered(centered));
    std::vector<double> pv{1, -2, 0.5}, sq(3, 0), ga(3, 0), buf(3, 0);
    for (int t = 1; t <= 6; ++t) {
      opt.zero_grad();
      (p * p * p).sum().backward();
      opt.step();
      for (int i = 0; i < 3; ++i) {
        double g = 3 * pv[i] * pv[i] + wd * pv[i];
        sq[i] = alpha * sq[i] + (1 - alpha) * g * g;
        double avg = std::sqrt(sq[i]) + eps;
        if (centered) {
          ga[i] = alpha * ga[i] + (1 - alpha) * g;
          avg = std::sqrt(sq[i] - ga[i] * ga[i]) + eps;
        }
        if (mom != 0) {
          buf[i] = mom * buf[i] + g / avg;
          pv[i] -= lr * buf[i];
        } else {
          pv[i] -= lr * g / avg;
        }
      }
    }
    check_close(p, from_vector(pv, {3}, kFloat64), 1e-9);
    CHECK(opt.state().size() == (centered ? 3u : 1u));
  }
}

TEST_CASE("StepLR and CosineAnnealingLR set the learning rate of each epoch") {
  Tensor p = zeros({2}).requires_grad_();
  optim::SGD sgd({p}, 0.1);
  optim::StepLR step_lr(sgd, 2, 0.5);
  std::vector<double> got{sgd.lr()};
  for (int e = 0; e < 5; ++e) {
    step_lr.step();
    got.push_back(sgd.lr());
  }
  std::vector<double> want{0.1, 0.1, 0.05, 0.05, 0.025, 0.025};
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-15));

  optim::Adam adam({p}, 1.0);
  optim::CosineAnnealingLR cos(adam, 4, 0.1);
  std::vector<double> cosine{adam.lr()};
  for (int e = 0; e < 4; ++e) {
    cos.step();
    cosine.push_back(adam.lr());
  }
  // eta_min + (1 - eta_min) (1 + cos(pi e / 4)) / 2
  std::vector<double> want_cos{1.0, 0.86819805153394639, 0.55, 0.23180194846605361, 0.1};
  for (size_t i = 0; i < want_cos.size(); ++i)
    CHECK(cosine[i] == doctest::Approx(want_cos[i]).epsilon(1e-12));
  CHECK(cos.last_epoch() == 4);

  KILN_CHECK_ERROR(optim::StepLR(sgd, 0), "StepLR: step_size must be positive");
  KILN_CHECK_ERROR(sgd.set_lr(-1), "SGD: learning rate must be a finite number >= 0");
}

TEST_CASE("clip_grad_norm_ scales the gradients to the norm asked for and returns the total") {
  Tensor a = zeros({2}, kFloat64).requires_grad_(), b = zeros({1}, kFloat64).requires_grad_();
  a.set_grad(tensor({3.0, 4.0}, kFloat64));
  b.set_grad(tensor({12.0}, kFloat64));
  Tensor total = nn::utils::clip_grad_norm_({a, b}, 1.3);
  CHECK(total.item<double>() == doctest::Approx(13.0));
  check_close(a.grad(), tensor({0.3, 0.4}, kFloat64), 1e-6);
  check_close(b.grad(), tensor({1.2}, kFloat64), 1e-6);
  // A norm already under the bound is left alone; the inf-norm is the largest magnitude.
  a.set_grad(tensor({0.3, -0.4}, kFloat64));
  CHECK(nn::utils::clip_grad_norm_({a}, 10.0, INFINITY).item<double>() == doctest::Approx(0.4));
  check_close(a.grad(), tensor({0.3, -0.4}, kFloat64), 1e-12);
  // The 1-norm.
  CHECK(nn::utils::clip_grad_norm_({a}, 0.35, 1.0).item<double>() == doctest::Approx(0.7));
  check_close(a.grad(), tensor({0.15, -0.2}, kFloat64), 1e-6);
  KILN_CHECK_ERROR(nn::utils::clip_grad_norm_({a}, 1.0, 0.0), "clip_grad_norm_: expected max_norm >= 0 and norm_type > 0");
}

namespace {

// An MLP trained for `steps` steps by `make_opt`'s optimizer, eagerly or traced,
// clipping gradients and stepping a scheduler every `epoch` steps; returns
// the losses, then every parameter and optimizer state value. Traced runs
// compile fused, or one kernel per op (`fused` false).
template <class MakeOpt>
std::vector<double> train(bool traced, MakeOpt make_opt, int steps, bool schedule,
                          TraceStats* stats = nullptr, bool fused = true) {
  manual_seed(3);
  Tensor x = randn({16, 6}), y = randn({16, 2});
  manual_seed(4);
  nn::Sequential model(nn::Linear(6, 12), nn::Tanh(), nn::Linear(12, 2));
  auto opt = make_opt(model->parameters());
  optim::StepLR sched(*opt, 1, 0.7);
  nn::MSELoss loss_fn;
  auto step = [&](Tensor in, Tensor target) {
    opt->zero_grad();
    Tensor loss = loss_fn(model(in), target);
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 0.5);
    opt->step();
    return loss;
  };
  auto compiled = jit(step, "optim_step");
  compiled.set_fusion(fused);
  std::vector<double> out;
  for (int t = 0; t < steps; ++t) {
    const Tensor loss = traced ? compiled(x, y) : step(x, y);
    out.push_back(loss.item<float>());
    if (schedule && t % 3 == 2) sched.step();
  }
  for (const Tensor& p : model->parameters())
    for (double v : p.to(kFloat64).contiguous().view({-1}).to_vector<double>()) out.push_back(v);
  for (const Tensor& s : opt->state())
    for (double v : s.to(kFloat64).contiguous().view({-1}).to_vector<double>()) out.push_back(v);
  if (stats) *stats = compiled.stats();
  return out;
}

void check_same(const std::vector<double>& eager, const std::vector<double>& traced) {
  REQUIRE(eager.size() == traced.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    CAPTURE(i);
    // f32 rounding, amplified where centered RMSprop subtracts nearly equal averages.
    CHECK(traced[i] == doctest::Approx(eager[i]).epsilon(1e-3).scale(1e-6));
  }
}

}  // namespace

TEST_CASE("AdamW and RMSprop steps with gradient clipping train traced as eager") {
  auto adamw = [](std::vector<Tensor> ps) {
    return std::make_unique<optim::AdamW>(std::move(ps), optim::AdamWOptions(0.01).weight_decay(0.05));
  };
  auto rmsprop = [](std::vector<Tensor> ps) {
    return std::make_unique<optim::RMSprop>(
        std::move(ps), optim::RMSpropOptions(0.005).momentum(0.5).centered(true).weight_decay(0.01));
  };
  TraceStats s;
  // Two traces each: the first call, then the call that finds the .grads defined.
  check_same(train(false, adamw, 12, false), train(true, adamw, 12, false, &s));
  CHECK(s.misses == 2);
  check_same(train(false, rmsprop, 12, false), train(true, rmsprop, 12, false, &s));
  CHECK(s.misses == 2);
  // And compiled unfused, one kernel per op.
  check_same(train(false, adamw, 12, false), train(true, adamw, 12, false, nullptr, false));
  check_same(train(false, rmsprop, 12, false), train(true, rmsprop, 12, false, nullptr, false));
}

TEST_CASE("a scheduler's new learning rate needs no retrace, and the step equals eager") {
  auto adam = [](std::vector<Tensor> ps) { return std::make_unique<optim::Adam>(std::move(ps), 0.02); };
  TraceStats s;
  const std::vector<double> eager = train(false, adam, 10, true);
  const std::vector<double> traced = train(true, adam, 10, true, &s);
  check_same(eager, traced);
  // The first call, then the call that finds the .grads defined; the epochs at
  // lr 0.014, 0.0098, 0.00686 reuse the second plan.
  CHECK(s.misses == 2);
}

// Params and optimizer state after `steps` SGD-with-momentum steps of a tiny
// model, the scheduler stepped after every step; with the traced step's stats.
using MakeScheduler = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

std::vector<double> scheduled_sgd(bool traced, const MakeScheduler& make_sched, int steps,
                                  TraceStats* stats) {
  manual_seed(5);
  Tensor x = randn({8, 4}), y = randn({8, 1});
  Tensor w = randn({4, 1}).requires_grad_(), b = zeros({1}).requires_grad_();
  optim::SGD opt({w, b}, optim::SGDOptions(0.3).momentum(0.9).weight_decay(1e-3));
  auto sched = make_sched(opt);
  auto step = [&](Tensor in, Tensor target) {
    opt.zero_grad();
    Tensor loss = (in.matmul(w) + b - target).pow(2).mean();
    loss.backward();
    opt.step();
    return loss;
  };
  auto compiled = jit(step, "scheduled_sgd");
  std::vector<double> out;
  for (int t = 0; t < steps; ++t) {
    out.push_back((traced ? compiled(x, y) : step(x, y)).item<float>());
    sched->step();
  }
  for (const Tensor& t : {w, b, opt.state()[0], opt.state()[1]})
    for (double v : t.to(kFloat64).contiguous().view({-1}).to_vector<double>()) out.push_back(v);
  *stats = compiled.stats();
  return out;
}

TEST_CASE("StepLR and CosineAnnealingLR every step: one trace, one compile, eager's values") {
  MakeScheduler step_lr = [](optim::Optimizer& o) {
    return std::make_unique<optim::StepLR>(o, 2, 0.5);
  };
  MakeScheduler cosine = [](optim::Optimizer& o) {
    return std::make_unique<optim::CosineAnnealingLR>(o, 12, 0.01);
  };
  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    TraceStats eager_stats, s;
    const MakeScheduler& make = which == 0 ? step_lr : cosine;
    const std::vector<double> eager = scheduled_sgd(false, make, 12, &eager_stats);
    const std::vector<double> traced = scheduled_sgd(true, make, 12, &s);
    check_same(eager, traced);
    // The first call, then the one that finds the .grads defined: the twelve
    // learning rates share the second plan and its kernels.
    CHECK(s.misses == 2);
    CHECK(s.hits == 10);
  }
}

// One compiled step of `opt` on the loss sum(w * x).
auto traced_step(const Tensor& w, optim::Optimizer& opt, const char* name) {
  return jit(
      [w, &opt](Tensor x) {
        opt.zero_grad();
        Tensor loss = (w * x).sum();
        loss.backward();
        opt.step();
        return loss;
      },
      name);
}

TEST_CASE("writing the learning rate directly takes effect at the next call, without a retrace") {
  Tensor w = ones({3}).requires_grad_();
  optim::SGD opt({w}, 0.5);
  auto step = traced_step(w, opt, "sgd_lr");
  Tensor x = ones({3});
  step(x);
  step(x);  // (retraced: w's .grad is now defined)
  check_close(w, full({3}, 0.0), 1e-7);
  const int64_t kernels = step.stats().kernels;
  opt.options.lr_ = 0.25;
  step(x);
  check_close(w, full({3}, -0.25), 1e-7);
  opt.set_lr(0.125);
  step(x);
  check_close(w, full({3}, -0.375), 1e-7);
  CHECK(step.stats().misses == 2);
  CHECK(step.stats().kernels == kernels);
}

TEST_CASE("the other hyperparameters stay constants: a new momentum retraces, naming it") {
  Tensor w = ones({3}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.5).momentum(0.5));
  auto step = traced_step(w, opt, "sgd_momentum");
  Tensor x = ones({3});
  step(x);
  step(x);
  // buf 1, then 1.5: w = 1 - 0.5 - 0.75
  check_close(w, full({3}, -0.25), 1e-7);
  opt.options.momentum_ = 0.25;
  step(x);  // buf 0.375 + 1
  check_close(w, full({3}, -0.25 - 0.5 * 1.375), 1e-7);
  CHECK(step.stats().misses == 3);
  CHECK(step.stats().miss_reasons.back().find(
            "SGD's hyperparameters changed: momentum 0.5 -> 0.25") != std::string::npos);
}

TEST_CASE("a learning rate changed inside a traced step after a step read it is an error") {
  Tensor w = ones({3}).requires_grad_();
  optim::SGD opt({w}, 0.5);
  optim::StepLR sched(opt, 1, 0.5);
  auto step = jit([&](Tensor x) {
    for (int i = 0; i < 2; ++i) {
      opt.zero_grad();
      (w * x).sum().backward();
      opt.step();
      sched.step();
    }
    return w.sum();
  });
  KILN_CHECK_ERROR(step(ones({3})), "SGD: the learning rate changed inside a traced function");
}
