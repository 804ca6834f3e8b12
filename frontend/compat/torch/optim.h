// torch::optim on Kiln: Kiln's optimizers and schedulers are libtorch's names,
// except StepLR, whose schedule is libtorch's own (below).
#pragma once

#include "torch/functions.h"

namespace torch {
namespace optim {
using namespace kiln::optim;

/// libtorch's C++ StepLR: unlike PyTorch's Python scheduler (and
/// kiln::optim::StepLR), it takes no step when constructed, so its first step()
/// leaves the learning rate as it is and every step_size-th one after that
/// multiplies it by gamma: after n calls, lr = base_lr * gamma^((n - 1) / step_size).
class StepLR : public kiln::optim::StepLR {
 public:
  using kiln::optim::StepLR::StepLR;
  void step() {
    if (calls_++ > 0) kiln::optim::StepLR::step();
  }

 private:
  int64_t calls_ = 0;
};
}  // namespace optim
}  // namespace torch
