// Strided copies on a CUDA device (contiguous(), writes into views): dst[i] =
// src[i] for two strided views of one shape and dtype. A copy that is dense on
// both sides is one cuMemcpy; otherwise one generated-once kernel over up to 8
// dims (after dropping size-1 dims and merging dims adjacent in both layouts).
#pragma once

#include <string>

#include "runtime/storage.h"

namespace kiln {

/// Copies on `device`; the kernel is compiled with NVRTC once per architecture
/// (cached under `cache_dir`). Throws kiln::Error for more than 8 unmergeable dims.
void cuda_strided_copy(const View& src, const View& dst, int device, const std::string& cache_dir);

}  // namespace kiln
