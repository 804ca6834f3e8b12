// Exercise 3: the two-layer network (N=64, D_in=1000, H=100, D_out=10) fitted
// to random data by 500 steps of gradient descent on the squared error, three
// ways: raw tensors with a manual update under NoGradGuard; nn::Sequential with
// optim::SGD; and with a custom sigmoid autograd::Function.
#include <cstdio>
#include <iostream>

#include <kiln/kiln.h>

#include "course.h"

namespace kiln::examples {
namespace {

constexpr int64_t N = 64, D_in = 1000, H = 100, D_out = 10;
constexpr int kSteps = 500;

void report(int step, float loss) {
  if (step % 100 == 99 || step == 0) std::printf("  step %3d  loss %.6g\n", step + 1, loss);
}

// sigmoid(x) = 1 / (1 + exp(-x)), with a hand-written backward.
struct MySigmoid : autograd::Function<MySigmoid> {
  static Tensor forward(autograd::Context* ctx, Tensor x) {
    Tensor y = 1 / (1 + (-x).exp());
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(autograd::Context* ctx, std::vector<Tensor> grad) {
    Tensor y = ctx->get_saved_variables()[0];
    return {grad[0] * y * (1 - y)};
  }
};

float raw_tensors(const Tensor& x, const Tensor& y) {
  std::cout << "-- raw tensors, manual update under NoGradGuard (lr 1e-6) --\n";
  Tensor w1 = randn({D_in, H}, TensorOptions().requires_grad(true));
  Tensor w2 = randn({H, D_out}, TensorOptions().requires_grad(true));
  const double lr = 1e-6;
  float loss_value = 0;
  for (int t = 0; t < kSteps; ++t) {
    Tensor y_pred = x.mm(w1).clamp_min(0).mm(w2);
    Tensor loss = (y_pred - y).pow(2).sum();
    loss_value = loss.item<float>();
    report(t, loss_value);
    loss.backward();
    {
      NoGradGuard no_grad;
      w1 -= lr * w1.grad();
      w2 -= lr * w2.grad();
      w1.grad().zero_();
      w2.grad().zero_();
    }
  }
  return loss_value;
}

float sequential_sgd(const Tensor& x, const Tensor& y) {
  std::cout << "-- nn::Sequential + optim::SGD (lr 1e-4, MSELoss sum) --\n";
  nn::Sequential model(nn::Linear(D_in, H), nn::ReLU(), nn::Linear(H, D_out));
  nn::MSELoss loss_fn(nn::Reduction::Sum);
  optim::SGD opt(model->parameters(), /*lr=*/1e-4);
  float loss_value = 0;
  for (int t = 0; t < kSteps; ++t) {
    Tensor loss = loss_fn(model(x), y);
    loss_value = loss.item<float>();
    report(t, loss_value);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return loss_value;
}

float custom_sigmoid(const Tensor& x, const Tensor& y) {
  std::cout << "-- custom sigmoid autograd::Function (lr 1e-4) --\n";
  Tensor w1 = (randn({D_in, H}) * 0.03).requires_grad_();
  Tensor w2 = (randn({H, D_out}) * 0.1).requires_grad_();
  const double lr = 1e-4;
  float loss_value = 0;
  for (int t = 0; t < kSteps; ++t) {
    Tensor y_pred = MySigmoid::apply(x.mm(w1)).mm(w2);
    Tensor loss = (y_pred - y).pow(2).sum();
    loss_value = loss.item<float>();
    report(t, loss_value);
    loss.backward();
    NoGradGuard no_grad;
    w1 -= lr * w1.grad();
    w2 -= lr * w2.grad();
    w1.grad().zero_();
    w2.grad().zero_();
  }
  return loss_value;
}

}  // namespace

int two_layer_net() {
  std::cout << "== Exercise 3: two-layer net, N=64 D_in=1000 H=100 D_out=10, 500 steps ==\n";
  manual_seed(0);
  Tensor x = randn({N, D_in});
  Tensor y = randn({N, D_out});
  raw_tensors(x, y);
  sequential_sgd(x, y);
  custom_sigmoid(x, y);
  std::cout << "\n";
  return 0;
}

}  // namespace kiln::examples

#ifdef KILN_EXAMPLE_MAIN
int main() { return kiln::examples::two_layer_net(); }
#endif
