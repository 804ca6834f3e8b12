// The digits examples' shared part: the data set (examples/data), a training
// loop run twice from one seed, eagerly and with the whole step (forward, loss,
// backward, Adam) as one compiled plan per call, and the report and SVG curves.
// digits_mlp and digits_cnn differ only in their model.
#pragma once

#include <functional>
#include <string>

#include <kiln/kiln.h>

namespace kiln::examples {

struct DigitsModel {
  std::string name;                      // "digits_cnn": the step's name in dumps
  std::function<nn::Sequential()> make;  // called after manual_seed(0)
  bool images = false;                   // inputs [N, 1, 8, 8], else [N, 64]
  double lr = 2e-3;                      // Adam's
};

/// Trains `model` for `epochs` eagerly, then traced; prints test accuracy, ms
/// per epoch both ways and the speedup, the largest weight difference, and
/// writes loss and accuracy curves to `svg`. Returns 0.
int train_digits(const DigitsModel& model, int epochs, const std::string& svg);

}  // namespace kiln::examples
