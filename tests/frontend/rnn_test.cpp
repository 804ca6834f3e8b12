// The recurrent modules (LSTM, GRU, RNN and their cells), conv1d, ModuleDict,
// flip, roll and clip_grad_value_. The expected numbers are libtorch 1.13's for
// the same parameters and inputs (tests/frontend/data/rnn_reference.cpp prints
// them): outputs, final states and gradients, eagerly and traced.
#include "test_util.h"

namespace kiln {
namespace {

// Parameter k (in named_parameters() order) holds 0.3 sin(0.37 i + k).
void fill(nn::Module& m) {
  NoGradGuard no_grad;
  int k = 0;
  for (auto& p : m.named_parameters()) {
    Tensor i = arange(p.value().numel(), TensorOptions(kFloat64));
    p.value().copy_(((i * 0.37 + k).sin() * 0.3).reshape(p.value().sizes()));
    ++k;
  }
}

Tensor input(Shape shape) {
  return (arange(numel(shape), TensorOptions(kFloat64)) * 0.21).cos().mul(0.8).reshape(shape);
}

// Sum, sum of squares and the first two and last elements, as the reference prints.
void check(const char* what, const Tensor& t, std::vector<double> want) {
  CAPTURE(what);
  const std::vector<double> v = t.detach().contiguous().to(kFloat64).to_vector<double>();
  double sum = 0, squares = 0;
  for (double x : v) sum += x, squares += x * x;
  const std::vector<double> got = {sum, squares, v[0], v[1], v.back()};
  for (size_t i = 0; i < 5; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-7));
}

TEST_CASE("LSTM: two layers, bidirectional, from (h0, c0), as libtorch's") {
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  lstm->to(kFloat64);
  fill(*lstm);
  CHECK(lstm->named_parameters().keys() ==
        std::vector<std::string>{
            "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
            "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1",
            "weight_hh_l1", "bias_ih_l1", "bias_hh_l1", "weight_ih_l1_reverse",
            "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"});
  CHECK(lstm->named_parameters()["weight_ih_l1"].sizes() == Shape{16, 8});
  const Tensor h0 = input({4, 2, 4}) * 0.5, c0 = input({4, 2, 4}) * -0.25;
  auto loss = [&](const Tensor& x) {
    auto [out, state] = lstm->forward(x, std::make_tuple(h0, c0));
    const Tensor l = out.sum() + std::get<0>(state).pow(2).sum() + std::get<1>(state).sum();
    return std::make_tuple(out, std::get<0>(state), std::get<1>(state), l);
  };
  const Tensor x = input({5, 2, 3}).requires_grad_();
  auto [out, h_n, c_n, l] = loss(x);
  l.backward();
  check("out", out, {-0.377572765, 2.125774399, 0.033451558, 0.267371581, -0.147097268});
  check("h_n", h_n, {-2.164404364, 1.078835616, -0.212128256, -0.197619337, -0.051329035});
  check("c_n", c_n, {-3.924498523, 4.467216546, -0.329006019, -0.305615538, -0.083433940});
  check("x.grad", x.grad(), {1.275520166, 0.393462275, 0.186691603, 0.142303135, -0.137267642});
  const Tensor w = lstm->named_parameters()["weight_hh_l1_reverse"];
  check("weight_hh_l1_reverse.grad", w.grad(),
        {-2.896182594, 3.924798467, 0.150187068, 0.136821254, -0.031445280});

  // Traced: the same outputs and gradients.
  lstm->zero_grad();
  auto traced = jit(
      [&](Tensor xs) {
        auto [o, hn, cn, lo] = loss(xs);
        lo.backward();
        return o;
      },
      "lstm_step");
  const Tensor x2 = input({5, 2, 3}).requires_grad_();
  check("traced out", traced(x2),
        {-0.377572765, 2.125774399, 0.033451558, 0.267371581, -0.147097268});
  check("traced weight_hh_l1_reverse.grad", w.grad(),
        {-2.896182594, 3.924798467, 0.150187068, 0.136821254, -0.031445280});
}

TEST_CASE("GRU batch first and RNN with relu, without bias, as libtorch's") {
  nn::GRU gru(nn::GRUOptions(3, 5).batch_first(true));
  gru->to(kFloat64);
  fill(*gru);
  const Tensor x = input({2, 6, 3}).requires_grad_();
  auto [out, h_n] = gru->forward(x);
  CHECK(out.sizes() == Shape{2, 6, 5});
  (out.pow(2).sum() + h_n.sum()).backward();
  check("out", out, {7.796235496, 5.565780660, -0.400357667, 0.043935696, 0.224476915});
  check("h_n", h_n, {1.375382283, 1.394662682, 0.440769971, -0.013817517, 0.224476915});
  check("x.grad", x.grad(), {5.198177800, 2.006925500, 0.271216448, 0.221759050, 0.190358450});
  check("bias_hh_l0.grad", gru->named_parameters()["bias_hh_l0"].grad(),
        {9.037688225, 26.806114729, 0.087109535, 0.057735725, 2.735037322});

  nn::RNN rnn(
      nn::RNNOptions(3, 4).num_layers(2).nonlinearity(nn::RNNNonlinearity::ReLU).bias(false));
  rnn->to(kFloat64);
  fill(*rnn);
  CHECK(rnn->parameters().size() == 4);
  // Unbatched [seq, feature] (libtorch 1.13 wants [4, 1, 3]; the numbers agree).
  const Tensor u = input({4, 3}).requires_grad_();
  auto [o, h] = rnn->forward(u);
  CHECK(o.sizes() == Shape{4, 4});
  CHECK(h.sizes() == Shape{2, 4});
  o.sum().backward();
  check("rnn out", o, {1.192625783, 0.223518434, 0.242878916, 0.0, 0.088692328});
  check("rnn h_n", h, {0.224797100, 0.022220351, 0.0, 0.0, 0.088692328});
  check("rnn x.grad", u.grad(), {2.075527328, 0.590856476, 0.300229423, 0.349182181, -0.053510186});
}

TEST_CASE("LSTMCell, GRUCell and RNNCell, as libtorch's") {
  nn::LSTMCell lstm(3, 4);
  nn::GRUCell gru(3, 4);
  nn::RNNCell rnn(3, 4);
  for (nn::Module* m : {static_cast<nn::Module*>(lstm.get()), static_cast<nn::Module*>(gru.get()),
                        static_cast<nn::Module*>(rnn.get())}) {
    m->to(kFloat64);
    fill(*m);
  }
  CHECK(lstm->named_parameters().keys() ==
        std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"});
  const Tensor x = input({2, 3}).requires_grad_();
  const Tensor h = input({2, 4}) * 0.5;
  auto [h1, c1] = lstm->forward(x, std::make_tuple(h, h * 2));
  const Tensor g = gru->forward(x, h);
  const Tensor r = rnn->forward(x);
  (h1.sum() + c1.sum() + g.pow(2).sum() + r.sum()).backward();
  check("lstm h", h1, {0.142865131, 0.069908053, 0.210470318, -0.005698836, 0.010424766});
  check("lstm c", c1, {0.293453575, 0.183371699, 0.289281360, -0.007158994, 0.021851661});
  check("gru h", g, {-0.727755676, 0.227162190, 0.116912198, -0.169719784, -0.018786669});
  check("rnn h", r, {1.665821670, 1.735307703, 0.498847494, 0.664393705, -0.425614551});
  check("x.grad", x.grad(), {-0.204816530, 0.076980294, 0.115972664, -0.024438361, -0.167917279});
}

TEST_CASE("recurrent modules check their inputs and states") {
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2));
  KILN_CHECK_ERROR(lstm->forward(zeros({5, 2, 7})), "LSTM: expected an input [seq, batch, 3]",
                   "got [5,2,7]");
  KILN_CHECK_ERROR(
      lstm->forward(zeros({5, 2, 3}), std::make_tuple(zeros({1, 2, 4}), zeros({2, 2, 4}))),
      "LSTM: expected h0 of shape [2,2,4], got [1,2,4]");
  nn::GRUCell cell(3, 4);
  KILN_CHECK_ERROR(cell->forward(zeros({2, 3}), zeros({3, 4})),
                   "GRUCell: expected hx of shape [2,4]");
  KILN_CHECK_ERROR(nn::RNN(0, 4), "RNN: expected input_size, hidden_size and num_layers > 0");
  std::ostringstream s;
  s << *nn::LSTM(nn::LSTMOptions(3, 4).batch_first(true));
  CHECK(
      s.str().find("LSTM(input_size=3, hidden_size=4, num_layers=1, bias=true, batch_first=true") !=
      std::string::npos);
}

TEST_CASE("conv1d and Conv1d, as libtorch's") {
  nn::Conv1d conv(nn::Conv1dOptions(4, 6, 3).stride(2).padding(1).dilation(2).groups(2));
  conv->to(kFloat64);
  fill(*conv);
  CHECK(conv->weight.sizes() == Shape{6, 2, 3});
  const Tensor x = input({2, 4, 9}).requires_grad_();
  const Tensor y = conv->forward(x);
  CHECK(y.sizes() == Shape{2, 6, 4});
  y.pow(2).sum().backward();
  check("y", y, {10.858179195, 11.339872422, 0.159867788, -0.125774786, -0.345761461});
  check("x.grad", x.grad(), {5.518663575, 33.397172487, 0.0, 0.773364623, 0.0});
  check("weight.grad", conv->weight.grad(),
        {-1.385183924, 242.335013271, -0.733042826, 0.188491530, 1.558050814});
  // One sequence [C, L], and the functional form.
  CHECK(conv->forward(input({4, 9})).sizes() == Shape{6, 4});
  const Tensor f = nn::functional::conv1d(input({1, 2, 5}), ones({3, 2, 2}, kFloat64),
                                          nn::functional::Conv1dFuncOptions().stride(2));
  CHECK(f.sizes() == Shape{1, 3, 2});
  KILN_CHECK_ERROR(conv1d(zeros({2, 4, 9, 1}), zeros({6, 2, 3})),
                   "conv1d: expected an input [N, C, L]");
}

TEST_CASE("ModuleDict holds modules by name, registered as its children") {
  nn::ModuleDict dict(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
      {"fc", nn::Linear(3, 2).ptr()}, {"act", nn::ReLU().ptr()}});
  CHECK(dict->size() == 2);
  CHECK(dict->keys() == std::vector<std::string>{"fc", "act"});
  CHECK(dict->contains("fc"));
  CHECK(dict["fc"]->as<nn::Linear>() != nullptr);
  CHECK(dict->at<nn::LinearImpl>("fc").weight.sizes() == Shape{2, 3});
  CHECK(dict->parameters().size() == 2);
  CHECK(dict->named_parameters().keys() == std::vector<std::string>{"fc.weight", "fc.bias"});
  dict->insert("out", nn::Linear(2, 1));
  CHECK(dict->parameters().size() == 4);
  dict->insert("out", nn::Linear(2, 5));  // replaces
  CHECK(dict->at<nn::LinearImpl>("out").weight.sizes() == Shape{5, 2});
  CHECK(dict->named_parameters().size() == 4);
  dict->pop("fc");
  CHECK(dict->keys() == std::vector<std::string>{"act", "out"});
  CHECK(dict->parameters().size() == 2);
  KILN_CHECK_ERROR(dict["missing"], "ModuleDict key 'missing' is not defined");
  KILN_CHECK_ERROR(dict->at<nn::LinearImpl>("act"), "ModuleDict: module 'act' is a ReLU");
  int n = 0;
  for (const auto& item : *dict) n += item.key().size() > 0;
  CHECK(n == 2);
}

TEST_CASE("flip, roll and clip_grad_value_") {
  const Tensor x = arange(6).reshape({2, 3});
  CHECK(x.flip({1}).to_vector<int64_t>() == std::vector<int64_t>{2, 1, 0, 5, 4, 3});
  CHECK(x.flip({0, 1}).to_vector<int64_t>() == std::vector<int64_t>{5, 4, 3, 2, 1, 0});
  CHECK(x.roll({1}, {1}).to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1, 5, 3, 4});
  CHECK(x.roll({-1}, {0}).to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5, 0, 1, 2});
  CHECK(x.roll({2}).to_vector<int64_t>() == std::vector<int64_t>{4, 5, 0, 1, 2, 3});
  KILN_CHECK_ERROR(x.roll({1, 2}, {0}), "roll: 2 shifts for 1 dims");
  KILN_CHECK_ERROR(x.flip({2}), "flip");
  // Traced, with the gradient (a flip's is the flipped gradient).
  const Tensor w = tensor({1.0f, 2.0f, 3.0f}).requires_grad_();
  auto f = jit([](Tensor v) { return v.flip({0}).mul(tensor({1.0f, 10.0f, 100.0f})); }, "flip");
  const Tensor y = f(w);
  CHECK(y.to_vector<float>() == std::vector<float>{3, 20, 100});
  y.sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{100, 10, 1});

  nn::Linear lin(2, 1);
  lin->weight.set_grad(tensor({{3.0f, -0.2f}}));
  nn::utils::clip_grad_value_(lin->parameters(), 0.5);
  CHECK(lin->weight.grad().to_vector<float>() == std::vector<float>{0.5f, -0.2f});
  KILN_CHECK_ERROR(nn::utils::clip_grad_value_(lin->parameters(), -1), "expected clip_value >= 0");
}

}  // namespace
}  // namespace kiln
