// The functions and modules of frontend/nn_image.h (pad's modes, the pad
// modules, pixel_shuffle, instance_norm), cosine_similarity and
// pairwise_distance (frontend/nn_extra.h) and Adagrad, against PyTorch 1.13's
// values for the same inputs (tests/frontend/data/make_nn_image_reference.py
// prints them), eagerly and traced, with gradients also against finite
// differences (f64).
#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;
namespace F = nn::functional;

Tensor iota_sin(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).sin().reshape(s);
}
Tensor iota_cos(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).cos().reshape(s);
}

// What the reference script shows of a result: its shape, sum, sum weighted
// by iota_cos(shape, 0.1) (which sees every element's place) and first values.
struct Shown {
  Shape shape;
  double sum, weighted;
  std::vector<double> first;
};

void check_shown(const Tensor& t, const Shown& want, double tol = 2e-5) {
  REQUIRE(t.sizes() == want.shape);
  Tensor f = t.detach().to(kFloat32);
  CHECK(f.sum().item<double>() == doctest::Approx(want.sum).epsilon(tol).scale(1.0));
  CHECK(f.mul(iota_cos(t.sizes(), 0.1)).sum().item<double>() ==
        doctest::Approx(want.weighted).epsilon(tol).scale(1.0));
  const std::vector<double> got = f.flatten().to_vector<double>();
  REQUIRE(got.size() >= want.first.size());
  for (size_t i = 0; i < want.first.size(); ++i)
    CHECK(got[i] == doctest::Approx(want.first[i]).epsilon(tol).scale(1.0));
}

// f's results eagerly and traced (one call each), for the same checks.
template <class Fn>
std::vector<std::vector<Tensor>> eager_and_traced(Fn f, const char* name) {
  auto traced = jit([&]() { return f(); }, name);
  return {f(), traced()};
}

TEST_CASE("pad's reflect, replicate and circular modes equal PyTorch's, eagerly and traced") {
  const Tensor x4 = iota_sin({2, 3, 5, 6}, 0.37), x3 = iota_sin({2, 3, 7}, 0.41),
               x5 = iota_sin({1, 2, 3, 4, 5}, 0.23);
  using M = nn::PadMode;
  auto run = [&] {
    return std::vector<Tensor>{
        F::pad(x4, {1, 2, 2, 1}, M::Reflect),  F::pad(x4, {1, 2, 2, 1}, M::Replicate),
        F::pad(x4, {1, 2, 2, 1}, M::Circular), F::pad(x3, {3, 2}, M::Reflect),
        F::pad(x3, {3, 2}, M::Replicate),      F::pad(x3, {3, 2}, M::Circular),
        F::pad(x5, {1, 1, 1, 0, 0, 2}, M::Replicate)};
  };
  for (const auto& r : eager_and_traced(run, "pads")) {
    check_shown(r[0], {{2, 3, 8, 9}, 10.1495934, 7.23492336,
                       {-0.99523979, -0.96313095, -0.99523979, -0.89264756, -0.6692397}});
    check_shown(r[1], {{2, 3, 8, 9}, 16.6539974, 22.4964104, {0, 0, 0.36161545, 0.67428792}});
    check_shown(r[2], {{2, 3, 8, 9}, 19.0366688, 16.960989, {0.792427, 0.36796036, 0.67930478}});
    check_shown(r[3], {{2, 3, 12}, 5.67201185, 7.40577126, {0.94248879, 0.7311458, 0.39860934, 0}});
    check_shown(r[4], {{2, 3, 12}, 4.45304728, 6.54550076, {0, 0, 0, 0, 0.39860934}});
    check_shown(r[5], {{2, 3, 12}, 4.73755217, 5.08440208, {0.9976064, 0.88736242, 0.63003057}});
    check_shown(r[6], {{1, 2, 5, 5, 7}, -26.1906643, 15.7448606, {0, 0, 0.22797753, 0.44394812}});
  }
  // The modules pad as the function does; constant padding stays the old function's.
  CHECK(equal(nn::ReflectionPad2d(nn::ReflectionPad2dOptions({1, 2, 2, 1}))(x4),
              F::pad(x4, {1, 2, 2, 1}, M::Reflect)));
  CHECK(equal(nn::ReplicationPad1d(2)(x3), F::pad(x3, {2, 2}, M::Replicate)));
  CHECK(equal(nn::ZeroPad2d(1)(x4), F::pad(x4, {1, 1, 1, 1})));
  CHECK(equal(nn::ConstantPad2d(nn::ConstantPad2dOptions({1, 0, 2, 1}, 0.5))(x4),
              F::pad(x4, {1, 0, 2, 1}, 0.5)));
  CHECK(nn::ReflectionPad2d(1)->repr() == "ReflectionPad2d((1, 1, 1, 1))");
}

TEST_CASE("pad's modes differentiate as finite differences do (f64)") {
  const Tensor x0 = iota_sin({1, 2, 4, 5}, 0.31).to(kFloat64);
  const Tensor w = iota_cos({1, 2, 7, 9}, 0.13).to(kFloat64);
  for (nn::PadMode mode : {nn::PadMode::Reflect, nn::PadMode::Replicate, nn::PadMode::Circular}) {
    CAPTURE(nn::pad_mode_name(mode));
    auto f = [&](const Tensor& x) { return F::pad(x, {2, 2, 1, 2}, mode).mul(w).sum(); };
    check_close(autograd_grad(f, x0), numeric_grad(f, x0), 1e-6, 1e-7);
  }
}

TEST_CASE("pad's modes refuse pads they cannot make, naming the line") {
  const Tensor x = iota_sin({1, 1, 3, 4});
  const int line = __LINE__ + 1;
  const std::string msg = test::error_of([&] { (void)F::pad(x, {0, 0, 3, 0}, nn::PadMode::Reflect); });
  CHECK_MESSAGE(msg.find("reflect padding must be smaller than the dim") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("nn_image_test.cpp:" + std::to_string(line)) != std::string::npos, msg);
  CHECK_THROWS_WITH(F::pad(x, {5, 0}, nn::PadMode::Circular),
                    doctest::Contains("circular padding must be at most the dim"));
  CHECK_THROWS_WITH(F::pad(x, {-1, 0}, nn::PadMode::Replicate),
                    doctest::Contains("only constant padding may be negative"));
  CHECK_THROWS_WITH(F::pad(x, {1, 1, 1}, nn::PadMode::Reflect),
                    doctest::Contains("expected an even number of sizes"));
  CHECK_THROWS_WITH(nn::ReflectionPad2d(1)(iota_sin({4, 4})),
                    doctest::Contains("ReflectionPad2d: expected an input of 3 or 4 dims"));
}

TEST_CASE("Conv2d's and Conv1d's padding_mode pad the input so, then convolve without padding") {
  manual_seed(4);
  const Tensor x = iota_sin({2, 3, 6, 5}, 0.37), x1 = iota_sin({2, 3, 9}, 0.41);
  for (nn::PadMode mode : {nn::PadMode::Reflect, nn::PadMode::Replicate, nn::PadMode::Circular}) {
    CAPTURE(nn::pad_mode_name(mode));
    nn::Conv2d conv(nn::Conv2dOptions(3, 4, 3).padding({1, 2}).padding_mode(mode));
    auto run = [&](const Tensor& in) {
      Tensor xi = in.detach().requires_grad_();
      Tensor y = conv(xi);
      return std::vector<Tensor>{y, autograd::grad({y.mul(y).sum()}, {xi})[0]};
    };
    auto traced = jit([&](Tensor in) { return run(in); }, "padded_conv");
    const Tensor want = conv2d(F::pad(x, {2, 2, 1, 1}, mode), conv->weight, conv->bias);
    for (const auto& r : {run(x), traced(x)}) {
      CHECK(r[0].sizes() == Shape{2, 4, 6, 7});
      check_close(r[0], want, 1e-5, 1e-6);
    }
    check_close(traced(x)[1], run(x)[1], 1e-5, 1e-6);
    CHECK(conv->repr().find(std::string("padding_mode=") + nn::pad_mode_name(mode)) !=
          std::string::npos);
    nn::Conv1d conv1(nn::Conv1dOptions(3, 2, 3).padding(2).padding_mode(mode));
    check_close(conv1(x1), conv1d(F::pad(x1, {2, 2}, mode), conv1->weight, conv1->bias), 1e-5,
                1e-6);
  }
  // Zeros, the default, is the convolution's own padding.
  nn::Conv2d zeros_conv(nn::Conv2dOptions(3, 4, 3).padding(1));
  CHECK(equal(zeros_conv(x), conv2d(x, zeros_conv->weight, zeros_conv->bias, 1, 1)));
}

TEST_CASE("pixel_shuffle and pixel_unshuffle equal PyTorch's and undo each other") {
  const Tensor a = iota_sin({2, 8, 3, 3}, 0.19), b = iota_sin({2, 2, 6, 4}, 0.19);
  auto run = [&] {
    return std::vector<Tensor>{F::pixel_shuffle(a, 2), F::pixel_unshuffle(b, 2)};
  };
  for (const auto& r : eager_and_traced(run, "shuffles")) {
    check_shown(r[0], {{2, 2, 6, 6}, 8.05376816, 0.933641911, {0, 0.99032682, 0.1888589}});
    check_shown(r[1], {{2, 8, 3, 2}, 1.23128188, 1.51326609, {0, 0.37092048, 0.99871016}});
  }
  CHECK(equal(F::pixel_unshuffle(F::pixel_shuffle(a, 2), 2), a));
  CHECK(equal(nn::PixelShuffle(2)(a), F::pixel_shuffle(a, 2)));
  CHECK(equal(nn::PixelUnshuffle(2)(b), F::pixel_unshuffle(b, 2)));
  // Leading dims beyond one batch dim, and the gradient (a permutation's).
  const Tensor c = iota_sin({2, 3, 9, 2, 2}, 0.4);
  CHECK(F::pixel_shuffle(c, 3).sizes() == Shape{2, 3, 1, 6, 6});
  const Tensor x0 = iota_sin({1, 4, 2, 3}, 0.3).to(kFloat64);
  const Tensor w = iota_cos({1, 1, 4, 6}, 0.2).to(kFloat64);
  auto f = [&](const Tensor& x) { return F::pixel_shuffle(x, 2).mul(w).sum(); };
  check_close(autograd_grad(f, x0), numeric_grad(f, x0), 1e-6, 1e-7);
  CHECK_THROWS_WITH(F::pixel_shuffle(iota_sin({1, 6, 2, 2}), 2),
                    doctest::Contains("divisible by the upscale factor squared"));
  CHECK_THROWS_WITH(F::pixel_unshuffle(iota_sin({1, 1, 5, 4}), 2),
                    doctest::Contains("divisible by the downscale factor"));
}

TEST_CASE("instance_norm equals PyTorch's: the output, its gradient and the running statistics") {
  const Tensor w = iota_cos({4}, 0.7).add(Scalar(1)), b = iota_sin({4}, 0.9);
  auto run = [&] {
    Tensor x = iota_sin({3, 4, 5, 6}, 0.29).mul(Scalar(2)).add(Scalar(0.5)).requires_grad_();
    Tensor rm = zeros({4}), rv = ones({4});
    Tensor y = F::instance_norm(x, rm, rv, w, b, true, 0.2, 1e-5);
    Tensor dx = autograd::grad({y.mul(iota_sin(y.sizes(), 0.05)).sum()}, {x})[0];
    Tensor eval = F::instance_norm(x.detach(), rm, rv, w, b, false, 0.1, 1e-5);
    return std::vector<Tensor>{y, dx, rm, rv, eval};
  };
  for (const auto& r : eager_and_traced(run, "instance_norm")) {
    check_shown(r[0], {{3, 4, 5, 6}, 196.609924, -11.8519945, {-0.54151964, 0.27981207, 1.0325526}});
    check_shown(r[1], {{3, 4, 5, 6}, 0, -20.2526627, {-0.88564777, -0.78351992, -0.68410611}},
                1e-4);
    check_shown(r[2], {{4}, 0.428061873, 0.420330942, {0.12613393, 0.085135199, 0.096123047}});
    check_shown(r[3], {{4}, 4.77430248, 4.69133234, {1.2046751, 1.1898719, 1.1832741}});
    check_shown(r[4], {{3, 4, 5, 6}, 385.822113, 6.46692562, {0.68125433, 1.7233717, 2.6784596}});
  }
  const Tensor x0 = iota_sin({2, 3, 4}, 0.37).to(kFloat64);
  const Tensor wy = iota_cos({2, 3, 4}, 0.21).to(kFloat64);
  auto f = [&](const Tensor& x) { return F::instance_norm(x).mul(wy).sum(); };
  check_close(autograd_grad(f, x0), numeric_grad(f, x0), 1e-5, 1e-7);
}

TEST_CASE("InstanceNorm modules: affine, running statistics in evaluation, unbatched inputs") {
  nn::InstanceNorm2d plain(4);
  CHECK(plain->parameters().empty());
  CHECK(plain->buffers().empty());
  nn::InstanceNorm2d tracked(nn::InstanceNorm2dOptions(4).affine(true).track_running_stats(true));
  CHECK(tracked->parameters().size() == 2);
  CHECK(tracked->buffers().size() == 2);
  const Tensor x = iota_sin({3, 4, 5, 6}, 0.29).mul(Scalar(2)).add(Scalar(0.5));
  Tensor y = tracked(x);  // training: the input's statistics, the running ones updated
  CHECK(equal(y, F::instance_norm(x)));  // weight ones, bias zeros
  CHECK(tracked->running_mean.sum().item<double>() != 0.0);
  tracked->eval();
  CHECK(equal(tracked(x), F::instance_norm(x, tracked->running_mean, tracked->running_var,
                                           tracked->weight, tracked->bias, false)));
  // An unbatched [C, H, W] input is normalised as a batch of one.
  CHECK(equal(plain(x[0]), F::instance_norm(x.narrow(0, 0, 1)).squeeze(0)));
  nn::InstanceNorm1d one_d(4);
  CHECK(one_d(iota_sin({2, 4, 7})).sizes() == Shape{2, 4, 7});
  CHECK_THROWS_WITH(one_d(iota_sin({2, 3, 7})), doctest::Contains("InstanceNorm1d: expected"));
  CHECK_THROWS_WITH(F::instance_norm(iota_sin({2, 3, 1})),
                    doctest::Contains("more than 1 spatial element"));
  CHECK(tracked->repr() == "InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=true, "
                           "track_running_stats=true)");
}

TEST_CASE("cosine_similarity and pairwise_distance equal PyTorch's, clamped norms included") {
  auto run = [&] {
    Tensor a = iota_sin({4, 6}, 0.7);
    a = a.mul(tensor({1.0f, 1.0f, 0.0f, 1.0f}).reshape({4, 1})).requires_grad_();  // row 2: zeros
    Tensor b = iota_cos({4, 6}, 0.3);
    Tensor c = F::cosine_similarity(a, b, 1, 1e-8);
    Tensor da = autograd::grad({c.mul(tensor({1.0f, -2.0f, 3.0f, 0.5f})).sum()}, {a})[0];
    Tensor s = tensor({1e-3f, 0.0f}).reshape({1, 2}).requires_grad_();
    Tensor cs = F::cosine_similarity(s, tensor({1.0f, 2.0f}).reshape({1, 2}), 1, 1e-2);
    Tensor ds = autograd::grad({cs.sum()}, {s})[0];
    return std::vector<Tensor>{
        c,
        da,
        F::cosine_similarity(iota_sin({3, 5}, 0.3), iota_cos({5}, 0.2), -1),
        cs,
        ds,
        F::pairwise_distance(iota_sin({4, 6}, 0.7), iota_cos({4, 6}, 0.3)),
        F::pairwise_distance(iota_sin({4, 6}, 0.7), iota_cos({6}, 0.3), 1.0, 1e-6, true)};
  };
  for (const auto& r : eager_and_traced(run, "similarity")) {
    check_shown(r[0], {{4}, 1.33599663, 1.30489254, {0.75924122, -0.13472413, 0, 0.7114796}});
    // Row 2's gradient is b's unit vector over eps (PyTorch: 3 * b / |b| / 1e-8).
    check_shown(r[1], {{4, 6}, -419447136, -150922144,
                       {0.36821991, 0.14509253, -0.012252301, -0.048050359, 0.025954589,
                        0.13858703, 0.19353116, 0.3572298, 0.46046138, 0.50421238, 0.50341225,
                        0.47674036, -2.0241557e+08, -1.6385683e+08, -1.1066121e+08, -47580660}},
                1e-4);
    check_shown(r[2], {{3}, 1.09945047, 1.10764742, {0.76846123, 0.99043453, -0.65944529}});
    check_shown(r[3], {{1}, 0.0447213612, 0.0447213612, {0.044721361}});
    check_shown(r[4], {{1, 2}, 133.716858, 133.27002, {44.274147, 89.442719}});
    check_shown(r[5], {{4}, 8.11917591, 7.98590136, {1.1658591, 2.8492718, 2.5984879, 1.5055573}});
    check_shown(r[6], {{4, 1}, 16.9033051, 16.6619968, {2.1617203, 7.0828218, 5.5051637}});
  }
  const Tensor a0 = iota_sin({3, 5}, 0.7).to(kFloat64), b0 = iota_cos({3, 5}, 0.3).to(kFloat64);
  auto f = [&](const Tensor& a) { return F::cosine_similarity(a, b0).mul(a0.sum(1)).sum(); };
  check_close(autograd_grad(f, a0), numeric_grad(f, a0), 1e-6, 1e-7);
  nn::CosineSimilarity module(nn::CosineSimilarityOptions().dim(0));
  CHECK(equal(module(a0, b0), F::cosine_similarity(a0, b0, 0)));
  CHECK_THROWS_WITH(F::cosine_similarity(a0, b0, 2), doctest::Contains("dim 2 out of range"));
}

TEST_CASE("Adagrad equals PyTorch's with lr_decay, weight decay and a starting accumulator") {
  auto train = [](Tensor p, optim::Adagrad& opt, bool traced) {
    auto step = [&] {
      opt.zero_grad();
      p.mul(iota_cos({5}, 0.3)).pow(2).sum().backward();
      opt.step();
      return p;
    };
    auto compiled = jit(step, "adagrad_step");
    for (int i = 0; i < 3; ++i) traced ? compiled() : step();
  };
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    Tensor p = iota_sin({5}, 0.5).requires_grad_();
    optim::Adagrad opt({p}, optim::AdagradOptions(0.1).lr_decay(0.05).weight_decay(0.01)
                                .initial_accumulator_value(0.2));
    train(p, opt, traced);
    check_shown(p, {{5}, 2.528337, 2.41592598, {0, 0.29348093, 0.64144182, 0.80592781, 0.78748655}});
    CHECK(opt.state().size() == 2);  // the step count and the sum
  }
  // Traced equals eager to the bit.
  Tensor pe = iota_sin({5}, 0.5).requires_grad_(), pt = iota_sin({5}, 0.5).requires_grad_();
  optim::Adagrad oe({pe}, optim::AdagradOptions(0.3).lr_decay(0.1)),
      ot({pt}, optim::AdagradOptions(0.3).lr_decay(0.1));
  train(pe, oe, false);
  train(pt, ot, true);
  CHECK(equal(pe, pt));
}

}  // namespace
}  // namespace kiln
