// libtorch's header on Kiln (the kiln::torch_compat CMake target puts it on
// the include path): a program written for libtorch's C++ frontend includes
// <torch/torch.h> and builds against Kiln unchanged. See README, "Coming from
// libtorch", for what it maps and what differs.
#pragma once

#include "torch/all.h"
