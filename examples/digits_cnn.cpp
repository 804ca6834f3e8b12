// A small CNN on the handwritten digits, trained eagerly and then with the
// whole step compiled (as digits_mlp): two 3x3 convolutions with ReLU and 2x2
// max pooling (8x8 -> 4x4 -> 2x2), dropout, a linear classifier. Traced, each
// convolution is a window-copy kernel and one GEMM whose bias and ReLU are its
// epilogue; see frontend/nn_conv.cpp.
//   build/examples/digits_cnn [epochs] [curves.svg]
#include <algorithm>
#include <cstdlib>

#include "course.h"
#include "digits.h"

namespace kiln::examples {

int digits_cnn(int epochs, const char* svg_path) {
  DigitsModel m;
  m.name = "digits_cnn";
  m.images = true;
  m.lr = 5e-3;
  m.make = [] {
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(),
                          nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                          nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::ReLU(),
                          nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Flatten(), nn::Dropout(0.1),
                          nn::Linear(128, 10));
  };
  return train_digits(m, epochs, svg_path);
}

}  // namespace kiln::examples

#ifdef KILN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return kiln::examples::digits_cnn(argc > 1 ? std::max(1, std::atoi(argv[1])) : 20,
                                    argc > 2 ? argv[2] : "digits_cnn.svg");
}
#endif
