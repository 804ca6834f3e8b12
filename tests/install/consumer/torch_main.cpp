// A program written for libtorch, built through kiln::torch_compat: prints
// "torch consumer ok 12" on success.
#include <torch/torch.h>

#include <iostream>

int main() {
  auto x = torch::tensor({1.f, 2.f, 3.f}).requires_grad_();
  torch::nn::Functional square([](const torch::Tensor& t) { return t * t; });
  square(x).sum().backward();
  std::cout << "torch consumer ok " << x.grad().sum().item<float>() << "\n";
  return 0;
}
