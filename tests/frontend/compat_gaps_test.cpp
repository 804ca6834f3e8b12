// What libtorch programs use and Kiln lacked: scatter and index_put_ that
// assign (composites of scatter_add), optimizer parameter groups with options
// of their own, TransformerEncoder with Module::clone, init::eye_ and
// orthogonal_; torch::tensor of nested lists, in-place view changes
// (unsqueeze_, t_, ...), cummax/cummin's edge cases and linalg's errors (their
// values against PyTorch are in tensor_extra_test.cpp). Values against
// PyTorch's rules, eagerly and traced, gradients against finite differences (f64).
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

TEST_CASE("tensor() takes numbers and nested lists of any depth, as libtorch") {
  const Tensor a = tensor({{0}, {1}});
  CHECK(a.sizes() == Shape{2, 1});
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  const Tensor b = tensor({1.5, 2.5}, kFloat64);
  CHECK(b.dtype() == kFloat64);
  CHECK(b.to_vector<double>() == std::vector<double>{1.5, 2.5});
  const Tensor c = tensor({{1, 2}, {3, 4}}, TensorOptions(kFloat32));
  CHECK(c.dtype() == kFloat32);
  CHECK(c.sizes() == Shape{2, 2});
  CHECK(c.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  const Tensor d = tensor({{{1.5f, 2.5f}}, {{3.5f, 4.5f}}, {{5.5f, 6.5f}}});
  CHECK(d.sizes() == Shape{3, 1, 2});
  CHECK(d.dtype() == kFloat32);
  CHECK(d.to_vector<float>() == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f});
  const Tensor four = tensor({{{{1}, {2}}}});
  CHECK(four.sizes() == Shape{1, 1, 2, 1});
  CHECK(tensor(std::vector<float>{1, 2, 3}).sizes() == Shape{3});
  CHECK(tensor(std::vector<double>{1, 2}).dtype() == kFloat32);
  CHECK(tensor(std::vector<uint8_t>{1, 2}).dtype() == kUInt8);
  CHECK(tensor({true, false}).dtype() == kBool);
  CHECK(tensor(3.5).dim() == 0);
  CHECK(tensor(3.5, kFloat64).item<double>() == 3.5);
  CHECK(tensor(7).dtype() == kInt64);
  CHECK(tensor({}).sizes() == Shape{0});
  CHECK(tensor({{}, {}}).sizes() == Shape{2, 0});
  // Integers and floating values together are floating (libtorch: an error).
  CHECK(tensor({1, 2.5}).to_vector<float>() == std::vector<float>{1, 2.5f});
  CHECK(tensor({{1, 2}, {3, 4}}, TensorOptions(kInt64).requires_grad(false)).dtype() == kInt64);
  const Tensor g = tensor({{1.0, 2.0}}, TensorOptions(kFloat64).requires_grad());
  CHECK(g.requires_grad());
  KILN_CHECK_ERROR(tensor({{1, 2}, {3}}), "ragged", "element 1 has shape [1]",
                   "compat_gaps_test.cpp");
  KILN_CHECK_ERROR(tensor({{{1}, {2}}, {{3}}}), "ragged");
  KILN_CHECK_ERROR(tensor({1, {2}}), "ragged");
  KILN_CHECK_ERROR(tensor({300}, kUInt8), "300");
  // Traced: a literal is a constant of the plan.
  auto f = jit([](Tensor x) { return x.mul(tensor({{1.0f}, {2.0f}})); }, "literal");
  CHECK(f(ones({2, 3})).sum().item<float>() == 9.0f);
}

TEST_CASE("one int where libtorch takes dims: x.nansum(1), count_nonzero(x, 0), ...") {
  const Tensor x = tensor({{1.0f, 0.0f, 3.0f}, {0.0f, 5.0f, 6.0f}});
  CHECK(x.nansum(1).to_vector<float>() == std::vector<float>{4, 11});
  CHECK(nanmean(x, 0).to_vector<float>() == std::vector<float>{0.5f, 2.5f, 4.5f});
  CHECK(count_nonzero(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2});
  CHECK(x.amin(1, true).sizes() == Shape{2, 1});
  CHECK(x.amax().item<float>() == 6.0f);
  CHECK(x.repeat({2, 1}).sizes() == Shape{4, 3});
  CHECK(tensor({1, 2}).repeat(3).sizes() == Shape{6});
  CHECK(std::get<0>(std_mean(x, 1)).sizes() == Shape{2});
  CHECK(rot90(x, 1, {0, 1}).sizes() == Shape{3, 2});
  CHECK(tensordot(x, x, 1, 1).sizes() == Shape{2, 2});
}

TEST_CASE("in-place view changes keep autograd, eagerly and traced; errors say what to do") {
  auto run = [](const Tensor& a) {
    Tensor y = a.mul(Scalar(2));
    y.unsqueeze_(0);            // [1, 2, 3]
    y.transpose_(1, 2);         // [1, 3, 2]
    y.squeeze_(0);              // [3, 2]
    Tensor v = y.unsqueeze(0);  // a view [1, 3, 2]
    v.transpose_(1, 2);         // [1, 2, 3]
    v.squeeze_();               // [2, 3]
    v.unsqueeze_(2);            // [2, 3, 1]
    v.squeeze_(2);              // [2, 3]
    v.add_(Scalar(1));          // a write through the changed view into y
    return std::vector<Tensor>{y, v};
  };
  const Tensor a0 = arange(6).to(kFloat64).reshape({2, 3});
  Tensor a = a0.clone().requires_grad_();
  auto r = run(a);
  CHECK(r[0].sizes() == Shape{3, 2});
  CHECK(r[1].sizes() == Shape{2, 3});
  CHECK(r[0].to_vector<double>() == std::vector<double>{1, 7, 3, 9, 5, 11});
  CHECK(r[1].to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});
  r[0].mul(r[0]).sum().backward();  // d/da of sum((2a + 1)^2) = 4 (2a + 1)
  CHECK(a.grad().to_vector<double>() == std::vector<double>{4, 12, 20, 28, 36, 44});
  auto traced = jit(
      [&](Tensor t) {
        auto out = run(t);
        return std::vector<Tensor>{out[0], out[1], out[0].mul(out[0]).sum()};
      },
      "view_");
  const auto t = traced(a0);
  CHECK(t[0].sizes() == Shape{3, 2});
  CHECK(t[0].to_vector<double>() == r[0].detach().to_vector<double>());
  CHECK(t[1].to_vector<double>() == r[1].detach().to_vector<double>());
  // The gradient through a trace, the same as eagerly.
  auto grad_traced = jit(
      [&](Tensor t0) {
        Tensor p = t0.detach().requires_grad_();
        auto out = run(p);
        return autograd::grad({out[0].mul(out[0]).sum()}, {p})[0];
      },
      "view_ grad");
  CHECK(grad_traced(a0).to_vector<double>() == a.grad().to_vector<double>());

  Tensor leaf = zeros({3}).requires_grad_();
  KILN_CHECK_ERROR(leaf.unsqueeze_(0), "unsqueeze_", "leaf tensor that requires grad");
  {
    NoGradGuard no_grad;
    leaf.unsqueeze_(0);  // allowed without grad, as in PyTorch
  }
  CHECK(leaf.sizes() == Shape{1, 3});
  auto on_arg = jit(
      [](Tensor x) {
        x.t_();
        return x;
      },
      "t_ on arg");
  KILN_CHECK_ERROR(on_arg(zeros({2, 3})), "t_", "given to the traced function", "x = x.t(");
  KILN_CHECK_ERROR(zeros({2, 3}).squeeze_(5), "squeeze");
}

// A view taken of a tensor before x.t_() (or unsqueeze_, ...) changes that
// tensor's own shape starts from the old shape. Where Kiln would derive it
// again from the tensor (a write into the tensor, then the view's gradient or
// a traced value), that is refused with an error: PyTorch re-derives it by raw
// strides, and a chain of view ops applied to the new shape gave a wrong
// gradient, silently ([[2, 2, 2], ...] where PyTorch gives [[2, 2, 0], ...]).
// Without gradients the view's data is the shared storage, right as it is; a
// view taken after the change follows the tensor as any view.
TEST_CASE("a view taken before an in-place view change of its base: refused where it would be wrong") {
  const Tensor a0 = arange(6).to(kFloat64).reshape({2, 3});
  {
    Tensor a = a0.clone().requires_grad_();
    Tensor x = a.mul(Scalar(1));
    Tensor v = x.narrow(1, 0, 2);
    x.t_();
    x.mul_(Scalar(2));
    KILN_CHECK_ERROR(v.sum(), "shape [2,3]", "changed in place to [3,2]", "view taken after");
  }
  {
    Tensor x = a0.clone();
    Tensor v = x.narrow(1, 0, 2);
    x.t_();
    x.add_(Scalar(10));
    CHECK(v.to_vector<double>() == std::vector<double>{10, 11, 13, 14});
  }
  {
    Tensor a = a0.clone().requires_grad_();
    Tensor x = a.mul(Scalar(1));
    x.t_();                         // [3, 2]
    Tensor v = x.narrow(1, 0, 1);   // a[0, :] as a column
    x.mul_(Scalar(2));
    v.sum().backward();
    CHECK(v.to_vector<double>() == std::vector<double>{0, 2, 4});
    CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 2, 2, 0, 0, 0});
  }
  auto traced = jit(
      [](Tensor t) {
        Tensor x = t.mul(Scalar(1));
        Tensor v = x.narrow(1, 0, 2);
        x.t_();
        x.mul_(Scalar(2));
        return v.sum();
      },
      "stale view");
  KILN_CHECK_ERROR(traced(a0), "changed in place to [3,2]");
}

TEST_CASE("cummax and cummin: 0-d, empty and bad dims; gradients equal finite differences (f64)") {
  auto [v0, i0] = tensor(2.5).cummax(0);
  CHECK(v0.dim() == 0);
  CHECK(v0.item<float>() == 2.5f);
  CHECK(i0.item<int64_t>() == 0);
  auto [ve, ie] = zeros({2, 0}).cummin(1);
  CHECK(ve.sizes() == Shape{2, 0});
  CHECK(ie.dtype() == kInt64);
  KILN_CHECK_ERROR(cummax(zeros({2, 3}), 2), "cummax");
  const Tensor x0 = iota_sin({3, 4}, 0.9);
  const Tensor w = iota_sin({12}, 0.3);
  auto loss = [&](const Tensor& x) {
    return std::get<0>(x.cummax(1)).add(std::get<0>(cummin(x, 0))).reshape({-1}).mul(w).sum();
  };
  check_close(autograd_grad(loss, x0), numeric_grad(loss, x0), 1e-6, 1e-7);
}

TEST_CASE("linalg: det, inv, solve equal their definitions; bad input gets a clear error") {
  const Tensor A = iota_sin({3, 3}, 0.8).add(eye(3, kFloat64).mul(Scalar(2)));
  CHECK(allclose(linalg::inv(A).matmul(A), eye(3, kFloat64), 1e-9, 1e-12));
  CHECK(allclose(A.inverse(), inverse(A)));
  const Tensor B = iota_sin({3, 2}, 0.4);
  CHECK(allclose(A.matmul(linalg::solve(A, B)), B, 1e-9, 1e-12));
  // det of a triangular matrix is the product of its diagonal; of a singular one 0.
  CHECK(det(tensor({{2.0, 5.0}, {0.0, 3.0}}, kFloat64)).item<double>() == doctest::Approx(6.0));
  CHECK(linalg::det(tensor({{1.0f, 2.0f}, {2.0f, 4.0f}})).item<float>() == 0.0f);
  CHECK(linalg::det(zeros({0, 0})).item<float>() == 1.0f);
  for (auto f : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& a) { return linalg::det(a); },
           [](const Tensor& a) { return linalg::inv(a).sum(); },
           [&](const Tensor& a) { return linalg::solve(a, B).sum(); },
           [&](const Tensor& a) { return linalg::solve(A, a.narrow(1, 0, 2)).sum(); }}) {
    check_close(autograd_grad(f, A), numeric_grad(f, A), 1e-6, 1e-7);
  }
  KILN_CHECK_ERROR(linalg::det(zeros({2, 3})), "square matrices", "[2,3]");
  KILN_CHECK_ERROR(linalg::inv(tensor({{1, 2}, {3, 4}})), "floating");
  KILN_CHECK_ERROR(linalg::inv(tensor({{1.0f, 2.0f}, {2.0f, 4.0f}})), "singular");
  KILN_CHECK_ERROR(linalg::solve(A, zeros({2}, kFloat64)), "expected B");
  KILN_CHECK_ERROR(linalg::solve(A, B.to(kFloat32)), "dtype");
  KILN_CHECK_ERROR(linalg::det(tensor({{1.0f, 2.0f}, {2.0f, 4.0f}}).requires_grad_()).backward(),
                   "singular");
  auto traced = jit([](Tensor a) { return linalg::det(a); }, "det traced");
  KILN_CHECK_ERROR(traced(A), "linalg.det", "LU's pivots", "outside the traced function",
                   "compat_gaps_test.cpp");
}

}  // namespace
}  // namespace kiln
