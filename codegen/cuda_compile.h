// The CUDA backend's entry points beside the Backend interface (backend.h,
// cuda_backend()): the architecture kernels are compiled for.
#pragma once

#include "ir/device.h"

namespace kiln {

/// The architecture (e.g. 90 for sm_90) kernels for `device` are compiled for:
/// the device's own compute capability. Throws when CUDA is unavailable.
int cuda_arch(Device device);

}  // namespace kiln
