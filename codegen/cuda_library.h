// The CUDA C of the sort and attention library kernels (runtime/cuda_library.h
// launches them): one hand-written translation unit, compiled with NVRTC once
// per process and architecture (and kept in the NVRTC disk cache), loaded once
// per device. The same source compiles for the host under the CUDA emulation
// (codegen/cuda_emulation.h), where each kernel takes its argument struct
// through the buffers array instead (buffers[0] points at it).
#pragma once

#include <memory>
#include <string>

#include "runtime/cuda_library.h"

namespace kiln {

/// The library kernels' CUDA C (every name of cuda_library_kernel_names()).
const std::string& cuda_library_source();

/// The library kernels loaded on CUDA device `device`: compiled for its
/// architecture on first use in the process (through the disk cache under
/// cache_dir, "" for none), then shared. Throws kiln::Error with NVRTC's log
/// or the driver's error.
std::shared_ptr<const CudaLibraryFunctions> cuda_library_functions(int device,
                                                                   const std::string& cache_dir);

}  // namespace kiln
