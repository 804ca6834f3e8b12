// Uses the public header and a gradient: prints "consumer ok 12" on success.
#include <iostream>

#include <kiln/kiln.h>

int main() {
  kiln::Tensor x = kiln::tensor({1.f, 2.f, 3.f}).requires_grad_();
  (x * x).sum().backward();
  std::cout << "consumer ok " << x.grad().sum().item<float>() << "\n";
  return 0;
}
