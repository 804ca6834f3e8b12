// conv2d and pooling against direct loops in double precision (the definition,
// PyTorch's conventions), eagerly and compiled; the modules; bad arguments.
// Gradients against finite differences are in the conformance matrix.
#include <doctest/doctest.h>

#include <kiln/kiln.h>

#include <cmath>
#include <limits>
#include <utility>

#include "frontend/settings.h"
#include "ir/printer.h"
#include "tests/frontend/test_util.h"

using namespace kiln;

namespace {

double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

struct Geo {
  int64_t k, s, p, d;
};

// Output size as PyTorch defines it.
int64_t out_size(int64_t n, Geo g, bool ceil_mode) {
  const int64_t num = n + 2 * g.p - g.d * (g.k - 1) - 1;
  int64_t o = (ceil_mode ? (num + g.s - 1) / g.s : num / g.s) + 1;
  if (ceil_mode && (o - 1) * g.s >= n + g.p) --o;
  return o;
}

std::vector<double> host(const Tensor& t) {
  Tensor c = t.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

Tensor reference_conv(const Tensor& x, const Tensor& w, const Tensor& b, Geo gh, Geo gw,
                      int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0);
  const int64_t Cg = C / groups, Og = O / groups;
  const int64_t Ho = out_size(H, gh, false), Wo = out_size(W, gw, false);
  const std::vector<double> X = host(x), K = host(w);
  const std::vector<double> B = b.defined() ? host(b) : std::vector<double>(size_t(O), 0.0);
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double acc = B[size_t(o)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t a = 0; a < gh.k; ++a)
              for (int64_t e = 0; e < gw.k; ++e) {
                const int64_t r = i * gh.s - gh.p + a * gh.d, q = j * gw.s - gw.p + e * gw.d;
                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                const int64_t ci = o / Og * Cg + c;
                acc += X[size_t(((n * C + ci) * H + r) * W + q)] *
                       K[size_t(((o * Cg + c) * gh.k + a) * gw.k + e)];
              }
          y.push_back(acc);
        }
  return from_vector(y, {N, O, Ho, Wo}, kFloat64);
}

// max (avg = false) or average pooling by loops.
Tensor reference_pool(const Tensor& x, Geo g, bool avg, bool ceil_mode, bool count_include_pad) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = out_size(H, g, ceil_mode), Wo = out_size(W, g, ceil_mode);
  const std::vector<double> X = host(x);
  std::vector<double> y;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t count = 0;
        for (int64_t a = 0; a < g.k; ++a)
          for (int64_t e = 0; e < g.k; ++e) {
            const int64_t r = i * g.s - g.p + a * g.d, q = j * g.s - g.p + e * g.d;
            const bool inside = r >= 0 && r < H && q >= 0 && q < W;
            const bool padded = r < H + g.p && q < W + g.p;  // not ceil_mode's overhang
            if (inside) {
              best = std::max(best, X[size_t((nc * H + r) * W + q)]);
              sum += X[size_t((nc * H + r) * W + q)];
            }
            count += count_include_pad ? padded : inside;
          }
        y.push_back(avg ? sum / double(count) : best);
      }
  return from_vector(y, {N, C, Ho, Wo}, kFloat64);
}

}  // namespace

TEST_CASE("conv2d equals direct loops: padding, stride, dilation, groups, bias; eager and traced") {
  struct Config {
    int64_t c, o, h, w, kh, kw;
    Geo gh, gw;
    int64_t groups;
    bool bias;
  };
  const Config configs[] = {
      {1, 4, 8, 8, 3, 3, {3, 1, 1, 1}, {3, 1, 1, 1}, 1, true},    // digits' first layer
      {3, 6, 9, 7, 3, 2, {3, 2, 1, 1}, {2, 2, 0, 1}, 1, false},   // stride 2, odd sizes
      {4, 6, 10, 10, 3, 3, {3, 1, 2, 2}, {3, 3, 1, 2}, 2, true},  // dilation, groups
      {2, 2, 5, 5, 1, 1, {1, 1, 0, 1}, {1, 1, 0, 1}, 2, true},    // 1x1, depthwise
      {4, 4, 9, 8, 3, 3, {3, 2, 1, 1}, {3, 1, 2, 2}, 4, true},    // 3x3 depthwise: direct when traced
      {2, 3, 6, 6, 6, 6, {6, 1, 0, 1}, {6, 1, 0, 1}, 1, true},    // kernel = image
      // Window copies whose [H' W'] dim is nested loops (28 x 28, 18 x 18, 16 x 20).
      {3, 4, 32, 32, 5, 5, {5, 1, 0, 1}, {5, 1, 0, 1}, 1, true},  // bench_conv's rgb 5x5
      {8, 8, 18, 18, 3, 3, {3, 1, 1, 1}, {3, 1, 1, 1}, 1, true},
      {2, 4, 20, 22, 5, 3, {5, 1, 0, 1}, {3, 1, 0, 1}, 2, false},
  };
  for (const Config& cf : configs) {
    CAPTURE(cf.c);
    CAPTURE(cf.kh);
    CAPTURE(cf.groups);
    manual_seed(7);
    Tensor x = randn({2, cf.c, cf.h, cf.w});
    Tensor w = randn({cf.o, cf.c / cf.groups, cf.kh, cf.kw});
    Tensor b = cf.bias ? randn({cf.o}) : Tensor();
    const ExpandingArray2 s{cf.gh.s, cf.gw.s}, p{cf.gh.p, cf.gw.p}, d{cf.gh.d, cf.gw.d};
    Tensor want = reference_conv(x, w, b, cf.gh, cf.gw, cf.groups);
    CHECK(max_diff(conv2d(x, w, b, s, p, d, cf.groups), want) < 1e-4);
    // Traced in the form auto picks for the shape, and in each form.
    for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Im2col, ConvAlgo::Direct}) {
      CAPTURE(static_cast<int>(algo));
      test::ScopedValue scope(settings().conv, algo);  // KILN_CONV
      auto f = jit([&](Tensor in) { return conv2d(in, w, b, s, p, d, cf.groups).relu(); });
      CHECK(max_diff(f(x), want.relu()) < 1e-4);
      // Direct without gradients, at most 9 products an output: a sum of shifted
      // slices, no reduction (nn_conv.cpp's tap_sum), which auto takes too
      // whatever the outputs per group (digits' first layer, a 1x1 conv).
      const bool taps = cf.c / cf.groups * cf.kh * cf.kw <= 9 && algo != ConvAlgo::Im2col;
      const std::string text = print_graph(f.graph(x));
      CHECK((text.find(" = sum ") == std::string::npos &&
             text.find("matmul") == std::string::npos) == taps);
    }
    // One image [C, H, W] is a batch of one.
    CHECK(max_diff(conv2d(x[0], w, b, s, p, d, cf.groups), want[0]) < 1e-4);
  }
}

TEST_CASE("conv2d's direct form: the gradients of im2col's, and auto picks it for a 3x3 depthwise conv") {
  manual_seed(8);
  struct Config {
    int64_t c, o, groups;
  };
  for (Config cf : {Config{6, 6, 6}, Config{3, 4, 1}, Config{4, 8, 2}}) {
    CAPTURE(cf.c);
    CAPTURE(cf.groups);
    Tensor x = randn({2, cf.c, 7, 6}), w = randn({cf.o, cf.c / cf.groups, 3, 3}), b = randn({cf.o});
    auto grads = [&](bool traced, ConvAlgo algo) {
      test::ScopedValue scope(settings().conv, algo);  // KILN_CONV
      Tensor xi = x.clone().set_requires_grad(true), wi = w.clone().set_requires_grad(true),
             bi = b.clone().set_requires_grad(true);
      auto body = [&](Tensor in) {
        Tensor loss = conv2d(in, wi, bi, 1, 1, 1, cf.groups).tanh().sum();
        loss.backward();
        return loss;
      };
      std::vector<Tensor> out;
      if (traced) {
        auto f = jit(body);
        out.push_back(f(xi));
        // The plan of a 3x3 depthwise conv, with auto, has no matmul: it is direct.
        const std::string text = print_graph(f.graph(xi));
        CHECK((text.find("matmul") == std::string::npos) ==
              (algo == ConvAlgo::Direct || (algo == ConvAlgo::Auto && cf.o == cf.groups)));
      } else {
        out.push_back(body(xi));
      }
      for (Tensor* t : {&xi, &wi, &bi}) out.push_back(t->grad());
      return out;
    };
    const std::vector<Tensor> eager = grads(false, ConvAlgo::Auto);
    for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Im2col, ConvAlgo::Direct}) {
      CAPTURE(static_cast<int>(algo));
      const std::vector<Tensor> traced = grads(true, algo);
      for (size_t i = 0; i < eager.size(); ++i) CHECK(max_diff(traced[i], eager[i]) < 1e-4);
    }
  }
}

// Traced on the CPU, a depthwise conv with gradients takes them as tap sums
// (nn_conv.cpp's DepthwiseTaps: dx the full conv of dY with the kernel turned
// round, dW one reduction over the windows), wherever the stride is 1 and the
// padding is at most d (k - 1); elsewhere the windows form's autodiff. Both
// give eager's gradients, for every kernel shape, dilation and padding.
TEST_CASE("conv2d's depthwise gradients by taps equal im2col's: kernels, dilation, padding, stride") {
  manual_seed(9);
  struct Config {
    int64_t kh, kw, ph, pw, dh, dw, s;
  };
  const Config configs[] = {
      {3, 3, 1, 1, 1, 1, 1},  // MobileNet's
      {3, 3, 0, 0, 1, 1, 1},  // no padding
      {3, 3, 2, 2, 2, 2, 1},  // dilated
      {2, 3, 1, 0, 1, 2, 1},  // uneven kernel, padding and dilation
      {1, 5, 0, 2, 1, 1, 1},  // one row of taps
      {3, 3, 1, 1, 1, 1, 2},  // stride 2: the windows form
      {3, 1, 3, 0, 1, 1, 1},  // padding past d (k - 1): the windows form
  };
  for (const Config& cf : configs) {
    CAPTURE(cf.kh);
    CAPTURE(cf.kw);
    CAPTURE(cf.ph);
    CAPTURE(cf.pw);
    CAPTURE(cf.dh);
    CAPTURE(cf.dw);
    CAPTURE(cf.s);
    for (auto [dt, with_bias] :
         {std::pair{kFloat32, true}, std::pair{kFloat64, true}, std::pair{kFloat32, false}}) {
      CAPTURE(dtype_name(dt));
      CAPTURE(with_bias);  // the bias's gradient is a row of the weight gradient's reduction
      const int64_t c = 5;
      Tensor x = randn({3, c, 9, 8}).to(dt), w = randn({c, 1, cf.kh, cf.kw}).to(dt),
             b = with_bias ? randn({c}).to(dt) : Tensor(), dy;
      const ExpandingArray2 stride{cf.s, cf.s}, pad{cf.ph, cf.pw}, dil{cf.dh, cf.dw};
      auto grads = [&](bool traced, ConvAlgo algo) {
        test::ScopedValue scope(settings().conv, algo);  // KILN_CONV
        Tensor xi = x.clone().set_requires_grad(true), wi = w.clone().set_requires_grad(true),
               bi = with_bias ? b.clone().set_requires_grad(true) : Tensor();
        auto body = [&](Tensor in) {
          Tensor y = conv2d(in, wi, bi, stride, pad, dil, c);
          Tensor loss = (y.tanh() * y).sum();
          loss.backward();
          return loss;
        };
        std::vector<Tensor> out{traced ? jit(body)(xi) : body(xi)};
        for (Tensor* t : {&xi, &wi, &bi})
          if (t->defined()) out.push_back(t->grad());
        return out;
      };
      // The reference: eagerly by im2col and a GEMM (an eager conv may run as
      // a compiled composite, which would take the taps too).
      const std::vector<Tensor> eager = grads(false, ConvAlgo::Im2col),
                                traced = grads(true, ConvAlgo::Auto);
      const double tol = dt == kFloat64 ? 1e-10 : 1e-4;
      for (size_t i = 0; i < eager.size(); ++i) {
        CAPTURE(i);
        REQUIRE(traced[i].sizes() == eager[i].sizes());
        CHECK(max_diff(traced[i], eager[i]) < tol * (1 + eager[i].abs().max().item<double>()));
      }
    }
  }
}

// Small images of several channels, without gradients: traced, the products
// are one tall product over the batch, patches channels last [N H' W', kW kH C]
// by the weight [kW kH C, O] (nn_conv.cpp's tall_conv), whatever the batch.
TEST_CASE("conv2d's tall form for small images: one product over the batch, equal to direct loops") {
  struct Config {
    int64_t c, o, h, w, kh, kw;
    Geo gh, gw;
    bool bias;
    bool tall;  // the form it takes traced
  };
  const Config configs[] = {
      {16, 32, 4, 4, 3, 3, {3, 1, 1, 1}, {3, 1, 1, 1}, true, true},   // digits' second layer
      {8, 5, 5, 7, 3, 2, {3, 2, 1, 1}, {2, 1, 0, 2}, false, true},    // stride, dilation, 3 x 5 out
      {9, 3, 2, 3, 2, 2, {2, 1, 0, 1}, {2, 1, 1, 1}, true, true},     // 1 x 4 out
      {4, 8, 4, 4, 3, 3, {3, 1, 1, 1}, {3, 1, 1, 1}, true, false},    // too few channels
      {16, 8, 5, 5, 3, 3, {3, 1, 1, 1}, {3, 1, 1, 1}, true, false},   // 25 pixels out
  };
  for (const Config& cf : configs) {
    for (int64_t n : {1, 3, 7, 64}) {
      CAPTURE(cf.c);
      CAPTURE(cf.h);
      CAPTURE(n);
      manual_seed(11);
      Tensor x = randn({n, cf.c, cf.h, cf.w});
      Tensor w = randn({cf.o, cf.c, cf.kh, cf.kw});
      Tensor b = cf.bias ? randn({cf.o}) : Tensor();
      const ExpandingArray2 s{cf.gh.s, cf.gw.s}, p{cf.gh.p, cf.gw.p}, d{cf.gh.d, cf.gw.d};
      const Tensor want = reference_conv(x, w, b, cf.gh, cf.gw, 1);
      auto f = jit([&](Tensor in) { return conv2d(in, w, b, s, p, d, 1); });
      CHECK(max_diff(f(x), want) < 1e-4);
      CHECK(max_diff(conv2d(x, w, b, s, p, d, 1), want) < 1e-4);  // eager: compiled the same way
      const int64_t pixels = want.size(2) * want.size(3);
      const std::string text = print_graph(f.graph(x));
      // The product's line: [N H' W', O] when tall.
      const std::string shape =
          ": f32[" + std::to_string(n * pixels) + "," + std::to_string(cf.o) + "]";
      const size_t at = text.find(" = matmul ");
      REQUIRE(at != std::string::npos);
      const std::string line = text.substr(at, text.find('\n', at) - at);
      CHECK((line.find(shape) != std::string::npos) == cf.tall);
    }
  }
  // With a gradient to take, the per-image products: the gradients equal eager's.
  manual_seed(12);
  Tensor x = randn({3, 16, 4, 4}).set_requires_grad(true), w = randn({8, 16, 3, 3}),
         b = randn({8});
  auto loss = [&](Tensor in) { return conv2d(in, w, b, 1, 1, 1, 1).tanh().sum(); };
  Tensor gx = autograd::grad({loss(x)}, {x})[0];
  auto f = jit([&](Tensor in) { return autograd::grad({loss(in)}, {in})[0]; });
  CHECK(max_diff(f(x), gx) < 1e-4);
  CHECK(print_graph(f.graph(x)).find(": f32[48,8]") == std::string::npos);
}

TEST_CASE("max_pool2d and avg_pool2d equal direct loops, ceil_mode and padding included") {
  struct Config {
    Geo g;
    bool ceil_mode, count_include_pad;
  };
  const Config configs[] = {
      {{2, 2, 0, 1}, false, true}, {{3, 2, 1, 1}, false, true}, {{3, 2, 1, 1}, true, false},
      {{3, 3, 0, 1}, true, true},  {{2, 1, 0, 2}, false, true}, {{3, 2, 1, 1}, true, true},
  };
  manual_seed(5);
  Tensor x = randn({2, 3, 7, 7});
  for (const Config& c : configs) {
    CAPTURE(c.g.k);
    CAPTURE(c.g.s);
    CAPTURE(c.ceil_mode);
    auto mp = [&](const Tensor& in) {
      return max_pool2d(in, c.g.k, ExpandingArray2(c.g.s), c.g.p, c.g.d, c.ceil_mode);
    };
    Tensor want = reference_pool(x, c.g, false, c.ceil_mode, true);
    CHECK(max_diff(mp(x), want) < 1e-6);
    CHECK(max_diff(jit(mp)(x), want) < 1e-6);
    if (c.g.d != 1) continue;
    auto ap = [&](const Tensor& in) {
      return avg_pool2d(in, c.g.k, ExpandingArray2(c.g.s), c.g.p, c.ceil_mode, c.count_include_pad);
    };
    want = reference_pool(x, c.g, true, c.ceil_mode, c.count_include_pad);
    CHECK(max_diff(ap(x), want) < 1e-5);
    CHECK(max_diff(jit(ap)(x), want) < 1e-5);
  }
}

TEST_CASE("max_pool2d sends the gradient to the window's first maximum, as PyTorch") {
  Tensor x = zeros({1, 1, 2, 4}, TensorOptions().requires_grad());
  max_pool2d(x, 2).sum().backward();
  // Each 2x2 window is all ties: the first element (row-major) takes it all.
  CHECK(max_diff(x.grad().flatten(), tensor({1.f, 0.f, 1.f, 0.f, 0.f, 0.f, 0.f, 0.f})) == 0);
}

TEST_CASE("adaptive_avg_pool2d averages PyTorch's bins") {
  Tensor x = arange(0, 35, 1, kFloat64).reshape({1, 1, 5, 7});
  Tensor y = adaptive_avg_pool2d(x, {2, 3});
  // Rows [0, 3) and [2, 5); columns [0, 3), [2, 5), [4, 7).
  auto bin = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    return x.slice(2, r0, r1).slice(3, c0, c1).mean().item<double>();
  };
  const double want[2][3] = {{bin(0, 3, 0, 3), bin(0, 3, 2, 5), bin(0, 3, 4, 7)},
                             {bin(2, 5, 0, 3), bin(2, 5, 2, 5), bin(2, 5, 4, 7)}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(y[0][0][i][j].item<double>() == doctest::Approx(want[i][j]));
  CHECK(max_diff(adaptive_avg_pool2d(x, 1), x.mean({2, 3}, true)) < 1e-12);
}

TEST_CASE("Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d modules") {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).padding(1).stride(2));
  CHECK(conv->weight.sizes() == Shape{8, 3, 3, 3});
  CHECK(conv->bias.sizes() == Shape{8});
  const double bound = 1 / std::sqrt(27.0);
  CHECK(conv->weight.abs().max().item<double>() <= bound);
  CHECK(conv->repr() == "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))");
  nn::Sequential net(conv, nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                     nn::AdaptiveAvgPool2d(ExpandingArray2(1)), nn::Flatten());
  Tensor y = net(randn({4, 3, 16, 16}));
  CHECK(y.sizes() == Shape{4, 8});
  CHECK(net->parameters().size() == 2);
  nn::AvgPool2d avg(nn::AvgPool2dOptions({2, 3}).stride(1));
  CHECK(avg(randn({1, 2, 5, 5})).sizes() == Shape{1, 2, 4, 3});
  CHECK(nn::Conv2d(nn::Conv2dOptions(4, 4, 1).groups(4).bias(false))->weight.sizes() ==
        Shape{4, 1, 1, 1});
}

TEST_CASE("conv2d and pooling reject bad arguments clearly") {
  Tensor x = randn({1, 3, 5, 5});
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 2, 3, 3})), doctest::Contains("input channels"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 7, 3})),
                       doctest::Contains("smaller than the kernel's (dilated) height 7"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 3, 3}), randn({3})),
                       doctest::Contains("expected a bias [4]"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 3, 3}), Tensor(), 0),
                       doctest::Contains("expected stride >= 1"), Error);
  CHECK_THROWS_WITH_AS(conv2d(randn({3, 5}), randn({4, 3, 3, 3})),
                       doctest::Contains("expected an input [N, C, H, W]"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 3, 3}, kFloat64)), doctest::Contains("dtype"), Error);
  CHECK_THROWS_WITH_AS(max_pool2d(x, 2, std::nullopt, 2),
                       doctest::Contains("at most half the kernel size"), Error);
  CHECK_THROWS_WITH_AS(ExpandingArray2({1, 2, 3}), doctest::Contains("two"), Error);
  CHECK_THROWS_WITH_AS(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)),
                       doctest::Contains("divisible by groups"), Error);
}
