// torch::cuda on Kiln (is_available, device_count): declared in torch/types.h.
#pragma once

#include "torch/functions.h"
