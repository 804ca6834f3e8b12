// The CUDA backend's code generation: a fusion group -> the same kernel IR the
// CPU backend uses -> CUDA C source -> NVRTC -> PTX and cubin for one
// architecture. Needs no GPU: NVRTC runs on the host, and the generated source
// also compiles for the host with a small prelude (see cuda_emulation.h) so its
// indexing and math are tested against the reference kernels without a GPU.
// No CUDA header appears here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_info.h"
#include "codegen/kernel_ir.h"
#include "ir/graph.h"
#include "passes/fusion.h"
#include "runtime/plan.h"  // CudaLaunch

namespace kiln {

/// A generated CUDA kernel. Its signature is
///   extern "C" __global__ void <name>(void* const* buffers, long long begin, long long end)
/// over dense row-major device buffers listed in `buffers` (same convention as CpuKernel);
/// the `buffers` argument is a device pointer to the device pointers, in that order.
/// Inputs are read through the read-only data cache, so buffers must not overlap,
/// except as CudaCodegenOptions::epilogue_in_place and outputs stored in place
/// (store_in_place, lower.h) allow.
struct CudaKernelSource {
  std::string name;
  std::string source;          // complete CUDA C translation unit
  std::vector<Value> buffers;  // for Matmul groups the matmul's result comes first
  CudaLaunch launch;  // runtime/plan.h: the launch record the plan step keeps
  KernelInfo info;
  std::string kernel_ir;     // the kernel IR it was generated from, printed
  bool needs_kernel = true;  // false for a lone matmul (cuBLAS does it)
};

/// Choices the CUDA code generator makes; the defaults suit current GPUs.
struct CudaCodegenOptions {
  /// Reductions whose rows are at least this long run one block per row
  /// (BlockPerRow); shorter rows run one thread per row (GridStride).
  int64_t block_per_row_min_extent = 64;
  /// Largest block for BlockPerRow kernels (a multiple of 32, at most 1024); rows
  /// shorter than this get the smallest multiple of 32 that covers them.
  int max_block = 256;
  /// Threads per block of GridStride kernels.
  int grid_stride_block = 256;
  /// Matmul groups: the first epilogue output overwrites the matmul's result
  /// (see CpuCompileOptions::epilogue_in_place).
  bool epilogue_in_place = false;
};

/// Generates CUDA C for one group of g (Elementwise, Reduction, Matmul epilogue, Copy).
/// Equal kernels (whatever graph they came from) give byte-identical sources with
/// the same name (a hash of the source), so NVRTC's disk cache shares them, and
/// sources may be concatenated into one translation unit. Throws kiln::Error
/// naming the group's first source line if the group cannot be lowered.
CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group);
CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group,
                                      const CudaCodegenOptions& opts);
/// The same for group `group` already lowered to `k` (lower_group; with outputs
/// stored over inputs by store_in_place, each stored through the input's pointer,
/// which is then neither const nor read through the read-only cache).
CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group, kir::Kernel k,
                                      const CudaCodegenOptions& opts);

/// The result of compiling CUDA C with NVRTC for one architecture.
struct CudaBinary {
  std::string ptx;
  std::vector<char> cubin;  // empty unless requested
  std::string log;          // NVRTC's log (warnings)
  int arch = 0;             // e.g. 80 for sm_80
  bool from_disk_cache = false;
  /// The disk-cache entry it was read from or stored as ("" without a cache).
  std::string cache_key;
};

/// Compiles `source` with NVRTC for sm_<arch> (PTX always; cubin, which runs ptxas,
/// when want_cubin). Results are cached on disk under cache_dir (empty: no cache),
/// keyed by a hash of the source, the architecture and the NVRTC version; entries
/// are written atomically and checked when read. Throws kiln::Error with NVRTC's
/// log on failure, or when NVRTC is not available in this build.
CudaBinary nvrtc_compile(const std::string& source, const std::string& name, int arch,
                         bool want_cubin, const std::string& cache_dir = {});

/// NVRTC's version ("13.0"), or "" when this build has no NVRTC.
std::string nvrtc_version();

}  // namespace kiln
