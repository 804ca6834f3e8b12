// The activations of frontend/nn_activation.h and the 1-d pools of
// frontend/nn_pool1d.h against PyTorch 1.13's values and gradients
// (tests/frontend/data/make_nn_activation_reference.py prints them), eagerly
// and traced: on linspace(-3, 3, 13), which holds each function's kink, so
// the gradient there is PyTorch's choice; the smooth ones also against finite
// differences (f64). Also PyTorch's gradients where clamp, hardtanh, norm and
// sign had differed.
#include <map>
#include <string>

#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;
namespace F = nn::functional;

// PyTorch 1.13's values (tests/frontend/data/make_nn_activation_reference.py).
const std::map<std::string, std::vector<double>> kReference = {
      {"logsigmoid", {-3.0485873, -2.5788898, -2.1269281, -1.7014133, -1.3132617, -0.97407699, -0.69314718, -0.47407699, -0.31326169, -0.20141329, -0.12692802, -0.078889735, -0.048587352}},
      {"logsigmoid grad", {0.95257413, 1.8482836, 2.6423912, 3.270298, 3.655293, 3.7347558, 3.5, 3.0203254, 2.4204729, 1.8242551, 1.3112321, 0.91029811, 0.61653638}},
      {"softmin", {0.81757444, 0.77729988, 0.7310586, 0.67917871, 0.62245935, 0.56217653, 0.5, 0.43782353, 0.37754068, 0.32082132, 0.26894143, 0.22270015, 0.18242551}},
      {"softmin grad", {-0.074573249, -0.17310476, -0.29491785, -0.43578994, -0.58750921, -0.73840201, -0.875, -0.98453623, -1.0575167, -1.089475, -1.0813655, -1.0386288, -0.96945196}},
      {"tanhshrink", {-2.0049453, -1.5133858, -1.0359724, -0.59485173, -0.23840582, -0.037882835, 0, 0.037882835, 0.23840582, 0.59485173, 1.0359724, 1.5133858, 2.0049453}},
      {"tanhshrink grad", {0.990134, 1.9468155, 2.7880476, 3.2771735, 2.9001286, 1.2813139, 0, 1.7084184, 5.2202311, 8.192934, 10.222841, 11.680893, 12.871742}},
      {"softshrink", {-2.5, -2, -1.5, -1, -0.5, 0, 0, 0, 0.5, 1, 1.5, 2, 2.5}},
      {"softshrink grad", {1, 2, 3, 4, 5, 0, 0, 0, 9, 10, 11, 12, 13}},
      {"hardshrink", {-3, -2.5, -2, -1.5, -1, 0, 0, 0, 1, 1.5, 2, 2.5, 3}},
      {"hardshrink grad", {1, 2, 3, 4, 5, 0, 0, 0, 9, 10, 11, 12, 13}},
      {"threshold", {-2, -2, -2, -2, -2, -2, -2, -2, -2, 1.5, 2, 2.5, 3}},
      {"threshold grad", {0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 11, 12, 13}},
      {"celu", {-0.69036531, -0.68031907, -0.65979719, -0.61787659, -0.53224427, -0.35732085, 0, 0.5, 1, 1.5, 2, 2.5, 3}},
      {"celu grad", {0.013763788, 0.056231309, 0.17229784, 0.4692767, 1.1982551, 2.9372497, 7, 8, 9, 10, 11, 12, 13}},
      {"glu", {-2.8577223, -2.3103545, -1.7615941, -1.2263616, -0.7310586, -0.31122968, 0, 0.18877034, 0.26894143, 0.27363831, 0.23840584, 0.18964544, 0.14227763}},
      {"glu grad", {2.7144637, 3.951395, 4.95225, 5.5074949, 5.4248004, 4.6747708, 3.5, 2.3153143, 1.4374132, 0.92937642, 0.68127036, 0.55977952, 0.48100641}},
      {"relu6", {0, 0, 0, 0, 0, 0, 0, 0.5, 1, 1.5, 2, 2.5, 3}},
      {"relu6 grad", {0, 0, 0, 0, 0, 0, 0, 8, 9, 10, 11, 12, 13}},
      {"softsign", {-0.75, -0.71428573, -0.66666669, -0.60000002, -0.5, -0.33333334, 0, 0.33333334, 0.5, 0.60000002, 0.66666669, 0.71428573, 0.75}},
      {"softsign grad", {0.0625, 0.16326532, 0.33333331, 0.63999999, 1.25, 2.6666665, 7, 3.5555558, 2.25, 1.5999999, 1.2222223, 0.97959185, 0.8125}},
      {"max_pool1d", {0.36161545, 0.89569867, 0.99588084, 0.96127522, 0.52404422, -0.18729459, -0.80066687, -0.89264756, -0.35525349, 0.36796036, 0.89870816, 0.99647564, 0.95937473, 0.792427, 0.17388949, -0.53560317, -0.8895551, -0.66416061, 0.013628887, 0.68428963, 0.99702412, 0.99702412, 0.78825194, 0.16717467, -0.54134625, -0.80875742, -0.65904993, 0.020443494, 0.68924367, 0.9046014, 0.99752629, 0.95544016, 0.50652313, -0.20733717, -0.81274718, -0.883246}},
      {"max_pool1d grad", {0, 1, 0, 0.99500418, 0.9800666, 0.95533651, 0, 0.92106098, 0, 0.87758255, 0, 0.82533562, 0, 0, 0.76484221, 0, 0.69670671, 0, 0.62160993, 0, 0.54030234, 0.45359612, 0.36235771, 0.26749876, 0, 0.16996716, 0, 0.070737198, 0, 0, 0, -0.029199546, -0.12884454, 0, -0.22720216, 0, -0.32328954, 0, -0.92099309, 0, -0.58850116, 0, -0.66627598, 0, -0.7373938, -0.80114359, 0, 0, 0, -0.85688883, 0, -0.90407217, 0, -0.94222236, -0.97095817, -0.9899925, -0.99913514, 0, -0.99829477, 0, -0.98747981, 0, -0.96679819, 0, 0, -0.93645668}},
      {"max_pool1d dilated ceil", {0.67428792, 0.96127522, 0.79656547, -0.18729459, -0.80066687, -0.35525349, 0.67930478, 0.89870816, 0.95937473, 0.17388949, -0.80473125, -0.8895551, 0.37428832, 0.99702412, 0.95742983, 0.16717467, -0.54134625, -0.65904993, 0.3805989, 0.68924367, 0.99752629, 0.50652313, -0.54706258, -0.99303955}},
      {"max_pool1d dilated ceil grad", {0, 0, 1, 0, 0, 0.99500418, 0.9800666, 0, 0, 0.95533651, 0, 0.92106098, 0, 0, 0, 0, 0.87758255, 0, 0, 0.82533562, 0.76484221, 0, 0.69670671, 0, 0, 0.62160993, 0, 0, 0.54030234, 0, 0, 0.45359612, 0, 0, 0, 0.36235771, 0, 0, 0.26749876, 0.16996716, 0, 0, 0.070737198, 0, -0.029199546, 0, 0, 0, 0, -0.12884454, 0, 0, -0.22720216, -0.32328954, 0, -0.41614684, 0, 0, -0.50484622, 0, 0, -0.58850116, 0, 0, -0.66627598, 0}},
      {"avg_pool1d", {0.18080772, 0.4829005, 0.88178563, 0.81944144, 0.32847783, -0.17884485, -0.88189888, -0.91292125, -0.72809511, -0.16242957, 0.48819697, 0.85816288, 0.87590086, 0.6109798, -0.009367466, -0.62481517, -0.91344523, -0.84942275, -0.16762313, 0.18083292, 0.7393195, 0.91109544, 0.60631108, 0.15963255, -0.67505181, -0.82765776, -0.87649965, -0.4668771, 0.18695137, 0.65814799, 0.97648323, 0.81088245, 0.31091958, -0.35167372, -0.83031964, -0.94823831}},
      {"avg_pool1d grad", {0.74875104, 0.74875104, 0.49376768, 0.49376768, 0.48385078, 0.48385078, 0.46909937, 0.46909937, 0.52279276, 0.52279276, 0.29252753, 0.60387838, 0.60387838, 0.36538723, 0.36538723, 0.32957917, 0.32957917, 0.29047805, 0.29047805, 0.28627428, 0.28627428, 0.1511987, 0.24805355, 0.24805355, 0.10936648, 0.10936648, 0.060176089, 0.060176089, 0.010384412, 0.010384412, -0.050248068, -0.050248068, -0.042948183, -0.19442347, -0.19442347, -0.1848591, -0.1848591, -0.23024827, -0.23024827, -0.27333683, -0.27333683, -0.36921728, -0.36921728, -0.22209199, -0.56898278, -0.56898278, -0.4145081, -0.4145081, -0.44024026, -0.44024026, -0.46157363, -0.46157363, -0.55920827, -0.55920827, -0.32365271, -0.74478006, -0.74478006, -0.49935746, -0.49935746, -0.49644363, -0.49644363, -0.4885695, -0.4885695, -0.55385178, -0.55385178, -0.31215224}},
      {"adaptive_avg_pool1d", {0.34530112, 0.88178563, 0.61562026, -0.17884485, -0.91967916, -0.72809511, 0.17470656, 0.85816288, 0.75667661, -0.009367466, -0.82495725, -0.84942275, 0.013014019, 0.7393195, 0.81377345, 0.15963255, -0.77227062, -0.87649965, -0.15012203, 0.65814799, 0.91233557, 0.31091958, -0.63389409, -0.94823831}},
      {"adaptive_avg_pool1d grad", {0.33333334, 0.33333334, 0.58208442, 0.24875104, 0.24875104, 0.49376768, 0.24501665, 0.24501665, 0.56346214, 0.3184455, 0.3184455, 0.30702034, 0.30702034, 0.52641594, 0.21939564, 0.21939564, 0.42572954, 0.20633391, 0.20633391, 0.4612813, 0.25494739, 0.25494739, 0.23223557, 0.23223557, 0.38763803, 0.15540248, 0.15540248, 0.29047805, 0.13507558, 0.13507558, 0.28627428, 0.1511987, 0.1511987, 0.1207859, 0.1207859, 0.18766059, 0.06687469, 0.06687469, 0.10936648, 0.04249179, 0.04249179, 0.066070855, 0.023579067, 0.023579067, -0.0097331824, -0.0097331824, -0.041944318, -0.032211136, -0.032211136, -0.089011677, -0.056800541, -0.056800541, -0.16456372, -0.10776318, -0.10776318, -0.13871561, -0.13871561, -0.26492715, -0.12621155, -0.12621155, -0.27333683, -0.14712529, -0.14712529, -0.36921728, -0.22209199, -0.22209199}},
      {"adaptive_max_pool1d", {0.67428792, 0.99588084, 0.96127522, 0.18059623, -0.80066687, -0.35525349, 0.67930478, 0.99647564, 0.95937473, 0.51822811, -0.53560317, -0.66416061, 0.37428832, 0.99702412, 0.99702412, 0.51238793, -0.54134625, -0.65904993, 0.3805989, 0.9046014, 0.99752629, 0.78404027, -0.20733717, -0.883246}},
      {"adaptive_max_pool1d grad", {0, 0, 1, 0, 0.99500418, 0.9800666, 0, 0, 0.95533651, 0, 0, 0.92106098, 0, 0, 0, 0, 0.87758255, 0, 0, 0.82533562, 0, 0.76484221, 0.69670671, 0, 0.62160993, 0, 0, 0.54030234, 0, 0, 0, 0, 0.45359612, 0, 0, 0.36235771, 0, 0, 0.43746591, 0, 0, 0.070737198, 0, 0, -0.029199546, 0, 0, 0, 0, -0.12884454, 0, 0, -0.22720216, 0, -0.32328954, -0.41614684, 0, -0.50484622, 0, 0, -0.58850116, 0, 0, 0, 0, -0.66627598}},
};

void check_values(const Tensor& t, const std::string& key, double tol = 2e-6) {
  CAPTURE(key);
  test::check_near(t, kReference.at(key), tol);
}

using Fn = std::function<Tensor(const Tensor&)>;
const std::vector<std::pair<std::string, Fn>>& activations() {
  static const std::vector<std::pair<std::string, Fn>> fns = {
      {"logsigmoid", [](const Tensor& x) { return F::logsigmoid(x); }},
      {"softmin",
       [](const Tensor& x) {
         Tensor two = x.reshape({13, 1}).expand({13, 2}).mul(tensor({1.0f, 0.5f}).to(x.dtype()));
         return F::softmin(two, 1).narrow(1, 0, 1).reshape({13});
       }},
      {"tanhshrink", [](const Tensor& x) { return F::tanhshrink(x); }},
      {"softshrink", [](const Tensor& x) { return F::softshrink(x, 0.5); }},
      {"hardshrink", [](const Tensor& x) { return F::hardshrink(x, 0.5); }},
      {"threshold", [](const Tensor& x) { return F::threshold(x, 1.0, -2.0); }},
      {"celu", [](const Tensor& x) { return F::celu(x, 0.7); }},
      {"glu", [](const Tensor& x) { return F::glu(cat({x, x.flip({0})}), 0); }},
      {"relu6", [](const Tensor& x) { return F::relu6(x); }},
      {"softsign", [](const Tensor& x) { return F::softsign(x); }},
  };
  return fns;
}

TEST_CASE("activations equal PyTorch's, with its gradients at the kinks, eagerly and traced") {
  for (const auto& [name, f] : activations()) {
    auto run = [&f](const Tensor& x0) {
      Tensor x = x0.detach().requires_grad_();
      Tensor y = f(x);
      Tensor g = autograd::grad({y.mul(arange(1, y.numel() + 1).to(kFloat32)).sum()}, {x})[0];
      return std::vector<Tensor>{y, g};
    };
    auto traced = jit([&](Tensor x) { return run(x); }, name);
    const Tensor x = linspace(-3, 3, 13);
    for (const auto& r : {run(x), traced(x)}) {
      check_values(r[0], name);
      check_values(r[1], name + " grad", 5e-6);
    }
  }
}

TEST_CASE("the smooth activations' gradients equal finite differences (f64)") {
  const Tensor x0 = linspace(-2.9, 2.7, 9).to(kFloat64);  // off every kink
  for (const auto& [name, f] : activations()) {
    CAPTURE(name);
    auto loss = [&f](const Tensor& x) {
      Tensor y = f(x);
      return y.mul(arange(1, y.numel() + 1).to(kFloat64)).sum();
    };
    if (name == "softmin") continue;  // its input is 13 values
    check_close(autograd_grad(loss, x0), numeric_grad(loss, x0), 1e-6, 1e-7);
  }
}

TEST_CASE("the activation modules call their functions with their options") {
  const Tensor x = linspace(-3, 3, 13);
  CHECK(equal(nn::Threshold(1.0, -2.0)(x), F::threshold(x, 1.0, -2.0)));
  CHECK(equal(nn::Threshold(nn::ThresholdOptions(1.0, -2.0))(x), F::threshold(x, 1.0, -2.0)));
  CHECK(equal(nn::Softshrink(0.5)(x), F::softshrink(x, 0.5)));
  CHECK(equal(nn::Hardshrink(nn::HardshrinkOptions().lambda(0.25))(x), F::hardshrink(x, 0.25)));
  CHECK(equal(nn::CELU(nn::CELUOptions().alpha(0.7))(x), F::celu(x, 0.7)));
  CHECK(equal(nn::GLU()(x.reshape({13, 1}).expand({13, 4})),
              F::glu(x.reshape({13, 1}).expand({13, 4}), -1)));
  CHECK(equal(nn::Softmin(0)(x), F::softmin(x, 0)));
  CHECK(equal(nn::LogSigmoid()(x), F::logsigmoid(x)));
  CHECK(equal(nn::Tanhshrink()(x), F::tanhshrink(x)));
  CHECK(equal(nn::ReLU6()(x), F::relu6(x)));
  CHECK(equal(nn::Softsign()(x), F::softsign(x)));
  CHECK(nn::GLU()->name() == "GLU");
  CHECK_THROWS_WITH(F::glu(x, 0), doctest::Contains("expected an even size"));
  CHECK_THROWS_WITH(F::softshrink(x, -1), doctest::Contains("lambda >= 0"));
}

TEST_CASE("clamp's gradient flows at its bounds and hardtanh's does not, as PyTorch's") {
  // PyTorch 1.13: clamp's mask is min <= x <= max, hardtanh's min < x < max.
  // maximum and minimum, which clamp had been, split a tie's gradient in half.
  auto grads = [](const Tensor& x0) {
    Tensor x = x0.detach().requires_grad_();
    Tensor a = x.clamp(Scalar(0.0), Scalar(6.0)), b = x.clamp_min(Scalar(0.0));
    Tensor c = F::hardtanh(x, 0.0, 6.0), d = F::relu6(x);
    std::vector<Tensor> g;
    for (const Tensor& y : {a, b, c, d}) g.push_back(autograd::grad({y.sum()}, {x})[0]);
    return g;
  };
  auto traced = jit([&](Tensor x) { return grads(x); }, "clamp_grads");
  const Tensor x = tensor({0.0f, 6.0f, 3.0f, -1.0f, 7.0f});
  for (const auto& g : {grads(x), traced(x)}) {
    CHECK(g[0].to_vector<float>() == std::vector<float>{1, 1, 1, 0, 0});
    CHECK(g[1].to_vector<float>() == std::vector<float>{1, 1, 1, 0, 1});
    CHECK(g[2].to_vector<float>() == std::vector<float>{0, 0, 1, 0, 0});
    CHECK(g[3].to_vector<float>() == std::vector<float>{0, 0, 1, 0, 0});
  }
  // Without a gradient the values are the same, NaN included.
  const Tensor n = tensor({std::nanf(""), -2.0f, 9.0f, 0.0f});
  Tensor with_grad = n.detach().requires_grad_().clamp(Scalar(-1.0), Scalar(6.0)).detach();
  CHECK(with_grad.isnan().to_vector<bool>() == std::vector<bool>{true, false, false, false});
  Tensor without = n.clamp(Scalar(-1.0), Scalar(6.0));
  CHECK(without.isnan().to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(with_grad.narrow(0, 1, 3).to_vector<float>() == std::vector<float>{-1, 6, 0});
  CHECK(without.narrow(0, 1, 3).to_vector<float>() == std::vector<float>{-1, 6, 0});
}

TEST_CASE("norm's gradient at a zero norm and sign's gradient are 0, as PyTorch's") {
  auto grads = [](const Tensor& z0, const Tensor& v0) {
    Tensor z = z0.detach().requires_grad_(), v = v0.detach().requires_grad_();
    Tensor loss = z.norm().add(v.norm(2, 1).sum()).add(v.norm(3.0)).add(z.norm(3.0, 0).sum())
                      .add(v.sign().sum());
    auto g = autograd::grad({loss}, {z, v});
    return std::vector<Tensor>{g[0], g[1], v.norm(2, 1), z.norm()};
  };
  auto traced = jit([&](Tensor z, Tensor v) { return grads(z, v); }, "norm_grads");
  const Tensor z = zeros({3}), v = tensor({0.0f, 0.0f, 3.0f, 4.0f}).reshape({2, 2});
  for (const auto& r : {grads(z, v), traced(z, v)}) {
    CHECK(r[0].to_vector<float>() == std::vector<float>{0, 0, 0});
    // Row 0's norm is 0 (gradient 0); row 1's is 5: (3, 4) / 5, plus the
    // 3-norm's x^2 / |v|_3^2 (v's 3-norm is 91^(1/3)).
    const double n3 = std::cbrt(91.0);
    const std::vector<float> g = r[1].to_vector<float>();
    CHECK(g[0] == 0.0f);
    CHECK(g[1] == 0.0f);
    CHECK(g[2] == doctest::Approx(0.6 + 9 / (n3 * n3)).epsilon(1e-6));
    CHECK(g[3] == doctest::Approx(0.8 + 16 / (n3 * n3)).epsilon(1e-6));
    CHECK(r[2].to_vector<float>() == std::vector<float>{0, 5});  // the values are unchanged
    CHECK(r[3].item<float>() == 0.0f);
  }
}

TEST_CASE("1-d pools equal PyTorch's, values and gradients, eagerly and traced") {
  using Pool = std::function<Tensor(const Tensor&)>;
  const std::vector<std::tuple<std::string, Shape, Pool>> pools = {
      {"max_pool1d", {2, 3, 6},
       [](const Tensor& x) { return F::max_pool1d(x, F::MaxPool1dFuncOptions(3).stride(2).padding(1)); }},
      {"max_pool1d dilated ceil", {2, 3, 4},
       [](const Tensor& x) {
         return F::max_pool1d(x, F::MaxPool1dFuncOptions(2).stride(3).dilation(2).ceil_mode(true));
       }},
      {"avg_pool1d", {2, 3, 6},
       [](const Tensor& x) {
         return F::avg_pool1d(x, F::AvgPool1dFuncOptions(4).stride(2).padding(2).count_include_pad(false));
       }},
      {"adaptive_avg_pool1d", {2, 3, 4}, [](const Tensor& x) { return F::adaptive_avg_pool1d(x, 4); }},
      {"adaptive_max_pool1d", {2, 3, 4}, [](const Tensor& x) { return F::adaptive_max_pool1d(x, 4); }},
  };
  const Tensor x0 = arange(2 * 3 * 11).to(kFloat32).mul(Scalar(0.37)).sin().reshape({2, 3, 11});
  const Tensor w = arange(200).to(kFloat32).mul(Scalar(0.1)).cos();
  for (const auto& [name, shape, pool] : pools) {
    auto run = [&, &pool = pool](const Tensor& in) {
      Tensor x = in.detach().requires_grad_();
      Tensor y = pool(x);
      Tensor g = autograd::grad({y.mul(w.narrow(0, 0, y.numel()).reshape(y.sizes())).sum()}, {x})[0];
      return std::vector<Tensor>{y, g};
    };
    auto traced = jit([&](Tensor x) { return run(x); }, "pool1d");
    for (const auto& r : {run(x0), traced(x0)}) {
      CHECK(r[0].sizes() == shape);
      check_values(r[0], name);
      check_values(r[1], name + " grad", 5e-6);
    }
  }
  // Modules, an unbatched input, and a 4-d input refused.
  CHECK(equal(nn::MaxPool1d(nn::MaxPool1dOptions(3).stride(2))(x0),
              F::max_pool1d(x0, F::MaxPool1dFuncOptions(3).stride(2))));
  CHECK(equal(nn::AvgPool1d(2)(x0[0]), F::avg_pool1d(x0, 2)[0]));
  CHECK(equal(nn::AdaptiveAvgPool1d(3)(x0), F::adaptive_avg_pool1d(x0, 3)));
  CHECK(equal(nn::AdaptiveMaxPool1d(3)(x0), F::adaptive_max_pool1d(x0, 3)));
  CHECK(nn::MaxPool1d(2)->repr() == "MaxPool1d(kernel_size=2, stride=2, padding=0)");
  CHECK_THROWS_WITH(F::max_pool1d(x0.reshape({1, 2, 3, 11}), 2),
                    doctest::Contains("max_pool1d: expected an input [N, C, L] or [C, L]"));
}

}  // namespace
}  // namespace kiln
