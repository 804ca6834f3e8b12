// Prints libtorch's results for the recurrent modules and conv1d that
// tests/frontend/rnn_test.cpp checks Kiln against: each module's parameters
// (in named_parameters() order, the k-th) are filled with
// 0.3 sin(0.37 i + k) for element i, inputs with 0.8 cos(0.21 i), and the
// outputs, final states and gradients are summarised as (sum, sum of squares,
// first elements).
//
// Build and run against Debian's libtorch-dev (1.13):
//   g++ -std=c++17 -I/usr/include/torch/csrc/api/include rnn_reference.cpp \
//       -ltorch -ltorch_cpu -lc10 -o rnn_reference && ./rnn_reference
#include <torch/torch.h>

#include <cstdio>

void fill(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  int k = 0;
  for (auto& p : m.named_parameters()) {
    auto i = torch::arange(p.value().numel(), torch::kFloat64);
    p.value().copy_(((i * 0.37 + k).sin() * 0.3).reshape(p.value().sizes()));
    ++k;
  }
}

torch::Tensor input(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (torch::arange(n, torch::kFloat64) * 0.21).cos().mul(0.8).reshape(shape).requires_grad_();
}

void show(const char* name, const torch::Tensor& t) {
  auto f = t.detach().flatten();
  std::printf("  %s: %.9f, %.9f, {%.9f, %.9f, %.9f}\n", name, f.sum().item<double>(),
              f.pow(2).sum().item<double>(), f[0].item<double>(), f[1].item<double>(),
              f[f.numel() - 1].item<double>());
}

int main() {
  {
    torch::nn::LSTM lstm(torch::nn::LSTMOptions(3, 4).num_layers(2).bidirectional(true));
    lstm->to(torch::kFloat64);
    fill(*lstm);
    auto x = input({5, 2, 3});
    auto h0 = input({4, 2, 4}).detach() * 0.5, c0 = input({4, 2, 4}).detach() * -0.25;
    auto [out, state] = lstm->forward(x, std::make_tuple(h0, c0));
    (out.sum() + std::get<0>(state).pow(2).sum() + std::get<1>(state).sum()).backward();
    std::printf("LSTM 2 layers bidirectional\n");
    show("out", out);
    show("h_n", std::get<0>(state));
    show("c_n", std::get<1>(state));
    show("x.grad", x.grad());
    show("weight_hh_l1_reverse.grad", lstm->named_parameters()["weight_hh_l1_reverse"].grad());
  }
  {
    torch::nn::GRU gru(torch::nn::GRUOptions(3, 5).batch_first(true));
    gru->to(torch::kFloat64);
    fill(*gru);
    auto x = input({2, 6, 3});
    auto [out, h_n] = gru->forward(x);
    (out.pow(2).sum() + h_n.sum()).backward();
    std::printf("GRU batch_first\n");
    show("out", out);
    show("h_n", h_n);
    show("x.grad", x.grad());
    show("bias_hh_l0.grad", gru->named_parameters()["bias_hh_l0"].grad());
  }
  {
    torch::nn::RNN rnn(torch::nn::RNNOptions(3, 4).num_layers(2).nonlinearity(torch::kReLU).bias(false));
    rnn->to(torch::kFloat64);
    fill(*rnn);
    auto x = input({4, 1, 3});  // Kiln also takes it unbatched, [4, 3]
    auto [out, h_n] = rnn->forward(x);
    out.sum().backward();
    std::printf("RNN relu, no bias, a batch of one\n");
    show("out", out);
    show("h_n", h_n);
    show("x.grad", x.grad());
  }
  {
    torch::nn::LSTMCell lstm(3, 4);
    torch::nn::GRUCell gru(3, 4);
    torch::nn::RNNCell rnn(3, 4);
    for (torch::nn::Module* m : {static_cast<torch::nn::Module*>(lstm.get()),
                                 static_cast<torch::nn::Module*>(gru.get()),
                                 static_cast<torch::nn::Module*>(rnn.get())}) {
      m->to(torch::kFloat64);
      fill(*m);
    }
    auto x = input({2, 3});
    auto h = input({2, 4}).detach() * 0.5;
    auto [h1, c1] = lstm->forward(x, std::make_tuple(h, h * 2));
    auto g = gru->forward(x, h);
    auto r = rnn->forward(x);
    (h1.sum() + c1.sum() + g.pow(2).sum() + r.sum()).backward();
    std::printf("cells\n");
    show("lstm h", h1);
    show("lstm c", c1);
    show("gru h", g);
    show("rnn h", r);
    show("x.grad", x.grad());
  }
  {
    torch::nn::Conv1d conv(torch::nn::Conv1dOptions(4, 6, 3).stride(2).padding(1).dilation(2).groups(2));
    conv->to(torch::kFloat64);
    fill(*conv);
    auto x = input({2, 4, 9});
    auto y = conv->forward(x);
    y.pow(2).sum().backward();
    std::printf("Conv1d %ld %ld %ld\n", y.size(0), y.size(1), y.size(2));
    show("y", y);
    show("x.grad", x.grad());
    show("weight.grad", conv->weight.grad());
  }
}
