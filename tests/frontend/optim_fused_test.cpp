// The eager optimizer steps' multi-tensor path (frontend/optim_fused.h): the
// same bits as the op-by-op step (KILN_EAGER_KERNELS=0, the reference kernels)
// and as the traced step, for every option that changes the arithmetic.
#include <cstring>
#include <functional>
#include <limits>

#include "frontend/optim_fused.h"
#include "frontend/settings.h"
#include "test_util.h"

using namespace kiln;

namespace {

enum class Mode { Fused, OpByOp, Traced };

// settings().eager_kernels as given while alive (KILN_EAGER_KERNELS=0 when
// off: the op-by-op oracle); the settings come back even when a step throws.
class EagerKernels {
 public:
  explicit EagerKernels(bool on) : saved_(settings()) { settings().eager_kernels = on; }
  ~EagerKernels() { settings() = saved_; }
  EagerKernels(const EagerKernels&) = delete;
  EagerKernels& operator=(const EagerKernels&) = delete;

 private:
  Settings saved_;
};

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Parameters, then optimizer state, after three steps whose gradients are the
// coefficients c_t of loss = sum(p * c_t): random, with a NaN, an inf and a 0
// in the small parameter. The large parameter spans several of the parallel
// region's chunks, which then also cross from one parameter into the next.
std::vector<Tensor> run_steps(Mode mode, DType dt, const MakeOptimizer& make) {
  manual_seed(11);
  std::vector<Tensor> ps{randn({300, 500}, dt).requires_grad_(), randn({7}, dt).requires_grad_(),
                         randn({3, 4}, dt).requires_grad_()};
  std::vector<std::vector<Tensor>> coeffs;
  for (int t = 0; t < 3; ++t) {
    std::vector<Tensor> c;
    for (const Tensor& p : ps) c.push_back(randn(p.sizes(), dt) * (t + 1));
    c[1] = tensor({0.5, std::numeric_limits<double>::quiet_NaN(), 2.0,
                   std::numeric_limits<double>::infinity(), 0.0, -1e-30, 3e4},
                  dt);
    coeffs.push_back(c);
  }
  std::unique_ptr<optim::Optimizer> opt = make(ps);
  auto body = [&](Tensor c0, Tensor c1, Tensor c2) {
    opt->zero_grad();
    Tensor loss = (ps[0] * c0).sum() + (ps[1] * c1).sum() + (ps[2] * c2).sum();
    loss.backward();
    opt->step();
    return loss;
  };
  auto traced = jit(body, "fused_adam_oracle");
  {
    const EagerKernels kernels(mode != Mode::OpByOp);
    for (const std::vector<Tensor>& c : coeffs)
      mode == Mode::Traced ? traced(c[0], c[1], c[2]) : body(c[0], c[1], c[2]);
  }
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.detach().clone());
  for (const Tensor& t : opt->state()) out.push_back(t.clone());
  return out;
}

// Same dtype, shape and bytes (NaNs included).
void check_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].dtype() == b[i].dtype());
    REQUIRE(a[i].sizes() == b[i].sizes());
    const Tensor x = a[i].contiguous(), y = b[i].contiguous();
    CHECK(std::memcmp(x.data_ptr(), y.data_ptr(),
                      static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0);
  }
}

using Configs = std::vector<std::pair<std::string, MakeOptimizer>>;

// Each configuration's fused steps have the bits of its op-by-op and traced steps.
void check_fused_configs(const Configs& configs) {
  for (const auto& [name, make] : configs)
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(name);
      const std::string dtype = dtype_name(dt);
      CAPTURE(dtype);
      const uint64_t before = detail::FusedStep::fused_updates();
      const std::vector<Tensor> fused = run_steps(Mode::Fused, dt, make);
      CHECK(detail::FusedStep::fused_updates() - before == 3 * 3);  // 3 steps, 3 parameters
      const uint64_t after = detail::FusedStep::fused_updates();
      check_same_bits(fused, run_steps(Mode::OpByOp, dt, make));
      check_same_bits(fused, run_steps(Mode::Traced, dt, make));
      CHECK(detail::FusedStep::fused_updates() == after);  // neither of those fused
    }
}

}  // namespace

TEST_CASE("an eager Adam step updates fused, with the op-by-op step's bits and the traced step's") {
  check_fused_configs({
      {"Adam", [](std::vector<Tensor> ps) { return std::make_unique<optim::Adam>(ps, 1e-2); }},
      {"Adam, L2 weight decay",
       [](std::vector<Tensor> ps) {
         return std::make_unique<optim::Adam>(ps, optim::AdamOptions(3e-3).weight_decay(0.01));
       }},
      {"Adam, amsgrad, other betas and eps",
       [](std::vector<Tensor> ps) {
         return std::make_unique<optim::Adam>(
             ps, optim::AdamOptions(0.1).betas({0.8, 0.95}).eps(1e-6).amsgrad(true));
       }},
      {"AdamW",
       [](std::vector<Tensor> ps) {
         return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions(1e-2).weight_decay(0.05));
       }},
      {"AdamW, amsgrad",
       [](std::vector<Tensor> ps) {
         return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions(1e-2).amsgrad(true));
       }},
  });
}

TEST_CASE("an eager SGD step updates fused, with the op-by-op step's bits and the traced step's") {
  auto sgd = [](optim::SGDOptions o) -> MakeOptimizer {
    return [o](std::vector<Tensor> ps) { return std::make_unique<optim::SGD>(ps, o); };
  };
  check_fused_configs({
      {"SGD", sgd(optim::SGDOptions(0.1))},
      {"SGD, weight decay", sgd(optim::SGDOptions(0.05).weight_decay(0.01))},
      {"SGD, momentum", sgd(optim::SGDOptions(0.05).momentum(0.9))},
      {"SGD, momentum, dampening, weight decay",
       sgd(optim::SGDOptions(0.05).momentum(0.8).dampening(0.3).weight_decay(1e-3))},
      {"SGD, nesterov", sgd(optim::SGDOptions(0.02).momentum(0.9).nesterov(true))},
  });
}

TEST_CASE("a fused eager Adam step counts as an in-place write of the parameter") {
  // As op by op: a gradient that saved the parameter before the step is stale.
  Tensor p = randn({64}).requires_grad_();
  optim::Adam opt({p}, 0.1);
  (p * p).sum().backward();
  Tensor later = (p * p).sum();  // saves p
  const uint64_t before = detail::FusedStep::fused_updates();
  opt.step();
  CHECK(detail::FusedStep::fused_updates() == before + 1);
  CHECK_THROWS_WITH_AS(later.backward(), doctest::Contains("modified by an in-place operation"),
                       Error);
}

TEST_CASE("a strided view of a parameter, listed as another, updates after it, as op by op") {
  // d shares a's storage, transposed: the ops update it at once, and the fused
  // pass holding a runs before them.
  auto run = [](bool fused) {
    manual_seed(4);
    Tensor a = randn({6, 5}).requires_grad_();
    Tensor d = a.detach().t().requires_grad_();  // a's storage, strided
    const Tensor ca = randn({6, 5}), cd = randn({5, 6});
    optim::Adam opt({a, d}, 0.1);
    const EagerKernels kernels(fused);
    for (int t = 0; t < 2; ++t) {
      opt.zero_grad();
      ((a * ca).sum() + (d * cd).sum()).backward();
      opt.step();
    }
    return std::vector<Tensor>{a.detach().clone()};
  };
  const uint64_t passes = detail::FusedStep::fused_passes();
  const std::vector<Tensor> fused = run(true);
  CHECK(detail::FusedStep::fused_passes() == passes + 2);  // a, before d's ops, each step
  check_same_bits(fused, run(false));
}

TEST_CASE("parameters the fused step cannot take update op by op beside those it takes") {
  // A strided parameter and one whose gradient is strided keep the ops; the
  // dense one beside them updates fused; all three as op by op.
  auto run = [](bool fused) {
    manual_seed(3);
    Tensor a = randn({5, 6}).requires_grad_(), b = randn({6, 5}).t().detach().requires_grad_();
    Tensor c = randn({4, 3}).requires_grad_();
    optim::Adam opt({a, b, c}, 0.05);
    const EagerKernels kernels(fused);
    for (int t = 0; t < 2; ++t) {
      opt.zero_grad();
      (a.pow(2).sum() + b.sin().sum() + c.exp().sum()).backward();
      c.set_grad(c.grad().t().contiguous().t());  // a strided gradient
      opt.step();
    }
    std::vector<Tensor> out{a.detach().clone(), b.detach().clone(), c.detach().clone()};
    for (const Tensor& t : opt.state()) out.push_back(t.clone());
    return out;
  };
  const uint64_t before = detail::FusedStep::fused_updates();
  const std::vector<Tensor> fused = run(true);
  CHECK(detail::FusedStep::fused_updates() == before + 2);  // a, at each of two steps
  check_same_bits(fused, run(false));
}

TEST_CASE("a parameter listed twice updates twice, in order, as op by op") {
  // The second update reads what the first wrote: the fused step runs the
  // first before taking the second. In one parallel region the two would race:
  // with c first, the second half of the work (one thread's) starts on a's
  // second update while the other thread is still on c, before a's first.
  auto run = [](bool fused) {
    manual_seed(8);
    Tensor c = randn({200, 400}).requires_grad_(), a = randn({200, 400}).requires_grad_();
    const Tensor cc = randn({200, 400}), ca = randn({200, 400});
    optim::Adam adam({c, a, a}, optim::AdamOptions(0.01).weight_decay(0.1));
    optim::SGD sgd({c, a, a}, optim::SGDOptions(0.05).momentum(0.9));
    const EagerKernels kernels(fused);
    for (int t = 0; t < 2; ++t) {
      adam.zero_grad();
      // Gradients the eager kernels do not compute (a sin's would differ by
      // ulps with them off): products and sums only.
      ((c * cc).sum() + (a * ca).sum()).backward();
      adam.step();
      sgd.step();
    }
    std::vector<Tensor> out{c.detach().clone(), a.detach().clone()};
    for (const Tensor& t : adam.state()) out.push_back(t.clone());
    for (const Tensor& t : sgd.state()) out.push_back(t.clone());
    return out;
  };
  const uint64_t before = detail::FusedStep::fused_updates();
  const uint64_t passes = detail::FusedStep::fused_passes();
  const std::vector<Tensor> fused = run(true);
  CHECK(detail::FusedStep::fused_updates() == before + 12);  // 2 steps of 3 + 3
  // Each step of each optimizer: {c, a} in one pass, then a again in another
  // (whether two threads would have raced on a is up to timing; this is not).
  CHECK(detail::FusedStep::fused_passes() == passes + 8);
  check_same_bits(fused, run(false));
}
