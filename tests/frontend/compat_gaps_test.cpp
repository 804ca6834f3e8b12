// What libtorch programs use and Kiln lacked: scatter and index_put_ that
// assign (composites of scatter_add), optimizer parameter groups with options
// of their own, TransformerEncoder with Module::clone, init::eye_ and
// orthogonal_. Values against PyTorch's rules, eagerly and traced, gradients
// against finite differences (f64).
#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;

Tensor iota_sin(Shape s, double scale = 1.0, DType dt = kFloat64) {
  return arange(numel(s)).to(dt).mul(Scalar(scale)).sin().reshape(s);
}

TEST_CASE("scatter writes src or a value at the indices, eagerly and traced") {
  Tensor base = iota_sin({3, 4}, 0.7);
  Tensor idx = tensor({2, 0, 1, 3, 3, 0}, TensorOptions(kInt64)).reshape({3, 2});
  Tensor src = iota_sin({3, 2}, 1.3);
  Tensor rows = tensor({2, 0, 1}, TensorOptions(kInt64)).reshape({3, 1});
  auto run = [&](const Tensor& b, const Tensor& s) {
    return std::vector<Tensor>{b.scatter(1, idx, s), b.scatter(1, idx, Scalar(5.0)),
                               scatter(b, 0, rows, s.narrow(1, 0, 1))};
  };
  // PyTorch's rule, element by element.
  std::vector<double> want = base.to_vector<double>(), want_value = want;
  const std::vector<int64_t> ix = idx.to_vector<int64_t>();
  const std::vector<double> sv = src.to_vector<double>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      want[static_cast<size_t>(i * 4 + ix[i * 2 + j])] = sv[static_cast<size_t>(i * 2 + j)];
      want_value[static_cast<size_t>(i * 4 + ix[i * 2 + j])] = 5.0;
    }
  auto traced = jit([&](Tensor b, Tensor s) { return run(b, s); }, "scatter");
  for (const auto& r : {run(base, src), traced(base, src)}) {
    check_close(r[0], from_vector(want, {3, 4}, kFloat64));
    check_close(r[1], from_vector(want_value, {3, 4}, kFloat64));
    // dim 0: row rows[i] of column 0 gets src[i][0].
    std::vector<double> w0 = base.to_vector<double>();
    const int64_t row_of[3] = {2, 0, 1};
    for (int i = 0; i < 3; ++i)
      w0[static_cast<size_t>(row_of[i] * 4)] = sv[static_cast<size_t>(i * 2)];
    check_close(r[2], from_vector(w0, {3, 4}, kFloat64));
  }
  // In place, and the one-hot of labels.
  Tensor z = zeros({3, 4});
  z.scatter_(1, tensor({2, 0, 1}, TensorOptions(kInt64)).unsqueeze(1), Scalar(1.0));
  CHECK(z.equal(nn::functional::one_hot(tensor({2, 0, 1}, TensorOptions(kInt64)), 4).to(kFloat32)));
  Tensor zs = zeros({3, 4});
  zs.scatter_(1, tensor({2, 0, 1}, TensorOptions(kInt64)).unsqueeze(1), full({3, 1}, 7.0));
  CHECK(zs.sum().item<double>() == 21.0);
}

TEST_CASE("scatter: a place named twice gets the mean (equal values stay exact); integers") {
  Tensor idx = tensor({1, 1, 2}, TensorOptions(kInt64)).reshape({1, 3});
  Tensor r = zeros({1, 4}).scatter(1, idx, tensor({2.f, 4.f, 9.f}).reshape({1, 3}));
  CHECK(r.to_vector<float>() == std::vector<float>{0, 3, 9, 0});
  Tensor ones_written = zeros({1, 4}).scatter(1, idx, ones({1, 3}));
  CHECK(ones_written.to_vector<float>() == std::vector<float>{0, 1, 1, 0});
  // int64 beyond float's 24 bits survives a single write exactly.
  const int64_t big = (int64_t(1) << 40) + 3;
  Tensor ints = zeros({1, 4}, TensorOptions(kInt64))
                    .scatter(1, tensor({3}, TensorOptions(kInt64)).reshape({1, 1}),
                             full({1, 1}, Scalar(big), TensorOptions(kInt64)));
  CHECK(ints.dtype() == kInt64);
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, big});
  KILN_CHECK_ERROR(
      zeros({2, 3}).scatter(1, tensor({0, 3}, TensorOptions(kInt64)).reshape({2, 1}), ones({2, 1})),
      "scatter");
}

TEST_CASE("scatter's gradients equal finite differences, eagerly and traced") {
  Tensor idx = tensor({2, 0, 1, 3, 3, 0}, TensorOptions(kInt64)).reshape({3, 2});
  Tensor base = iota_sin({3, 4}, 0.7), src = iota_sin({3, 2}, 1.3);
  Tensor weights = iota_sin({3, 4}, 0.37).add(Scalar(1.5));
  auto f_base = [&](const Tensor& b) { return b.scatter(1, idx, src).mul(weights).pow(2).sum(); };
  auto f_src = [&](const Tensor& s) { return base.scatter(1, idx, s).mul(weights).pow(2).sum(); };
  check_close(autograd_grad(f_base, base), numeric_grad(f_base, base), 1e-5, 1e-7);
  check_close(autograd_grad(f_src, src), numeric_grad(f_src, src), 1e-5, 1e-7);
  auto traced = jit(
      [&](Tensor b, Tensor s) {
        auto g = autograd::grad({b.scatter(1, idx, s).mul(weights).pow(2).sum()}, {b, s});
        return std::vector<Tensor>{g[0], g[1]};
      },
      "scatter_grad");
  auto g = traced(base.clone().requires_grad_(), src.clone().requires_grad_());
  check_close(g[0], autograd_grad(f_base, base));
  check_close(g[1], autograd_grad(f_src, src));
}

TEST_CASE("index_put_ assigns rows through integer indices, eagerly and traced") {
  Tensor idx = tensor({2, 0}, TensorOptions(kInt64));
  auto run = [&](const Tensor& x, const Tensor& v) {
    Tensor y = x.clone();
    y.index_put_({idx}, v);
    Tensor z = x.clone();
    z.index_put_(std::vector<Tensor>{idx}, v, /*accumulate=*/true);
    return std::vector<Tensor>{y, z};
  };
  Tensor x = iota_sin({3, 4}, 0.3), v = iota_sin({2, 4}, 0.9);
  auto traced = jit([&](Tensor a, Tensor b) { return run(a, b); }, "index_put");
  for (const auto& r : {run(x, v), traced(x, v)}) {
    check_close(r[0].index({0}), v.index({1}));
    check_close(r[0].index({1}), x.index({1}));
    check_close(r[0].index({2}), v.index({0}));
    check_close(r[1].index({2}), x.index({2}) + v.index({0}));
  }
  auto f = [&](const Tensor& vv) {
    Tensor y = x.clone();
    y.index_put_({idx}, vv);
    return y.pow(3).sum();
  };
  check_close(autograd_grad(f, v), numeric_grad(f, v), 1e-5, 1e-7);
}

// Two linear maps with a group each: one with options of its own, one with the
// optimizer's.
struct TwoLayers {
  nn::Linear a{3, 2}, b{2, 1};
  Tensor loss(const Tensor& x) { return b(a(x).tanh()).pow(2).mean(); }
};

std::vector<Tensor> values_of(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.detach().clone());
  return out;
}

TEST_CASE("SGD with parameter groups: each group steps with its own options, eagerly and traced") {
  manual_seed(3);
  TwoLayers eager, traced_net;
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < eager.a->parameters().size(); ++i)
      traced_net.a->parameters()[i].copy_(eager.a->parameters()[i]);
    for (size_t i = 0; i < eager.b->parameters().size(); ++i)
      traced_net.b->parameters()[i].copy_(eager.b->parameters()[i]);
  }
  auto make = [](TwoLayers& n) {
    std::vector<optim::OptimizerParamGroup> groups;
    groups.emplace_back(n.a->parameters(), std::make_unique<optim::SGDOptions>(0.1));
    groups.emplace_back(n.b->parameters());
    return std::make_unique<optim::SGD>(groups, optim::SGDOptions(0.01).momentum(0.9));
  };
  auto opt = make(eager), opt_t = make(traced_net);
  REQUIRE(opt->param_groups().size() == 2);
  CHECK(static_cast<optim::SGDOptions&>(opt->param_groups()[0].options()).momentum() == 0);
  CHECK(static_cast<optim::SGDOptions&>(opt->param_groups()[1].options()).momentum() == 0.9);
  Tensor x = iota_sin({5, 3}, 0.4, kFloat32);

  // One step by hand: group 0 plain SGD at 0.1, group 1 momentum (buffer = g) at 0.01.
  std::vector<Tensor> before = values_of(eager.a->parameters()),
                      before_b = values_of(eager.b->parameters());
  opt->zero_grad();
  eager.loss(x).backward();
  std::vector<Tensor> ga = values_of({eager.a->weight.grad(), eager.a->bias.grad()});
  std::vector<Tensor> gb = values_of({eager.b->weight.grad(), eager.b->bias.grad()});
  opt->step();
  check_close(eager.a->weight, before[0] - 0.1 * ga[0], 1e-6, 1e-7);
  check_close(eager.b->weight, before_b[0] - 0.01 * gb[0], 1e-6, 1e-7);

  auto step = jit(
      [&](Tensor xb) {
        opt_t->zero_grad();
        Tensor l = traced_net.loss(xb);
        l.backward();
        opt_t->step();
        return l.detach();
      },
      "groups_step");
  step(x);
  for (int i = 0; i < 3; ++i) {
    // The learning rate of one group changes between calls, through its options.
    static_cast<optim::SGDOptions&>(opt->param_groups()[1].options()).lr(0.02 * (i + 1));
    static_cast<optim::SGDOptions&>(opt_t->param_groups()[1].options()).lr(0.02 * (i + 1));
    opt->zero_grad();
    eager.loss(x).backward();
    opt->step();
    step(x);
  }
  check_close(traced_net.a->weight, eager.a->weight, 1e-5, 1e-6);
  check_close(traced_net.b->weight, eager.b->weight, 1e-5, 1e-6);
  check_close(traced_net.b->bias, eager.b->bias, 1e-5, 1e-6);

  // A group of another optimizer's options is refused.
  std::vector<optim::OptimizerParamGroup> wrong;
  wrong.emplace_back(eager.a->parameters(), std::make_unique<optim::AdamOptions>(0.1));
  KILN_CHECK_ERROR(optim::SGD(wrong, optim::SGDOptions(0.1)), "SGDOptions");
}

TEST_CASE("groups made without options each get a copy of the optimizer's, as libtorch's") {
  TwoLayers n;
  optim::SGD opt({optim::OptimizerParamGroup(n.a->parameters()), optim::OptimizerParamGroup(n.b->parameters())},
                 optim::SGDOptions(0.1));
  // libtorch 1.13 prints 0.01 0.1 0.1: the edit reaches group 0 only.
  static_cast<optim::SGDOptions&>(opt.param_groups()[0].options()).lr(0.01);
  CHECK(opt.param_groups()[0].options().get_lr() == 0.01);
  CHECK(opt.param_groups()[1].options().get_lr() == 0.1);
  CHECK(opt.defaults().get_lr() == 0.1);
  Tensor x = iota_sin({4, 3}, 0.3, kFloat32);
  std::vector<Tensor> before_a = values_of(n.a->parameters()), before_b = values_of(n.b->parameters());
  opt.zero_grad();
  n.loss(x).backward();
  std::vector<Tensor> ga = values_of({n.a->weight.grad()}), gb = values_of({n.b->weight.grad()});
  opt.step();
  check_close(n.a->weight, before_a[0] - 0.01 * ga[0], 1e-6, 1e-7);
  check_close(n.b->weight, before_b[0] - 0.1 * gb[0], 1e-6, 1e-7);

  // A group added without options gets a copy too; the first group of a
  // one-group optimizer still follows the optimizer's own options.
  optim::Adam adam(n.a->parameters(), optim::AdamOptions(1e-3));
  adam.add_param_group(optim::OptimizerParamGroup(n.b->parameters()));
  static_cast<optim::AdamOptions&>(adam.param_groups()[1].options()).lr(0.5);
  CHECK(adam.param_groups()[0].options().get_lr() == 1e-3);
  adam.options.lr(0.25);
  CHECK(adam.param_groups()[0].options().get_lr() == 0.25);
  CHECK(adam.param_groups()[1].options().get_lr() == 0.5);
}

TEST_CASE("parameter groups: add_param_group, schedulers per group, save and load") {
  manual_seed(4);
  TwoLayers n;
  optim::AdamW opt({optim::OptimizerParamGroup(n.a->parameters())}, optim::AdamWOptions(1e-2));
  opt.add_param_group(optim::OptimizerParamGroup(
      n.b->parameters(),
      std::make_unique<optim::AdamWOptions>(optim::AdamWOptions(1e-1).weight_decay(0))));
  REQUIRE(opt.param_groups().size() == 2);
  CHECK(static_cast<optim::AdamWOptions&>(opt.param_groups()[0].options()).weight_decay() == 0.01);
  CHECK(static_cast<optim::AdamWOptions&>(opt.param_groups()[1].options()).weight_decay() == 0);
  CHECK(opt.parameters().size() == 4);
  optim::StepLR sched(opt, 2, 0.5);
  Tensor x = iota_sin({4, 3}, 0.2, kFloat32);
  for (int e = 0; e < 4; ++e) {
    opt.zero_grad();
    n.loss(x).backward();
    opt.step();
    sched.step();
  }
  CHECK(opt.param_groups()[0].options().get_lr() == doctest::Approx(1e-2 * 0.25));
  CHECK(opt.param_groups()[1].options().get_lr() == doctest::Approx(1e-1 * 0.25));

  const std::string path = "compat_gaps_optim.kiln";
  save(opt, path);
  TwoLayers m;
  optim::AdamW loaded(
      {optim::OptimizerParamGroup(m.a->parameters()),
       optim::OptimizerParamGroup(m.b->parameters(), std::make_unique<optim::AdamWOptions>(0.5))},
      optim::AdamWOptions(0.3));
  load(loaded, path);
  CHECK(loaded.param_groups()[0].options().get_lr() == doctest::Approx(1e-2 * 0.25));
  CHECK(loaded.param_groups()[1].options().get_lr() == doctest::Approx(1e-1 * 0.25));
  optim::AdamW one_group(m.a->parameters(), optim::AdamWOptions(0.3));
  KILN_CHECK_ERROR(load(one_group, path), "do not match");
  std::remove(path.c_str());
}

TEST_CASE("TransformerEncoder: copies of one layer, then the norm, eagerly and traced") {
  manual_seed(5);
  nn::TransformerEncoderLayer layer(
      nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0));
  nn::TransformerEncoder enc(nn::TransformerEncoderOptions(layer, 2).norm(
      nn::AnyModule(nn::LayerNorm(nn::LayerNormOptions({8})))));
  const auto names = enc->named_parameters();
  REQUIRE(names.size() == 26);
  CHECK(names[0].key() == "layers.0.self_attn.in_proj_weight");
  CHECK(names[12].key() == "layers.1.self_attn.in_proj_weight");
  CHECK(names[25].key() == "norm.bias");
  auto& l0 = enc->layers->at<nn::TransformerEncoderLayerImpl>(0);
  auto& l1 = enc->layers->at<nn::TransformerEncoderLayerImpl>(1);
  // The same starting values, in storage of their own.
  CHECK(l0.linear1->weight.equal(layer->linear1->weight));
  CHECK(l1.self_attn->in_proj_weight.equal(layer->self_attn->in_proj_weight));
  {
    NoGradGuard no_grad;
    l1.linear1->weight.add_(1.0);
  }
  CHECK(!l1.linear1->weight.equal(layer->linear1->weight));
  CHECK(l0.linear1->weight.equal(layer->linear1->weight));

  Tensor src = iota_sin({5, 3, 8}, 0.31, kFloat32);
  Tensor pad = zeros({3, 5}, TensorOptions(kBool));
  auto run = [&](const Tensor& s) {
    Tensor y = enc(s, Tensor(), pad);
    auto g =
        autograd::grad({y.mul(iota_sin(y.sizes(), 0.7, kFloat32)).sum()}, {l0.linear1->weight});
    return std::vector<Tensor>{y, g[0]};
  };
  auto traced = jit([&](Tensor s) { return run(s); }, "encoder");
  Tensor by_hand = enc->norm.forward(l1.forward(l0.forward(src, Tensor(), pad), Tensor(), pad));
  auto e = run(src), t = traced(src);
  check_close(e[0], by_hand, 1e-6, 1e-6);
  check_close(t[0], e[0], 1e-5, 1e-5);
  check_close(t[1], e[1], 1e-4, 1e-5);

  // clone(): a deep copy; a module without one says so.
  auto copy = std::dynamic_pointer_cast<nn::TransformerEncoderImpl>(enc->clone());
  REQUIRE(copy);
  check_close(copy->forward(src, Tensor(), pad), e[0], 1e-6, 1e-6);
  struct Plain : nn::Module {};
  KILN_CHECK_ERROR(Plain().clone(), "clone()");
}

TEST_CASE("init::eye_ and init::orthogonal_") {
  Tensor w = empty({3, 5});
  nn::init::eye_(w);
  CHECK(w.sum().item<double>() == 3.0);
  CHECK(w.index({1, 1}).item<double>() == 1.0);
  manual_seed(6);
  for (Shape s : {Shape{6, 3}, Shape{3, 6}, Shape{4, 2, 3}}) {
    Tensor q = empty(s, TensorOptions(kFloat64));
    nn::init::orthogonal_(q, 2.0);
    Tensor m = q.reshape({s[0], -1});
    Tensor gram = s[0] >= m.size(1) ? m.t().matmul(m) : m.matmul(m.t());
    check_close(gram, eye(gram.size(0), TensorOptions(kFloat64)).mul(Scalar(4.0)), 1e-12, 1e-12);
  }
  KILN_CHECK_ERROR(nn::init::orthogonal_(empty({4})), "orthogonal_");
}

}  // namespace
}  // namespace kiln
