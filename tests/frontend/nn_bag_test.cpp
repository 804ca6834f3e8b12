// EmbeddingBag, embedding_bag, Bilinear and bilinear (frontend/nn_bag.h)
// against PyTorch 1.13's values and gradients (printed by
// tests/frontend/data/make_nn_more_reference.py), eagerly and traced, with
// finite differences in f64; and ParameterList / ParameterDict
// (frontend/nn_containers.h) as libtorch's.
#include <map>

#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;
namespace F = nn::functional;

// PyTorch 1.13's summaries (make_nn_more_reference.py): first values, sum, weighted sum.
const std::map<std::string, std::vector<double>> kReference = {
    {"bag sum psw", {-0.309170187, -3.61173391, -4.56577396, 0, 0, 0, 0.93480558, 0.740555862}},
    {"bag sum psw dweight",
     {-0.0739580765, -0.234585017, -0.138855681, 0, 1.33681107, 1.21274447, -1.42437795,
      -7.13288601}},
    {"bag sum psw dpsw",
     {-1.26319575, -2.29256153, -2.29256153, -2.36271477, 1.96768785, -0.819717109, -16.3786313,
      -8.17775207}},
    {"bag mean pad", {-0.206805289, -1.06767511, -1.23429096, 0, 0, 0, -0.764900148, 0.958514378}},
    {"bag mean pad dweight",
     {0.077885434, 0.247042075, 0.146229267, 0, 0.297069132, 0.269498795, 1.67715713, -1.6727609}},
    {"bag max pad last",
     {0.909680307, -0.266193539, -1.26897562, 0, 1.10689712, 1.49403596, 6.28489593, 0.738870984}},
    {"bag max pad last dweight",
     {-0.157745883, -0.951602101, -0.705540299, 0, 0.891207397, 0.808496356, -2.02235828,
      -3.63269111}},
    {"bag 2d mean",
     {0.0723161101, -0.867304683, -1.24296212, -0.687557518, -1.44567418, -1.26374364, -1.58402261,
      1.15481474}},
    {"bag 2d mean dweight",
     {0.155770868, 0.49408415, 0.292458534, 0, 0.445603698, 0.404248178, 1.74423273, 0.515985857}},
    {"bag 2d max",
     {-0.61006695, -1.42293262, -1.21694863, 0, 1.10689712, 1.49403596, 3.59445959, -3.61379176}},
    {"bag 2d max dweight",
     {-0.157745883, -0.951602101, -0.705540299, 0, 0, 0, 1.76944257, 0.410346401}},
    {"bag 2d sum pad",
     {0.299613357, -0.582229018, -1.08547831, -0.322106719, 2.17081428, 3.25216627, 3.73277986,
      -5.25848384}},
    {"bag 2d sum pad dweight",
     {0, 0.891207397, 0.808496356, 0, 0.891207397, 0.808496356, -3.97533016, -1.67269656}},
    {"bilinear",
     {3.19365907, -2.83356524, -0.613296032, 0.68927753, 4.58946943, -4.95686197, 0.0686827898,
      0.891795496}},
    {"bilinear dx1",
     {-0.156678915, 0.406135917, 0.69276464, 0.508290112, -0.522027493, -0.713947475, 1.81697288,
      2.61818219}},
    {"bilinear dx2",
     {0.34836632, 0.353683442, 0.348803967, 0.333868504, 0.309307277, 0.157867476, 4.98894653,
      0.101232024}},
    {"bilinear dweight",
     {-0.866149187, -0.883729875, -0.827508271, -0.702179611, -0.518210292, -0.463821828,
      -5.93696079, 0.601592975}},
    {"bilinear dbias", {-0.0274943113, -0.694330692, -0.721825004, -0.558547717}},
    {"bilinear 3d",
     {3.19365907, -2.83356524, -0.613296032, 0.68927753, 4.58946943, -4.95686197, -1.16316348,
      -0.845904364}},
    {"bilinear 3d dx1",
     {-0.156678915, 0.406135917, 0.69276464, 0.508290112, -0.522027493, -0.713947475, 3.58732098,
      4.7850738}},
    {"bilinear 3d dx2",
     {0.34836632, 0.353683442, 0.348803967, 0.333868504, 0.309307277, 0.157867476, -0.677821778,
      -2.52376872}},
    {"bilinear 3d dweight",
     {-0.0795725659, -0.052876059, -0.02176366, 0.0111662671, 0.0431635305, -0.0452020094,
      0.202463672, -0.816829819}},
    {"bilinear 3d dbias", {0.907689691, -0.121506989, 0.786182702, 0.814756019}},
};

void check(const Tensor& t, const std::string& key, double tol = 2e-5) {
  CAPTURE(key);
  test::check_summary(t, kReference.at(key), tol);
}

Tensor iota_sin(Shape s, double scale) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).sin().reshape(s);
}
Tensor iota_cos(Shape s, double scale) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).cos().reshape(s);
}
Tensor longs(std::vector<int64_t> v) {
  return tensor(v);
}

struct BagCase {
  std::string name;
  std::function<Tensor(const Tensor& input, const Tensor& table, const Tensor& psw)> f;
  bool per_sample_weights = false;
};

const std::vector<BagCase>& bag_cases() {
  using O = F::EmbeddingBagFuncOptions;
  using M = nn::EmbeddingBagMode;
  static const std::vector<BagCase> cases = {
      {"bag sum psw",
       [](const Tensor& x, const Tensor& w, const Tensor& psw) {
         return F::embedding_bag(
             x, w, O().offsets(longs({0, 3, 3, 7})).mode(M::Sum).per_sample_weights(psw));
       },
       true},
      {"bag mean pad",
       [](const Tensor& x, const Tensor& w, const Tensor&) {
         return F::embedding_bag(x, w, O().offsets(longs({0, 3, 3, 7})).padding_idx(3));
       }},
      {"bag max pad last",
       [](const Tensor& x, const Tensor& w, const Tensor&) {
         return F::embedding_bag(x, w,
                                 O().offsets(longs({0, 2, 5, 5, 11}))
                                     .mode(M::Max)
                                     .padding_idx(4)
                                     .include_last_offset(true));
       }},
      {"bag 2d mean",
       [](const Tensor& x, const Tensor& w, const Tensor&) {
         return F::embedding_bag(x.narrow(0, 0, 10).reshape({5, 2}), w);
       }},
      {"bag 2d max",
       [](const Tensor& x, const Tensor& w, const Tensor&) {
         return F::embedding_bag(x.narrow(0, 1, 9).reshape({3, 3}), w, O().mode(M::Max));
       }},
      {"bag 2d sum pad",
       [](const Tensor& x, const Tensor& w, const Tensor&) {
         return F::embedding_bag(x.narrow(0, 0, 10).reshape({2, 5}), w,
                                 O().mode(M::Sum).padding_idx(4));
       }},
  };
  return cases;
}

TEST_CASE("embedding_bag equals PyTorch's in every mode, with gradients, eagerly and traced") {
  const Tensor input = longs({1, 4, 4, 9, 0, 2, 7, 3, 3, 5, 8});
  for (const BagCase& c : bag_cases()) {
    CAPTURE(c.name);
    auto run = [&](const Tensor& table0, const Tensor& psw0) {
      Tensor table = table0.detach().requires_grad_(), psw = psw0.detach().requires_grad_();
      Tensor y = c.f(input, table, psw);
      Tensor loss = y.mul(iota_sin(y.sizes(), 1.1)).sum();
      if (!c.per_sample_weights) return std::vector<Tensor>{y, autograd::grad({loss}, {table})[0]};
      auto g = autograd::grad({loss}, {table, psw});
      return std::vector<Tensor>{y, g[0], g[1]};
    };
    auto traced = jit([&](Tensor t, Tensor p) { return run(t, p); }, c.name);
    const Tensor table = iota_sin({10, 3}, 0.83).mul(Scalar(1.5));
    const Tensor psw = iota_cos({11}, 0.6).add(Scalar(0.5));
    for (const auto& r : {run(table, psw), traced(table, psw)}) {
      check(r[0], c.name);
      check(r[1], c.name + " dweight");
      if (c.per_sample_weights) check(r[2], c.name + " dpsw");
    }
  }
}

TEST_CASE("embedding_bag's gradients equal finite differences (f64); the module") {
  const Tensor input = longs({1, 4, 4, 9, 0, 2, 7, 3, 3, 5, 8});
  // Values apart, so that every bag's maximum is strict.
  const Tensor table0 = iota_sin({10, 3}, 0.83).mul(Scalar(1.5)).to(kFloat64);
  const Tensor psw0 = iota_cos({11}, 0.6).add(Scalar(0.5)).to(kFloat64);
  for (const BagCase& c : bag_cases()) {
    CAPTURE(c.name);
    auto by_table = [&](const Tensor& t) {
      Tensor y = c.f(input, t, psw0);
      return y.mul(iota_sin(y.sizes(), 1.1).to(kFloat64)).sum();
    };
    check_close(autograd_grad(by_table, table0), numeric_grad(by_table, table0), 1e-6, 1e-8);
  }
  auto by_psw = [&](const Tensor& p) {
    Tensor y = bag_cases()[0].f(input, table0, p);
    return y.mul(iota_sin(y.sizes(), 1.1).to(kFloat64)).sum();
  };
  check_close(autograd_grad(by_psw, psw0), numeric_grad(by_psw, psw0), 1e-6, 1e-8);

  // The module: N(0, 1) with the padding row zero; forward is embedding_bag with its options.
  nn::EmbeddingBag bag(
      nn::EmbeddingBagOptions(10, 3).mode(nn::EmbeddingBagMode::Sum).padding_idx(-2));
  CHECK(bag->options.padding_idx() == 8);
  CHECK(bag->weight.select(0, 8).eq(Scalar(0.0)).all().item<bool>());
  CHECK(bag->weight.requires_grad());
  const Tensor offsets = longs({0, 3, 3, 7});
  check_close(bag(input, offsets), F::embedding_bag(input, bag->weight,
                                                    F::EmbeddingBagFuncOptions()
                                                        .offsets(offsets)
                                                        .mode(nn::EmbeddingBagMode::Sum)
                                                        .padding_idx(8)));
  CHECK(bag->repr() == "EmbeddingBag(num_embeddings=10, embedding_dim=3, mode=sum, padding_idx=8)");
  // from_pretrained: the given table, frozen unless told.
  const Tensor table = iota_sin({10, 3}, 0.83).mul(Scalar(1.5));
  auto frozen = nn::EmbeddingBag::from_pretrained(table);
  CHECK_FALSE(frozen->weight.requires_grad());
  check(frozen(input.narrow(0, 0, 10).reshape({5, 2})), "bag 2d mean");
  auto trained = nn::EmbeddingBag::from_pretrained(
      table.clone(),
      nn::EmbeddingBagFromPretrainedOptions().freeze(false).mode(nn::EmbeddingBagMode::Max));
  CHECK(trained->weight.requires_grad());
  check(trained(input.narrow(0, 1, 9).reshape({3, 3})), "bag 2d max");
  auto copy = std::dynamic_pointer_cast<nn::EmbeddingBagImpl>(bag->clone());
  check_close(copy->weight, bag->weight);
}

TEST_CASE("embedding_bag refuses bad input, naming it") {
  using O = F::EmbeddingBagFuncOptions;
  using M = nn::EmbeddingBagMode;
  const Tensor w = ones({10, 3}), x = longs({1, 2, 3});
  KILN_CHECK_ERROR(F::embedding_bag(x, w), "expected integer offsets [B]");
  KILN_CHECK_ERROR(F::embedding_bag(x.reshape({1, 3}), w, O().offsets(longs({0}))),
                   "expected no offsets with a 2-D input");
  KILN_CHECK_ERROR(F::embedding_bag(x.to(kFloat32), w, O().offsets(longs({0}))), "integer indices");
  KILN_CHECK_ERROR(F::embedding_bag(x, ones({10}), O().offsets(longs({0}))),
                   "weight [num_embeddings");
  KILN_CHECK_ERROR(F::embedding_bag(x, w, O().offsets(longs({0})).per_sample_weights(ones({3}))),
                   "only supported in mode sum, got mode mean");
  KILN_CHECK_ERROR(
      F::embedding_bag(x, w, O().offsets(longs({0})).mode(M::Sum).per_sample_weights(ones({2}))),
      "per_sample_weights of the input's shape [3]");
  KILN_CHECK_ERROR(F::embedding_bag(x, w, O().offsets(longs({1}))), "offsets[0] == 0");
  KILN_CHECK_ERROR(F::embedding_bag(x, w, O().offsets(longs({0, 5}))), "embedding_bag offsets");
  KILN_CHECK_ERROR(F::embedding_bag(longs({1, 12}), w, O().offsets(longs({0}))), "embedding");
  KILN_CHECK_ERROR(F::embedding_bag(x, w, O().offsets(longs({0})).padding_idx(10)),
                   "padding_idx 10");
  KILN_CHECK_ERROR(F::embedding_bag(x.reshape({1, 3}), w, O().include_last_offset(true)),
                   "include_last_offset applies to a 1-D input");
  KILN_CHECK_ERROR(F::embedding_bag(x, w, O().offsets(longs({0})).max_norm(1.0)), "not supported");
  KILN_CHECK_ERROR(nn::EmbeddingBag(nn::EmbeddingBagOptions(4, 2).sparse(true)), "not supported");
  KILN_CHECK_ERROR(nn::EmbeddingBag::from_pretrained(ones({4})), "expected embeddings [V, D]");
  // An empty bag is zeros in every mode; no rows at all, zeros too.
  for (M mode : {M::Sum, M::Mean, M::Max}) {
    Tensor y = F::embedding_bag(x, w, O().offsets(longs({0, 0, 3})).mode(mode));
    CHECK(y.narrow(0, 0, 1).eq(Scalar(0.0)).all().item<bool>());
  }
  CHECK(F::embedding_bag(longs({}), w, O().offsets(longs({0, 0}))).sizes() == Shape{2, 3});
}

TEST_CASE("bilinear and Bilinear equal PyTorch's, with gradients, eagerly and traced") {
  for (const auto& [name, lead] :
       std::vector<std::pair<std::string, Shape>>{{"bilinear", {3}}, {"bilinear 3d", {2, 3}}}) {
    CAPTURE(name);
    Shape s1 = lead, s2 = lead;
    s1.push_back(4);
    s2.push_back(5);
    auto run = [](const Tensor& x1, const Tensor& x2, const Tensor& w, const Tensor& b) {
      Tensor y = F::bilinear(x1, x2, w, b);
      auto g = autograd::grad({y.mul(iota_cos(y.sizes(), 0.8)).sum()}, {x1, x2, w, b});
      return std::vector<Tensor>{y, g[0], g[1], g[2], g[3]};
    };
    auto traced =
        jit([&](Tensor x1, Tensor x2, Tensor w, Tensor b) { return run(x1, x2, w, b); }, name);
    Tensor x1 = iota_sin(s1, 0.53).requires_grad_(), x2 = iota_cos(s2, 0.29).requires_grad_();
    Tensor w = iota_sin({2, 4, 5}, 0.17).mul(Scalar(0.5)).requires_grad_();
    Tensor b = tensor({0.25f, -0.5f}).requires_grad_();
    for (const auto& r : {run(x1, x2, w, b), traced(x1, x2, w, b)}) {
      check(r[0], name);
      check(r[1], name + " dx1");
      check(r[2], name + " dx2");
      check(r[3], name + " dweight");
      check(r[4], name + " dbias");
    }
  }
  // f64 finite differences through the first input and the weight.
  const Tensor x2 = iota_cos({3, 5}, 0.29).to(kFloat64),
               w0 = iota_sin({2, 4, 5}, 0.17).to(kFloat64);
  auto by_x1 = [&](const Tensor& x1) {
    return F::bilinear(x1, x2, w0).mul(iota_cos({3, 2}, 0.8).to(kFloat64)).sum();
  };
  const Tensor x10 = iota_sin({3, 4}, 0.53).to(kFloat64);
  check_close(autograd_grad(by_x1, x10), numeric_grad(by_x1, x10), 1e-6, 1e-8);
  auto by_w = [&](const Tensor& w) { return F::bilinear(x10, x2, w).pow(2).sum(); };
  check_close(autograd_grad(by_w, w0), numeric_grad(by_w, w0), 1e-6, 1e-8);

  // The module: weight [out, in1, in2] and bias [out], uniform in +-1/sqrt(in1).
  nn::Bilinear m(nn::BilinearOptions(4, 5, 2));
  CHECK(m->weight.sizes() == Shape{2, 4, 5});
  CHECK(m->weight.abs().max().item<float>() <= 0.5f);
  CHECK(m->bias.abs().max().item<float>() <= 0.5f);
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"weight", "bias"});
  check_close(m(x10.to(kFloat32), x2.to(kFloat32)),
              F::bilinear(x10.to(kFloat32), x2.to(kFloat32), m->weight, m->bias));
  CHECK(nn::Bilinear(nn::BilinearOptions(4, 5, 2).bias(false))->named_parameters().size() == 1);
  CHECK(m->repr() == "Bilinear(in1_features=4, in2_features=5, out_features=2, bias=true)");
  KILN_CHECK_ERROR(m(zeros({3, 4}), zeros({2, 5})), "the same leading dims");
  KILN_CHECK_ERROR(m(zeros({3, 5}), zeros({3, 5})), "input1 [..., 4]");
  KILN_CHECK_ERROR(F::bilinear(zeros({3, 4}), zeros({3, 5}), zeros({2, 20})),
                   "weight [out, in1, in2]");
  KILN_CHECK_ERROR(F::bilinear(zeros({3, 4}), zeros({3, 5}), zeros({2, 4, 5}), zeros({3})),
                   "bias [2]");
  KILN_CHECK_ERROR(nn::Bilinear(0, 5, 2), "positive");
}

struct Scaled : nn::Module {
  Scaled() {
    scales = register_module("scales", nn::ParameterList(ones({2}), zeros({3})));
    table = register_module("table", nn::ParameterDict());
    table->insert("a", full({2}, Scalar(2.0)));
    table->insert("frozen", ones({1}));
  }
  nn::ParameterList scales{nullptr};
  nn::ParameterDict table{nullptr};
};

TEST_CASE("ParameterList and ParameterDict register their parameters as libtorch's") {
  Scaled m;
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"scales.0", "scales.1", "table.a", "table.frozen"});
  // A tensor keeps its own requires_grad.
  CHECK_FALSE(m.scales[0].requires_grad());
  Tensor learned = ones({4}).requires_grad_();
  m.scales->append(learned);
  m.scales->extend(std::vector<Tensor>{zeros({1}), zeros({5})});
  CHECK(m.scales->size() == 5);
  CHECK(m.scales[2].impl() == learned.impl());
  CHECK(m.parameters().size() == 7);
  int i = 0;
  for (const auto& item : *m.scales) CHECK(item.key() == std::to_string(i++));
  // Items of another list or of named_parameters() append their values.
  nn::ParameterList other;
  other->extend(*m.scales);
  *other += m.table->named_parameters();
  CHECK(other->size() == 7);
  other->at(0) = full({2}, Scalar(7.0));
  CHECK(other->named_parameters()["0"].sum().item<float>() == 14.0f);
  KILN_CHECK_ERROR(m.scales->at(9), "index 9 is out of range (size 5)");

  // The dict: keys, values, update, pop, clear.
  CHECK(m.table->keys() == std::vector<std::string>{"a", "frozen"});
  CHECK(m.table["a"].sum().item<float>() == 4.0f);
  CHECK(m.table->contains("frozen"));
  m.table->update(OrderedDict<std::string, Tensor>{{"a", ones({3})}, {"b", zeros({2})}});
  CHECK(m.table->keys() == std::vector<std::string>{"a", "frozen", "b"});
  CHECK(m.table->get("a").sizes() == Shape{3});
  Tensor popped = m.table->pop("frozen");
  CHECK(popped.sizes() == Shape{1});
  CHECK(m.table->size() == 2);
  KILN_CHECK_ERROR(m.table->insert("a", ones({1})), "parameter 'a' already defined");
  KILN_CHECK_ERROR(m.table->insert("x.y", ones({1})), "has no '.'");
  KILN_CHECK_ERROR(m.table["nope"], "'nope' is not defined");
  KILN_CHECK_ERROR(m.table->pop("nope"), "'nope' is not defined");

  // An optimizer updates them; a trace reads them as parameters; clones copy them.
  Tensor w = m.scales[2];
  auto step = jit([&](Tensor x) { return x.mul(w).sum(); }, "parameter_list");
  Tensor x = iota_sin({4}, 0.4);
  auto loss = step(x);
  CHECK(loss.item<float>() == doctest::Approx(x.sum().item<float>()));
  auto copy = std::dynamic_pointer_cast<nn::ParameterDictImpl>(m.table->clone());
  CHECK(copy->keys() == m.table->keys());
  CHECK(copy->get("a").impl() != m.table->get("a").impl());
  CHECK(m.scales->repr().find("(2): Parameter containing: [f32 of size [4]]") != std::string::npos);
  m.table->clear();
  CHECK(m.table->empty());
  CHECK(m.named_parameters().size() == 5);
}

}  // namespace
}  // namespace kiln
