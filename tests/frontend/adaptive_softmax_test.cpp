// nn::AdaptiveLogSoftmaxWithLoss (frontend/nn_adaptive.h) against PyTorch 1.13's
// torch.nn.AdaptiveLogSoftmaxWithLoss on the same weights and inputs
// (tests/frontend/data/make_adaptive_softmax.py wrote its values): forward's
// output and loss, log_prob, predict and the gradients, eagerly and traced, in
// float64 and float32; its gradients against finite differences; a single
// example; the parameter names and shapes; and every bad input an error naming
// the user's line.
#include "frontend/dispatch.h"
#include "frontend/safetensors.h"
#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/frontend/data/";

// The module make_adaptive_softmax.py builds, with PyTorch's weights.
nn::AdaptiveLogSoftmaxWithLoss reference_module(DType dt) {
  nn::AdaptiveLogSoftmaxWithLoss asm_(
      nn::AdaptiveLogSoftmaxWithLossOptions(16, 40, {6, 15, 28}).div_value(2.).head_bias(true));
  asm_->to(dt);
  load_safetensors(asm_, kData + "adaptive_softmax.safetensors");
  return asm_;
}

void check_equal(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(got.sizes() == want.sizes());
  const auto a = got.to(kFloat64).to_vector<double>(), b = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    CHECK_MESSAGE(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])), "element ", i, ": ", a[i],
                  " (PyTorch: ", b[i], ")");
}

// forward's output and loss, log_prob, predict, then the gradients of loss and
// of (log_prob * w).sum() with respect to the input and every parameter.
std::vector<Tensor> run_all(nn::AdaptiveLogSoftmaxWithLoss& m, const Tensor& x, const Tensor& t,
                            const Tensor& w) {
  std::vector<Tensor> wrt{x};
  for (const Tensor& p : m->parameters()) wrt.push_back(p);
  const nn::ASMoutput out = m(x, t);
  const Tensor lp = m->log_prob(x);
  std::vector<Tensor> r{out.output, out.loss, lp, m->predict(x)};
  for (const Tensor& g : autograd::grad({out.loss}, wrt)) r.push_back(g);
  for (const Tensor& g : autograd::grad({(lp * w).sum()}, wrt)) r.push_back(g);
  return r;
}

}  // namespace

TEST_CASE("AdaptiveLogSoftmaxWithLoss equals PyTorch's, eagerly and traced, f64 and f32") {
  const auto io = read_safetensors(kData + "adaptive_softmax_io.safetensors");
  std::vector<std::string> names;
  for (const auto& p : reference_module(kFloat64)->named_parameters()) names.push_back(p.key());
  CHECK(names == std::vector<std::string>{"head.weight", "head.bias", "tail.0.0.weight",
                                          "tail.0.1.weight", "tail.1.0.weight", "tail.1.1.weight",
                                          "tail.2.0.weight", "tail.2.1.weight"});
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-10 : 2e-5;
    nn::AdaptiveLogSoftmaxWithLoss m = reference_module(dt);
    const Tensor x = io.at("input").to(dt).clone().requires_grad_(), t = io.at("target"),
                 w = io.at("log_prob_weight").to(dt);
    auto traced = jit([&](Tensor x, Tensor t) { return run_all(m, x, t, w); }, "adaptive");
    for (bool jit_on : {false, true}) {
      const std::string mode = std::string(dtype_name(dt)) + (jit_on ? ", traced" : ", eager");
      const std::vector<Tensor> r = jit_on ? traced(x, t) : run_all(m, x, t, w);
      REQUIRE(r.size() == 4 + 2 * (1 + names.size()));
      check_equal(r[0], io.at("output"), tol, "output, " + mode);
      check_equal(r[1], io.at("loss"), tol, "loss, " + mode);
      check_equal(r[2], io.at("log_prob"), tol, "log_prob, " + mode);
      CHECK(r[3].dtype() == kInt64);
      CHECK(r[3].to_vector<int64_t>() == io.at("predict").to_vector<int64_t>());
      for (size_t k = 0; k <= names.size(); ++k) {
        const std::string name = k == 0 ? "input" : names[k - 1];
        check_equal(r[4 + k], io.at("grad_loss." + name), tol, "d loss / d " + name + ", " + mode);
        check_equal(r[5 + names.size() + k], io.at("grad_lp." + name), tol,
                    "d log_prob / d " + name + ", " + mode);
      }
    }
    CHECK(traced.stats().misses == 1);
  }
}

TEST_CASE("AdaptiveLogSoftmaxWithLoss: one example (a 0-dim target) is row 0 of a batch") {
  nn::AdaptiveLogSoftmaxWithLoss m = reference_module(kFloat64);
  const auto io = read_safetensors(kData + "adaptive_softmax_io.safetensors");
  for (int64_t row : {0, 7}) {  // a shortlist class, the last class
    const Tensor x = io.at("input")[row], t = io.at("target")[row];
    const nn::ASMoutput one = m(x, t);
    CHECK(one.output.dim() == 0);
    CHECK(one.output.item<double>() == doctest::Approx(io.at("output")[row].item<double>()));
    CHECK(one.loss.item<double>() == doctest::Approx(-io.at("output")[row].item<double>()));
    const Tensor traced = jit([&](Tensor x, Tensor t) { return m(x, t).output; })(x, t);
    CHECK(traced.item<double>() == doctest::Approx(one.output.item<double>()).epsilon(1e-12));
  }
}

TEST_CASE("AdaptiveLogSoftmaxWithLoss: gradients equal central finite differences (f64)") {
  manual_seed(3);
  // The defaults: div_value 4, no head bias (clusters of 8 and 2 features).
  nn::AdaptiveLogSoftmaxWithLoss m(nn::AdaptiveLogSoftmaxWithLossOptions(32, 12, {4, 9}));
  m->to(kFloat64);
  CHECK(m->head->weight.sizes() == Shape{6, 32});
  CHECK(!m->head->bias.defined());
  CHECK(m->shortlist_size == 4);
  CHECK(m->n_clusters == 2);
  CHECK(m->head_size == 6);
  CHECK(m->cutoffs == std::vector<int64_t>{4, 9, 12});
  const F::AdaptiveTail tail = m->tail_weights();
  REQUIRE(tail.size() == 2);
  CHECK(tail[0].first.sizes() == Shape{8, 32});
  CHECK(tail[0].second.sizes() == Shape{5, 8});
  CHECK(tail[1].first.sizes() == Shape{2, 32});
  CHECK(tail[1].second.sizes() == Shape{3, 2});
  const Tensor x0 = randn({5, 32}, TensorOptions(kFloat64));
  const Tensor t = tensor({0, 4, 8, 9, 11});
  const Tensor hw = m->head->weight.detach();
  // The loss as a function of the input, of the head and of each tail weight.
  const std::vector<std::function<Tensor(const Tensor&)>> fs = {
      [&](const Tensor& x) { return F::adaptive_log_softmax_with_loss(x, t, hw, {}, tail).loss; },
      [&](const Tensor& w) { return F::adaptive_log_softmax_with_loss(x0, t, w, {}, tail).loss; },
      [&](const Tensor& w) {
        return F::adaptive_log_softmax_with_loss(x0, t, hw, {}, {{w, tail[0].second}, tail[1]})
            .loss;
      },
      [&](const Tensor& w) {
        return F::adaptive_log_softmax_with_loss(x0, t, hw, {}, {tail[0], {tail[1].first, w}}).loss;
      },
      [&](const Tensor& x) { return F::adaptive_log_prob(x, hw, {}, tail).exp().pow(2).sum(); },
  };
  const std::vector<Tensor> at = {x0, hw, tail[0].first.detach(), tail[1].second.detach(), x0};
  for (size_t i = 0; i < fs.size(); ++i) {
    CAPTURE(i);
    test::check_close(test::autograd_grad(fs[i], at[i]), test::numeric_grad(fs[i], at[i]), 1e-5,
                      1e-8);
  }
}

TEST_CASE("AdaptiveLogSoftmaxWithLoss: bad options and inputs name the user's line") {
  using Options = nn::AdaptiveLogSoftmaxWithLossOptions;
  auto line = [](int l) { return "adaptive_softmax_test.cpp:" + std::to_string(l); };
  // clang-format off
  const std::vector<std::tuple<std::function<void()>, std::string, int>> rows = {
    {[] { nn::AdaptiveLogSoftmaxWithLoss m(Options(8, 10, {4, 4})); }, "expected cutoffs that increase strictly, each in [1, n_classes - 1 = 9], got {4, 4}", __LINE__},
    {[] { nn::AdaptiveLogSoftmaxWithLoss m(Options(8, 10, {4, 10})); }, "got {4, 10}", __LINE__},
    {[] { nn::AdaptiveLogSoftmaxWithLoss m(Options(8, 10, {0, 4})); }, "got {0, 4}", __LINE__},
    {[] { nn::AdaptiveLogSoftmaxWithLoss m(Options(8, 10, {})); }, "got {}", __LINE__},
    {[] { nn::AdaptiveLogSoftmaxWithLoss m(Options(8, 10, {2, 4, 6})); }, "cluster 1 would project 8 features to 8 / 4^2 < 1", __LINE__},
  };
  // clang-format on
  for (const auto& [run, expected, l] : rows) {
    const std::string msg = test::error_of(run);
    CHECK_MESSAGE(msg.find(expected) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find(line(l)) != std::string::npos, msg);
  }

  nn::AdaptiveLogSoftmaxWithLoss m(Options(8, 10, {4, 7}).div_value(2.));
  const Tensor x = randn({3, 8});
  const int at = __LINE__ + 3;
  // clang-format off
  const std::vector<std::pair<std::function<void()>, std::string>> calls = {
    {[&] { (void)m(x, tensor({0, 10, 3})); }, "AdaptiveLogSoftmaxWithLoss: index 10 is out of range for size 10"},
    {[&] { (void)m(x, tensor({0, -1, 3})); }, "index -1 is out of range"},
    {[&] { (void)m(x.reshape({3, 2, 4}), tensor({0, 1, 2})); }, "expected an input [N, 8] for a target [N], got [3,2,4]"},
    {[&] { (void)m(x, tensor({0, 1})); }, "expected input and target of the same batch size, got [3,8] and [2]"},
    {[&] { (void)m(x[0], tensor({0, 1, 2})); }, "expected an input [N, 8] for a target [N], got [8]"},
    {[&] { (void)m(x, tensor({1}).reshape({}).expand({3, 1})); }, "expected a target of 0 or 1 dims"},
    {[&] { (void)m(x, tensor({0.f, 1.f, 2.f})); }, "expected integer indices, got f32"},
    {[&] { (void)m->log_prob(x[0]); }, "expected an input [N, 8], got [8]"},
    {[&] { (void)m->predict(x.reshape({3, 2, 4})); }, "expected an input [N, 8], got [3,2,4]"},
    {[&] { (void)jit([&](Tensor x, Tensor t) { return m(x, t).loss; })(x, tensor({0, 10, 3})); }, "index 10 is out of range for size 10"},
  };
  // clang-format on
  for (size_t i = 0; i < calls.size(); ++i) {
    CAPTURE(i);
    const std::string msg = test::error_of(calls[i].first);
    CHECK_MESSAGE(msg.find(calls[i].second) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find(line(at + static_cast<int>(i))) != std::string::npos, msg);
  }
}

// The op each tail cluster runs (detail::cluster_log_prob, ir/ops.def's
// cluster_logprob): rows outside the cluster are 0 and are not read.
TEST_CASE("cluster_log_prob: rows outside the cluster are 0 and not read; eager equals traced") {
  manual_seed(7);
  for (DType dt : {kFloat64, kFloat32}) {
    CAPTURE(dtype_name(dt));
    const int64_t rows = 10, width = 3, columns = 70, start = 20;
    // Rows 1, 4 and 8 outside the cluster (below, above, far above).
    const Tensor t = tensor({20, 3, 89, 25, 90, 40, 40, 21, 1000, 60});
    const Tensor h0 = randn({rows, width}, TensorOptions(dt)),
                 w0 = randn({columns, width}, TensorOptions(dt)),
                 g = randn({rows}, TensorOptions(dt));
    auto run = [&](const Tensor& h, const Tensor& w) {
      const Tensor out = detail::cluster_log_prob(h, w, t, start, Loc::current());
      const std::vector<Tensor> grads = autograd::grad({(out * g).sum()}, {h, w});
      return std::vector<Tensor>{out.detach(), grads[0], grads[1]};
    };
    auto leaf = [](const Tensor& x) { return x.clone().requires_grad_(); };
    auto traced = jit([&](Tensor h, Tensor w) { return run(h, w); }, "cluster");
    const std::vector<Tensor> clean = run(leaf(h0), leaf(w0));
    const std::vector<double> out = clean[0].to(kFloat64).to_vector<double>();
    for (int64_t r : {1, 4, 8}) {
      CHECK(out[size_t(r)] == 0.0);
      for (double d : clean[1][r].to(kFloat64).to_vector<double>()) CHECK(d == 0.0);
    }
    // The member rows: log_softmax(h w^T) at the target, as the dense composite.
    const Tensor dense = h0.matmul(w0.t()).log_softmax(1);
    for (int64_t r : {0, 2, 3, 5, 6, 7, 9}) {
      const int64_t target = t[r].item<int64_t>() - start;
      CHECK(
          out[size_t(r)] ==
          doctest::Approx(dense[r][target].item<double>()).epsilon(dt == kFloat64 ? 1e-12 : 1e-5));
    }
    // NaN and inf in the rows outside: nothing else changes, eagerly or traced.
    Tensor dirty = h0.clone();
    {
      NoGradGuard no_grad;
      dirty[1].fill_(std::numeric_limits<double>::quiet_NaN());
      dirty[4].fill_(std::numeric_limits<double>::infinity());
      dirty[8].fill_(-std::numeric_limits<double>::infinity());
    }
    for (bool jit_on : {false, true}) {
      CAPTURE(jit_on);
      const std::vector<Tensor> got =
          jit_on ? traced(leaf(dirty), leaf(w0)) : run(leaf(dirty), leaf(w0));
      const std::vector<Tensor> ref = jit_on ? traced(leaf(h0), leaf(w0)) : clean;
      for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(got[i].equal(ref[i]));
        CHECK(got[i].isfinite().all().item<bool>());
        // Eager and traced run the same library functions: the same bits.
        CHECK(got[i].equal(clean[i]));
      }
    }
  }
}

TEST_CASE("cluster_log_prob: gradients equal central finite differences; no second derivatives") {
  manual_seed(9);
  const Tensor t = tensor({5, 0, 7, 7, 30, 12, 6, 9});
  const Tensor h0 = randn({8, 4}, TensorOptions(kFloat64)),
               w0 = randn({80, 4}, TensorOptions(kFloat64)),
               g = randn({8}, TensorOptions(kFloat64));
  const std::vector<std::function<Tensor(const Tensor&)>> fs = {
      [&](const Tensor& h) {
        return (detail::cluster_log_prob(h, w0, t, 5, Loc::current()) * g).sum();
      },
      [&](const Tensor& w) {
        return (detail::cluster_log_prob(h0, w, t, 5, Loc::current()) * g).sum();
      },
  };
  const std::vector<Tensor> at = {h0, w0};
  for (size_t i = 0; i < fs.size(); ++i) {
    CAPTURE(i);
    test::check_close(test::autograd_grad(fs[i], at[i]), test::numeric_grad(fs[i], at[i]), 1e-5,
                      1e-8);
  }
  const Tensor h = h0.clone().requires_grad_();
  const Tensor gh = autograd::grad({detail::cluster_log_prob(h, w0, t, 5, Loc::current()).sum()},
                                   {h}, {}, true, true)[0];
  KILN_CHECK_ERROR(autograd::grad({gh.pow(2).sum()}, {h}), "second derivatives", "not supported");
  KILN_CHECK_ERROR(
      detail::cluster_log_prob(h0, randn({80, 3}, TensorOptions(kFloat64)), t, 5, Loc::current()),
      "cluster_logprob:", "expected weights w as wide as h (4), got [80,3]");
}
