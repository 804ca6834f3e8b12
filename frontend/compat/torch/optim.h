// torch::optim on Kiln: Kiln's optimizers and schedulers are libtorch's names.
#pragma once

#include "torch/types.h"

namespace torch {
namespace optim = kiln::optim;
}  // namespace torch
