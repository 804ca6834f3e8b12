// The autograd tutorial, written for libtorch's C++ frontend: basic autograd
// operations, a vector-Jacobian product, higher-order gradients with
// torch::autograd::grad, and two custom autograd functions (AutogradContext,
// save_for_backward, saved_data). It builds unchanged against libtorch
// (tests/compat/against_libtorch.sh). Built against Kiln, the gradient-penalty
// step and the custom-function step are traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <tuple>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using namespace torch::autograd;

// y = x W^T + b, with its own backward.
class LinearFunction : public Function<LinearFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor input, torch::Tensor weight,
                               torch::Tensor bias = torch::Tensor()) {
    ctx->save_for_backward({input, weight, bias});
    auto output = input.mm(weight.t());
    if (bias.defined()) output += bias.unsqueeze(0).expand_as(output);
    return output;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto input = saved[0], weight = saved[1], bias = saved[2];
    auto grad_output = grad_outputs[0];
    auto grad_input = grad_output.mm(weight);
    auto grad_weight = grad_output.t().mm(input);
    auto grad_bias = torch::Tensor();
    if (bias.defined()) grad_bias = grad_output.sum(0);
    return {grad_input, grad_weight, grad_bias};
  }
};

// x * constant; the constant travels to backward in saved_data.
class MulConstant : public Function<MulConstant> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor tensor, double constant) {
    ctx->saved_data["constant"] = constant;
    return tensor * constant;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    return {grad_outputs[0] * ctx->saved_data["constant"].toDouble(), torch::Tensor()};
  }
};

void print(const char* name, const torch::Tensor& t) {
  auto flat = t.reshape({-1}).to(torch::kDouble);
  std::printf("%s:", name);
  for (int64_t i = 0; i < flat.numel(); ++i) std::printf(" %.6f", flat[i].item<double>());
  std::printf("\n");
}

torch::nn::Linear penalty_model{nullptr};

using Three = std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>;

// MSE plus a gradient penalty on the input, then its backward: higher-order gradients.
STEP(Three, penalty_step, torch::Tensor input, torch::Tensor target) {
  auto output = penalty_model(input);
  auto loss = torch::nn::MSELoss()(output, target);
  auto grad_output = torch::ones_like(output);
  auto gradient = torch::autograd::grad({output}, {input}, {grad_output}, /*retain_graph=*/true,
                                        /*create_graph=*/true)[0];
  auto penalty = torch::pow(gradient.norm(2, /*dim=*/1) - 1, 2).mean();
  auto combined = loss + penalty;
  auto grads = torch::autograd::grad({combined}, {input, penalty_model->weight});
  return {combined, grads[0], grads[1]};
}

// Both custom functions, and the gradients their backwards give.
STEP(Three, custom_step, torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  auto y = LinearFunction::apply(x, weight, bias);
  auto z = MulConstant::apply(y, 5.5);
  auto loss = z.pow(2).sum();
  auto grads = torch::autograd::grad({loss}, {x, weight});
  return {loss, grads[0], grads[1]};
}

void basic_operations() {
  std::cout << "== basic autograd operations" << std::endl;
  auto x = torch::ones({2, 2}, torch::requires_grad());
  auto y = x + 2;
  std::cout << "y has a grad_fn: " << (y.grad_fn() != nullptr) << std::endl;
  auto z = y * y * 3;
  auto out = z.mean();
  print("z", z);
  print("out", out);

  auto a = torch::randn({2, 2});
  a = ((a * 3) / (a - 1));
  std::cout << "a.requires_grad: " << a.requires_grad() << std::endl;
  a.requires_grad_(true);
  std::cout << "a.requires_grad: " << a.requires_grad() << std::endl;
  auto b = (a * a).sum();
  std::cout << "b has a grad_fn: " << (b.grad_fn() != nullptr) << std::endl;

  out.backward();
  print("x.grad", x.grad());

  // A vector-Jacobian product.
  x = torch::randn(3, torch::requires_grad());
  y = x * 2;
  while (y.norm().item<double>() < 1000) y = y * 2;
  auto v = torch::tensor({0.1, 1.0, 0.0001}, torch::kFloat);
  y.backward(v);
  print("x.grad (vjp)", x.grad());

  std::cout << "x.pow(2).requires_grad: " << x.pow(2).requires_grad() << std::endl;
  {
    torch::NoGradGuard no_grad;
    std::cout << "under NoGradGuard: " << x.pow(2).requires_grad() << std::endl;
  }
  auto d = x.detach();
  std::cout << "detached: " << d.requires_grad() << ", equal: " << x.eq(d).all().item<bool>()
            << std::endl;
}

void higher_order_gradients() {
  std::cout << "== higher-order gradients" << std::endl;
  penalty_model = torch::nn::Linear(4, 3);
  for (int i = 0; i < 2; ++i) {
    auto input = torch::randn({3, 4}).requires_grad_(true);
    auto target = torch::randn({3, 3});
    auto [combined, input_grad, weight_grad] = penalty_step(input, target);
    print("combined loss", combined);
    print("d/d input", input_grad);
    print("d/d weight", weight_grad);
  }
}

void custom_functions() {
  std::cout << "== custom autograd functions" << std::endl;
  for (int i = 0; i < 2; ++i) {
    auto x = torch::randn({2, 3}).requires_grad_();
    auto weight = torch::randn({4, 3}).requires_grad_();
    auto bias = torch::randn({4});
    auto [loss, x_grad, weight_grad] = custom_step(x, weight, bias);
    print("loss", loss);
    print("x.grad", x_grad);
    print("weight.grad", weight_grad);
  }
  // Eagerly, as the tutorial does it: backward() into .grad().
  auto x = torch::randn({2}).requires_grad_();
  auto y = MulConstant::apply(x, 5.5);
  y.sum().backward();
  print("MulConstant x.grad", x.grad());
}

int main() {
  std::cout << std::boolalpha;
  torch::manual_seed(0);
  basic_operations();
  higher_order_gradients();
  custom_functions();
  return 0;
}
