// What Kiln added for libtorch's spellings (issue 34), against values PyTorch
// 1.13 computes (torch.nn.functional, torch.einsum: the numbers below are its
// outputs for the same inputs): conv_transpose2d and its gradients, eagerly and
// traced; einsum; the losses and activations; padding; Dropout2d; nn::init;
// and the Tensor and Module spellings (item() as a Scalar, assignment to
// temporaries, in-place comparisons, accessor, to(dtype), named_parameters as
// an OrderedDict, Functional with functions by name and the caller's line).
#include <cmath>
#include <sstream>

#include "test_util.h"

namespace kiln {
namespace {

Tensor iota_sin(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).sin().reshape(s);
}
Tensor iota_cos(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).cos().reshape(s);
}

void check_prefix(const Tensor& t, const std::vector<float>& want, double tol = 1e-5) {
  const std::vector<float> got = t.flatten().to_vector<float>();
  REQUIRE(got.size() >= want.size());
  for (size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
}

TEST_CASE("conv_transpose2d and its gradients equal PyTorch's, eagerly and traced") {
  auto run = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y = conv_transpose2d(x, w, b, 2, 1, 1, 2, 1);
    Tensor loss = y.mul(y).sum();
    auto g = autograd::grad({loss}, {x, w, b});
    return std::vector<Tensor>{y, loss, g[0], g[1], g[2]};
  };
  Tensor x = iota_sin({2, 4, 3, 3}).requires_grad_(),
         w = iota_cos({4, 3, 3, 2}, 0.7).requires_grad_();
  Tensor b = tensor({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}).requires_grad_();
  auto traced = jit([&](Tensor x, Tensor w, Tensor b) { return run(x, w, b); }, "conv_transpose2d");
  for (const auto& r : {run(x, w, b), traced(x, w, b)}) {
    CHECK(r[0].sizes() == Shape{2, 6, 6, 5});
    CHECK(r[0].sum().item<double>() == doctest::Approx(42.08567428588867).epsilon(1e-5));
    CHECK(r[1].item<double>() == doctest::Approx(80.7783432006836).epsilon(1e-5));
    check_prefix(r[0],
                 {-0.11989994f, 0.1686345f, -0.034532167f, 0.11781482f, 0.17452383f, -0.57145667f,
                  -0.51129931f, -0.45200923f, 0.22730616f, 0.17495288f, 0.315063f, 0.028820895f});
    check_prefix(r[2], {3.0215566f, 3.7504437f, -2.9582236f, -6.8569288f, -12.032147f, -1.2528517f,
                        3.4439454f, 6.380775f, -1.904009f, 3.0781379f});
    check_prefix(r[3], {0.49440312f, 1.4748371f, 0.74643564f, -0.33334973f, -1.4343822f,
                        -3.2783723f, -0.6277976f, -0.44846448f, -0.047160104f, 1.61879f});
    check_prefix(r[4], {7.3400011f, -18.713203f, 35.476189f, 44.365963f, -56.490517f, 72.192917f});
  }
  // Dilation, a rectangular stride, padding larger than the kernel's reach (a crop).
  Tensor y2 = conv_transpose2d(iota_sin({1, 2, 4, 4}, 0.3), iota_cos({2, 3, 2, 2}, 0.5), Tensor(),
                               {1, 2}, {2, 0}, 0, 1, 2);
  CHECK(y2.sizes() == Shape{1, 3, 2, 9});
  CHECK(y2.sum().item<double>() == doctest::Approx(-1.2448902130126953).epsilon(1e-5));
  check_prefix(y2, {0.68650883f, 0, 1.8122717f, 0, 1.8134654f, 0, 1.6526673f, 0, 0.6732707f,
                    0.6709705f, 0, 0.91573822f});

  nn::ConvTranspose2d m(
      nn::ConvTranspose2dOptions(4, 6, {3, 2}).stride(2).padding(1).output_padding(1).groups(2));
  CHECK(m->weight.sizes() == Shape{4, 3, 3, 2});
  CHECK(m(iota_sin({2, 4, 3, 3})).sizes() == Shape{2, 6, 6, 5});
  KILN_CHECK_ERROR(conv_transpose2d(x, w, b, 2, 1, 2, 2, 1),
                   "output_padding (2, 2) must be smaller");
}

TEST_CASE("einsum equals torch.einsum") {
  Tensor a = arange(24).to(kFloat32).reshape({2, 3, 4}).mul(Scalar(0.1));
  Tensor c = arange(40).to(kFloat32).reshape({2, 4, 5}).mul(Scalar(0.05));
  Tensor bmm = einsum("bij,bjk->bik", {a, c});
  CHECK(bmm.sizes() == Shape{2, 3, 5});
  check_prefix(bmm, {0.35000002f, 0.38000003f, 0.41000003f, 0.44000003f, 0.47f, 0.94999999f});
  CHECK(bmm.sum().item<double>() == doctest::Approx(174.30003356933594));
  Tensor m = arange(12).to(kFloat32).reshape({3, 4});
  CHECK(einsum("ij,jk,kl->il", {m, m.t(), m}).sum().item<double>() == 33396.0);
  CHECK(einsum("ij,jk", {m, m.t()}).sum().item<double>() == 1134.0);
  check_prefix(einsum("bij->j", {a}), {6.0f, 6.6f, 7.2f, 7.8f});
  CHECK(einsum("ij->ji", {m}).sizes() == Shape{4, 3});
  CHECK(einsum("i,i->", {tensor({1.f, 2.f}), tensor({3.f, 4.f})}).item<float>() == 11.0f);
  KILN_CHECK_ERROR(einsum("ii->i", {m}), "twice in term 'ii'");
  KILN_CHECK_ERROR(einsum("ij,jk->ik", {m, m}), "letter 'j' has sizes 4 and 3");
}

TEST_CASE("losses, activations and padding equal PyTorch's") {
  namespace F = nn::functional;
  Tensor inp = tensor({{0.5f, -1.0f}, {2.0f, 0.3f}, {-0.2f, 1.5f}});
  Tensor tgt = tensor({{0.0f, -0.5f}, {0.5f, 0.5f}, {0.0f, 3.0f}});
  CHECK(F::smooth_l1_loss(inp, tgt).item<double>() == doctest::Approx(0.3816666603088379));
  CHECK(F::smooth_l1_loss(inp, tgt, nn::Reduction::Sum, 0.5).item<double>() ==
        doctest::Approx(3.0799999237060547));
  // Huber: delta times smooth L1 with beta = delta (PyTorch 1.13's numbers).
  CHECK(F::huber_loss(inp, tgt).item<double>() == doctest::Approx(0.3816666603088379));
  CHECK(F::huber_loss(inp, tgt, nn::Reduction::Sum, 0.5).item<double>() ==
        doctest::Approx(1.5399999618530273));
  CHECK(F::huber_loss(inp, tgt, nn::Reduction::Mean, 2.5).item<double>() ==
        doctest::Approx(0.4233333170413971));
  KILN_CHECK_ERROR(F::huber_loss(inp, tgt, nn::Reduction::Mean, 0.0), "huber_loss",
                   "expected delta > 0");
  CHECK(F::l1_loss(inp, tgt).item<double>() == doctest::Approx(0.7333332896232605));
  Tensor lp =
      tensor({{1.0f, 2.0f, 0.5f}, {0.1f, -1.0f, 2.0f}, {0.3f, 0.3f, 0.3f}, {2.0f, 1.0f, 0.0f}})
          .log_softmax(1);
  Tensor t = tensor(std::vector<int64_t>{1, 2, 0, -100});
  Tensor wt = tensor({0.5f, 2.0f, 1.5f});
  CHECK(F::nll_loss(lp, t, wt).item<double>() == doctest::Approx(0.43768012523651123));
  CHECK(F::nll_loss(lp, t, wt, nn::Reduction::Sum).item<double>() ==
        doctest::Approx(1.750720500946045));
  CHECK(F::binary_cross_entropy(tensor({0.2f, 0.7f, 0.9f}), tensor({0.f, 1.f, 1.f}),
                                tensor({1.f, 2.f, 0.5f}))
            .item<double>() == doctest::Approx(0.32972458004951477));
  Tensor z = tensor({-2.0f, -0.5f, 0.0f, 0.7f, 3.0f});
  check_prefix(F::elu(z, 0.5), {-0.43233237f, -0.19673467f, 0, 0.69999999f, 3});
  check_prefix(F::selu(z), {-1.5201665f, -0.69175816f, 0, 0.73549068f, 3.1521029f});
  check_prefix(F::hardtanh(z, -1.0, 0.5), {-1, -0.5f, 0, 0.5f, 0.5f});
  check_prefix(F::normalize(tensor({{3.f, 4.f}, {0.f, 0.f}, {1.f, -1.f}})),
               {0.6f, 0.8f, 0, 0, 0.70710677f, -0.70710677f});
  Tensor q = arange(6).to(kFloat32).reshape({2, 3});
  Tensor padded = F::pad(q, {1, 2, 0, 1}, 9.0);
  CHECK(padded.sizes() == Shape{3, 6});
  check_prefix(padded, {9, 0, 1, 2, 9, 9, 9, 3, 4, 5, 9, 9, 9, 9, 9, 9, 9, 9});
  Tensor cropped = F::pad(q, {-1, 1});
  CHECK(cropped.sizes() == Shape{2, 3});
  check_prefix(cropped, {1, 2, 0, 4, 5, 0});
}

TEST_CASE("Dropout2d drops whole channels; nn::init follows PyTorch's fans") {
  manual_seed(0);
  nn::Dropout2d drop(nn::DropoutOptions(0.5));
  Tensor y = drop(ones({4, 8, 3, 3}));
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t c = 0; c < 8; ++c) {
      const std::vector<float> plane = y[n][c].flatten().to_vector<float>();
      CHECK((plane == std::vector<float>(9, 0.0f) || plane == std::vector<float>(9, 2.0f)));
    }
  drop->eval();
  CHECK(equal(drop(ones({2, 2, 2, 2})), ones({2, 2, 2, 2})));

  Tensor w = empty({64, 32, 3, 3});
  nn::init::xavier_uniform_(w);
  const double bound = std::sqrt(6.0 / (32 * 9 + 64 * 9));
  CHECK(w.abs().max().item<double>() <= bound);
  CHECK(w.abs().max().item<double>() > 0.9 * bound);
  nn::init::kaiming_normal_(w, 0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
  CHECK(w.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.05));
  nn::init::constant_(w, 0.25);
  CHECK(w.mean().item<double>() == 0.25);
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::LeakyReLU, 0.2) ==
        doctest::Approx(std::sqrt(2.0 / 1.04)));
}

TEST_CASE(
    "Tensor spellings: item() as a Scalar, writes through temporaries, in-place ops, accessor") {
  Tensor f = tensor({2.5f}), i = tensor(std::vector<int64_t>{7}), b = tensor({true});
  CHECK(f.item().toFloat() == 2.5f);
  CHECK(f.item().isFloatingPoint());
  CHECK(i.item().toLong() == 7);
  CHECK(i.item().to<int>() == 7);
  CHECK(b.item().toBool());

  Tensor x = zeros({2, 3});
  x[1] = 5;  // x[1] is a temporary view: the write goes to x
  x[0] = tensor({1.f, 2.f, 3.f});
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 5, 5, 5});
  Tensor g = ones({3});
  g.data() = g.data() / 4;
  CHECK(g.to_vector<float>() == std::vector<float>(3, 0.25f));
  Tensor r = g;  // assigning to a named tensor rebinds it
  r = zeros({1});
  CHECK(g.numel() == 3);

  Tensor guess = tensor(std::vector<int64_t>{1, 2, 3});
  guess.eq_(tensor(std::vector<int64_t>{1, 0, 3}));
  CHECK(guess.dtype() == kInt64);
  CHECK(guess.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  manual_seed(1);
  Tensor u = empty({1000}).uniform_(0.8, 1.0);
  CHECK(u.min().item<float>() >= 0.8f);
  CHECK(u.max().item<float>() < 1.0f);
  Tensor n = empty({2000}).normal_(3.0, 0.5);
  CHECK(n.mean().item<double>() == doctest::Approx(3.0).epsilon(0.05));
  CHECK(tensor({-1.f, 4.f}).abs_().sqrt_().to_vector<float>() == std::vector<float>{1, 2});

  Tensor m = arange(6).to(kFloat32).reshape({2, 3});
  auto acc = m.accessor<float, 2>();
  CHECK(acc[1][2] == 5.0f);
  acc[0][1] = -1;
  CHECK(m[0][1].item<float>() == -1.0f);
  KILN_CHECK_ERROR((m.accessor<double, 2>()), "accessor<f64, 2>() on a tensor of dtype f32");

  CHECK(tensor(std::vector<double>{1, 2}).dtype() == kFloat32);
  CHECK(tensor(std::vector<int>{1, 2}).dtype() == kInt64);
  CHECK(tensor(3.5, kFloat64).dtype() == kFloat64);
  CHECK(tensor(3).dtype() == kInt64);
  CHECK(m.norm(2, 1).sizes() == Shape{2});
  CHECK(tensor({1.f, 2.f}).outer(tensor({3.f, 4.f, 5.f})).sizes() == Shape{2, 3});
  CHECK(ones({2}, TensorOptions(Device(kCPU))).options().dtype() == kFloat32);
  Tensor h = ones({2}, TensorOptions().requires_grad(true)).mul(3);
  CHECK(h.grad_fn() != nullptr);
  CHECK(h.grad_fn()->name() == "MulBackward");
  CHECK(ones({1}).grad_fn() == nullptr);
}

TEST_CASE("Module spellings: OrderedDict, to(dtype), holders from nullptr, Functional by name") {
  nn::Sequential seq(nn::Linear(2, 3), nn::Functional(relu), nn::Linear(3, 1));
  auto named = seq->named_parameters();
  CHECK(named.keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(named["2.bias"].sizes() == Shape{1});
  CHECK(named[0].key() == "0.weight");
  CHECK(named.find("nope") == nullptr);
  KILN_CHECK_ERROR(named["nope"], "'nope' is not defined");
  auto [name, first] = named[0];
  CHECK(name == "0.weight");

  const TensorImpl* handle = seq->parameters()[0].impl();
  seq->to(kFloat64);
  CHECK(seq->parameters()[0].dtype() == kFloat64);
  CHECK(seq->parameters()[0].impl() == handle);
  CHECK(seq->forward(ones({4, 2}, kFloat64)).dtype() == kFloat64);
  CHECK(seq->modules().size() == 4);
  int count = 0;
  seq->apply([&](nn::Module&) { ++count; });
  CHECK(count == 4);
  CHECK(seq->ptr(0)->as<nn::Linear>() != nullptr);
  CHECK(seq->ptr(0)->as<nn::ReLU>() == nullptr);

  nn::Linear empty_holder(nullptr);
  CHECK(empty_holder.is_empty());
  KILN_CHECK_ERROR(empty_holder->forward(ones({1, 2})), "empty module holder");
  empty_holder = nn::Linear(nn::LinearOptions(2, 2).bias(false));
  CHECK(!empty_holder->bias.defined());

  // A function by name with a bound argument; its errors name the forward() call's line.
  nn::Functional soft(kiln::softmax, 3);
  const int line = __LINE__ + 1;
  const std::string msg = test::error_of([&] { soft(ones({2, 2})); });
  CHECK(msg.find("libtorch_parity_test.cpp:" + std::to_string(line)) != std::string::npos);
  nn::Functional leaky(nn::functional::leaky_relu, 0.5);
  CHECK(leaky(tensor({-2.f})).item<float>() == -1.0f);
  nn::Functional lambda([](const Tensor& t) { return t * 2; });
  CHECK(lambda(ones({1})).item<float>() == 2.0f);
}

TEST_CASE("repeat, index_put_, addmm, param_groups and printing") {
  Tensor a = tensor({{1.f, 2.f}, {3.f, 4.f}});
  Tensor r = a.repeat({2, 1, 3});
  CHECK(r.sizes() == Shape{2, 2, 6});
  CHECK(r[1][1].to_vector<float>() == std::vector<float>{3, 4, 3, 4, 3, 4});
  KILN_CHECK_ERROR(a.repeat({2}), "1 repeats for a tensor of rank 2");
  Tensor z = zeros({2, 3});
  z.index_put_({1, indexing::Slice(1, indexing::None)}, 7);
  z.index_put_({0, 0}, tensor({5.f}));
  CHECK(z.to_vector<float>() == std::vector<float>{5, 0, 0, 0, 7, 7});
  // Integer tensor indices are index_put_(indices, value, accumulate = false)'s:
  // they assign rows.
  z.index_put_({tensor({0})}, 1);
  CHECK(z.to_vector<float>() == std::vector<float>{1, 1, 1, 0, 7, 7});
  KILN_CHECK_ERROR(z.index_put_({tensor({0}), 1}, 1), "tensor indices mixed with other indices");
  // A bool mask assigns where it is true (libtorch's x.index_put_({x < 0}, 0)),
  // eagerly and traced.
  auto clip = [](Tensor x) {
    x.index_put_({x < 0}, 0);
    x.index_put_({tensor({false, true})}, tensor(9.f));
    return x;
  };
  const Tensor neg = tensor({{-1.f, 2.f}, {3.f, -4.f}});
  CHECK(clip(neg.clone()).to_vector<float>() == std::vector<float>{0, 2, 9, 9});
  auto traced = jit([clip](Tensor x) { return clip(x.clone()); }, "mask_put");
  CHECK(traced(neg).to_vector<float>() == std::vector<float>{0, 2, 9, 9});
  KILN_CHECK_ERROR(z.index_put_({tensor({true, false, true})}, 1),
                   "a mask of shape [3] for a tensor of shape [2,3]");
  KILN_CHECK_ERROR(z.index_put_({z > 0}, tensor({1.f, 2.f})), "expected one value");
  CHECK(ones({2}).addmm(a, a, 0.5, 2).to_vector<float>() ==
        std::vector<float>{14.5f, 20.5f, 30.5f, 44.5f});
  CHECK(a.index({"...", 1}).to_vector<float>() == std::vector<float>{2, 4});

  nn::Linear lin(2, 2);
  optim::SGD sgd(lin->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (auto& group : sgd.param_groups()) static_cast<optim::SGDOptions&>(group.options()).lr(0.01);
  CHECK(sgd.options.lr_ == 0.01);
  CHECK(sgd.lr() == 0.01);
  CHECK(sgd.param_groups()[0].params().size() == 2);
  sgd.param_groups()[0].options().set_lr(0.5);
  CHECK(sgd.param_groups()[0].options().get_lr() == 0.5);

  std::ostringstream os;
  os << kFloat32 << " " << kInt64 << " " << Scalar(3) << " " << Scalar(true);
  CHECK(os.str() == "float long int 3 true");
  struct Pair : nn::Module {
    Pair() { register_module("inner", nn::Sequential(nn::Linear(1, 1))); }
  };
  std::ostringstream m;
  m << Pair();
  CHECK(m.str().find("Pair(\n  (inner): Sequential(\n    (0): Linear(in_features=1") !=
        std::string::npos);
}

TEST_CASE("interpolate and Upsample equal PyTorch's; bool masks combine with & | ^ ~") {
  namespace F = nn::functional;
  using nn::InterpolateMode;
  using nn::InterpolateOptions;
  const Tensor x = arange(12.0, TensorOptions(kFloat64)).view({1, 1, 3, 4}) *
                   tensor({1.0, 0.5, 2.0, -1.0}, kFloat64);
  auto values = [](const Tensor& t) { return t.flatten().to_vector<double>(); };
  auto close_to = [&](const Tensor& t, const std::vector<double>& want) {
    const std::vector<double> got = values(t);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  };
  // torch.nn.functional.interpolate (PyTorch 1.13, float64).
  close_to(F::interpolate(x, InterpolateOptions().size({5, 6})),
           {0,  0,  0.5, 4, 4, -3,  0,  0,  0.5, 4, 4, -3,  4,  4,  2.5,
            12, 12, -7,  4, 4, 2.5, 12, 12, -7,  8, 8, 4.5, 20, 20, -11});
  close_to(F::interpolate(x, InterpolateOptions()
                                 .scale_factor({2.0})
                                 .mode(InterpolateMode::Bilinear)
                                 .align_corners(false)),
           {0.0,  0.125, 0.375, 1.375, 3.125, 2.25,  -1.25, -3.0,  1.0,    1.0,   1.0,   2.25,
            4.75, 3.5,   -1.5,  -4.0,  3.0,   2.75,  2.25,  4.0,   8.0,    6.0,   -2.0,  -6.0,
            5.0,  4.5,   3.5,   5.75,  11.25, 8.5,   -2.5,  -8.0,  7.0,    6.25,  4.75,  7.5,
            14.5, 11.0,  -3.0,  -10.0, 8.0,   7.125, 5.375, 8.375, 16.125, 12.25, -3.25, -11.0});
  close_to(
      F::interpolate(
          x, InterpolateOptions().size({4, 7}).mode(InterpolateMode::Bilinear).align_corners(true)),
      {0.0,
       0.25,
       0.5,
       2.25,
       4.0,
       0.5,
       -3.0,
       2.6666666666666665,
       2.25,
       1.8333333333333333,
       5.583333333333333,
       9.333333333333332,
       1.8333333333333328,
       -5.666666666666666,
       5.333333333333333,
       4.25,
       3.1666666666666665,
       8.916666666666666,
       14.666666666666664,
       3.166666666666667,
       -8.333333333333332,
       8.0,
       6.25,
       4.5,
       12.25,
       20.0,
       4.5,
       -11.0});
  close_to(F::interpolate(tensor({1.0, 3.0, -2.0, 5.0}, kFloat64).view({1, 1, 4}),
                          InterpolateOptions().scale_factor({1.5}).mode(InterpolateMode::Linear)),
           {1.0, 2.0, 2.1666666666666674, -1.1666666666666663, 1.5, 5.0});
  close_to(nn::Upsample(InterpolateOptions().scale_factor({0.5, 1.5}))->forward(x),
           {0, 0, 0.5, 4, 4, -3});
  // Gradients flow through (index_select's scatter-add): each input element
  // of a 2x nearest upsampling receives 4 output gradients.
  Tensor leaf = x.clone().requires_grad_();
  F::interpolate(leaf, InterpolateOptions().scale_factor({2.0})).sum().backward();
  CHECK(equal(leaf.grad(), full({1, 1, 3, 4}, 4.0, kFloat64)));
  KILN_CHECK_ERROR(F::interpolate(x, InterpolateOptions().size({2, 2}).scale_factor({2.0})),
                   "either size or scale_factor", "both");
  KILN_CHECK_ERROR(
      F::interpolate(x, InterpolateOptions().size({2, 2}).mode(InterpolateMode::Linear)),
      "mode linear expects a 3-D input");
  KILN_CHECK_ERROR(F::interpolate(x, InterpolateOptions().size({2, 2}).align_corners(true)),
                   "align_corners only applies");

  const Tensor a = tensor({1.f, 2.f, 3.f, 4.f}), lo = a.ge(2), hi = a.lt(4);
  CHECK(equal((lo & hi).to(kFloat32), tensor({0.f, 1.f, 1.f, 0.f})));
  CHECK(equal((lo | hi).to(kFloat32), tensor({1.f, 1.f, 1.f, 1.f})));
  CHECK(equal((lo ^ hi).to(kFloat32), tensor({1.f, 0.f, 0.f, 1.f})));
  CHECK(equal((~lo).to(kFloat32), tensor({1.f, 0.f, 0.f, 0.f})));
  KILN_CHECK_ERROR(a & a, "operator&: expected bool tensors", "f32");
}

// torch.cat([torch.tensor([-0.0, 1.0]), torch.tensor([2.0, -0.0])]) keeps both
// -0.0s. Kiln's cat adds its pieces padded with -0.0 (x + -0.0 is x); padded
// with +0.0, eager and unfused traced runs turned -0.0 into +0.0 while a fused
// kernel, which selects the pieces, kept it.
TEST_CASE("cat and stack keep -0.0, eagerly and traced, fused or not, in f32 and f64") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    const Tensor a = tensor({-0.0, 1.0}).to(dt), b = tensor({2.0, -0.0}).to(dt);
    auto join = [](Tensor x, Tensor y) {
      return std::vector<Tensor>{cat({x, y}), stack({x, y}, 1), cat({x * 1, y + 0.5}, 0)};
    };
    auto signs = [](const Tensor& t) {
      std::vector<bool> s;
      for (double v : t.to(DType::f64).to_vector<double>()) s.push_back(std::signbit(v));
      return s;
    };
    const std::vector<bool> cat_signs{true, false, false, true}, stack_signs{true, false, false, true};
    auto check = [&](const std::vector<Tensor>& r) {
      CHECK(signs(r[0]) == cat_signs);
      CHECK(signs(r[1]) == stack_signs);
      CHECK(signs(r[2])[0]);
    };
    check(join(a, b));
    for (bool fused : {true, false}) {
      CAPTURE(fused);
      auto traced = jit(join, fused ? "join_fused" : "join_unfused");
      traced.set_fusion(fused);
      check(traced(a, b));
    }
  }
  // Integers have no -0; their pieces are padded with 0 as before.
  CHECK(cat({tensor({1, 2}), tensor({3})}).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
}

}  // namespace
}  // namespace kiln
