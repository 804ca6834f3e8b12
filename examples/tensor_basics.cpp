// Exercise 1: tensor basics — sum, item, reshape(-1, 1), and an elementwise
// product of an int tensor and a float tensor (type promotion).
#include <iostream>

#include <kiln/kiln.h>

#include "course.h"

namespace kiln::examples {

int tensor_basics() {
  std::cout << "== Exercise 1: tensor basics ==\n";
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  std::cout << "a = " << a << "\n";
  std::cout << "a.sum() = " << a.sum() << ", item = " << a.sum().item<float>() << "\n";
  std::cout << "a.reshape({-1, 1}) =\n" << a.reshape({-1, 1}) << "\n";
  std::cout << "a.reshape({2, -1}) =\n" << a.reshape({2, -1}) << "\n";

  Tensor ints = tensor({1, 2, 3});
  Tensor floats = tensor({0.5f, 1.5f, 2.5f});
  Tensor prod = ints * floats;
  std::cout << "int64 " << ints << " * float32 " << floats << " = " << prod << " ("
            << dtype_long_name(prod.dtype()) << ")\n";
  std::cout << "mean of the product = " << prod.mean().item<float>() << "\n\n";
  return 0;
}

}  // namespace kiln::examples

#ifdef KILN_EXAMPLE_MAIN
int main() { return kiln::examples::tensor_basics(); }
#endif
