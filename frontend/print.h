// How `std::cout << tensor` writes a tensor. Kiln's own style is PyTorch's
// repr (Tensor::str(): tensor([[1., 2.]])); a program built through the
// libtorch compatibility header (frontend/compat/torch) gets libtorch's C++
// print instead, the same text that program prints built against libtorch.
#pragma once

#include <string>

namespace kiln {
class Tensor;

enum class TensorPrintStyle { python, libtorch };

/// The style of every later operator<< on a tensor, process-wide.
void set_tensor_print_style(TensorPrintStyle style);
TensorPrintStyle tensor_print_style();

/// libtorch's C++ print of a tensor (ATen's print(stream, tensor, 80)): the
/// values in columns of one width ("Columns 1 to 10" blocks past 80 characters,
/// a "0.001 *" scale line, "(1,.,.) = " slices above two dims), then
/// "[ CPUFloatType{2,3} ]".
std::string libtorch_str(const Tensor& t);
}  // namespace kiln
