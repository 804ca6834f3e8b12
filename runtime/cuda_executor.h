// Running CUDA plans (runtime/plan.h with device kCUDA): GPU kernel steps are
// launched with cuLaunchKernel and matmul steps call cuBLAS (or cuBLASLt with
// a fused bias/ReLU epilogue), all queued on the device's one stream. Nothing
// waits for the device here; the host waits only where it reads a result.
#pragma once

#include "runtime/plan.h"

namespace kiln {

/// Runs a CUDA plan over device buffers (see execute_cpu_plan). Temporaries come
/// from the caching CUDA allocator and go back to it when the steps are
/// queued (reuse is ordered on the stream). Returns before the device finishes.
void execute_cuda_plan(const Plan& plan, void* const* args, void* const* params,
                       void* const* outputs);

}  // namespace kiln
