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

#include "codegen/cpu_backend.h"
#include "ir/graph.h"
#include "passes/fusion.h"

namespace kiln {

/// How a generated kernel is launched.
struct CudaLaunch {
  enum Kind : uint8_t {
    GridStride,   // elementwise: any grid, each thread strides over [0, range)
    BlockPerRow,  // reductions: one block per outer-loop iteration (row), `block` threads
  };
  Kind kind = GridStride;
  int64_t range = 1;         // outer loop trip count
  int block = 256;           // threads per block
  int shared_bytes = 0;      // dynamic shared memory per block
};

/// A generated CUDA kernel. Its signature is
///   extern "C" __global__ void <name>(void* const* buffers, long long begin, long long end)
/// over dense row-major device buffers listed in `buffers` (same convention as CpuKernel).
struct CudaKernelSource {
  std::string name;
  std::string source;          // complete CUDA C translation unit
  std::vector<Value> buffers;  // for Matmul groups the matmul's result comes first
  CudaLaunch launch;
  KernelInfo info;
  std::string kernel_ir;       // the kernel IR it was generated from, printed
  bool needs_kernel = true;    // false for a lone matmul (cuBLAS does it)
};

/// Generates CUDA C for one group of g (Elementwise, Reduction, Matmul epilogue, Copy).
CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group);

/// The result of compiling CUDA C with NVRTC for one architecture.
struct CudaBinary {
  std::string ptx;
  std::vector<char> cubin;  // empty unless requested
  std::string log;          // NVRTC's log (warnings)
  int arch = 0;             // e.g. 80 for sm_80
  bool from_disk_cache = false;
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
