// An MLP on the handwritten digits (examples/data: 1797 8x8 images, 10
// classes), trained twice from the same seed: eagerly, then with the whole
// training step (forward, loss, backward, Adam) as one compiled plan per call.
// Dropout draws from the generator inside the plan, and with the same seed
// both runs draw the same masks, so they end with the same weights.
//   build/examples/digits_mlp [epochs] [curves.svg]
#include <algorithm>
#include <cstdlib>

#include "digits.h"

int main(int argc, char** argv) {
  using namespace kiln;
  examples::DigitsModel m;
  m.name = "digits_mlp";
  m.make = [] {
    return nn::Sequential(nn::Linear(64, 128), nn::ReLU(), nn::Dropout(0.1), nn::Linear(128, 10));
  };
  return examples::train_digits(m, argc > 1 ? std::max(1, std::atoi(argv[1])) : 30,
                                argc > 2 ? argv[2] : "digits_mlp.svg");
}
