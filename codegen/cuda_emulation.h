// Host emulation of generated CUDA kernels: the CUDA C that generate_cuda_kernel
// writes, compiled for the host CPU with a small prelude and run block by
// block, thread by thread, so its indexing, math and block reductions are
// tested against the reference kernels on machines without a GPU.
//
// Every thread of a block is a fiber with its own small stack (switched by a
// few instructions on x86-64; by ucontext elsewhere or with KILN_EMU_UCONTEXT=1
// in the environment). A scheduler runs them in
// turn and switches only at __syncthreads and warp shuffles, which the prelude
// routes back here: a barrier releases when every live thread of the block has
// reached it; a shuffle is a barrier of the warp (each lane writes its value to
// a per-warp slot and yields; when all lanes have written, each reads the
// source lane's). Divergence (some lanes at a shuffle, others at a barrier or
// finished), deadlocks and partial shuffle masks are reported as errors, not
// hangs. Blocks run one after another.
//
// Test support, not part of libkiln: it runs the host C++ compiler (the one
// CMake used, or $KILN_HOST_CXX) and dlopens the result. Link
// kiln_cuda_emulation (codegen/CMakeLists.txt).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cuda_backend.h"

namespace kiln {

/// The text placed before generated CUDA C to compile it as host C++: it
/// defines __global__, __device__, __shared__ (a static: blocks run one at a
/// time), threadIdx, blockIdx, blockDim, gridDim, __syncthreads,
/// __shfl_down_sync, __shfl_xor_sync, __shfl_sync, __ldg, the bit casts
/// (__int_as_float, ...) and rsqrtf/rsqrt; the rest of CUDA's math library is
/// the host's <math.h>.
const std::string& cuda_host_prelude();

/// What one emulated launch did.
struct CudaEmulationStats {
  int64_t blocks = 0, threads = 0;
  int64_t barriers = 0;  // __syncthreads calls
  int64_t shuffles = 0;  // shuffle calls
  int64_t switches = 0;  // fiber switches
};

/// Generated kernels compiled for the host and loaded.
class CudaHostModule {
 public:
  /// Compiles the prelude and `sources` (complete translation units from
  /// generate_cuda_kernel; a source given twice is included once) in one run of
  /// the host compiler (-std=c++17 -O1 -fPIC -shared), then loads the library.
  /// Throws kiln::Error with the compiler's messages (the source is kept).
  explicit CudaHostModule(const std::vector<std::string>& sources);
  ~CudaHostModule();
  CudaHostModule(const CudaHostModule&) = delete;
  CudaHostModule& operator=(const CudaHostModule&) = delete;

  bool has_kernel(const std::string& name) const;

  /// Runs kernel `name` over `grid` blocks of `block` threads (1-D), as a GPU
  /// would, with host pointers in `buffers`. Throws kiln::Error when the kernel
  /// deadlocks, diverges at a barrier or shuffle, or shuffles with a partial mask.
  CudaEmulationStats launch(const std::string& name, int grid, int block, void* const* buffers,
                            int64_t begin, int64_t end) const;

  /// Runs `k` over [begin, end) with a test launch: GridStride kernels on 3 blocks
  /// of 64 threads (so threads stride), BlockPerRow kernels on one block per row
  /// (at most `max_grid`, so blocks stride over rows beyond it) of k.launch.block threads.
  CudaEmulationStats launch(const CudaKernelSource& k, void* const* buffers, int64_t begin,
                            int64_t end, int max_grid = 1 << 20) const;

  /// Seconds the host compiler took.
  double compile_seconds() const { return compile_seconds_; }

 private:
  void* handle_ = nullptr;
  void* hooks_ = nullptr;
  double compile_seconds_ = 0;
};

}  // namespace kiln
