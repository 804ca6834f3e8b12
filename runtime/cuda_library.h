// The sort, attention and cluster log-probability library steps (runtime/sort.h,
// runtime/attention.h, runtime/cluster_logprob.h) on a CUDA device: host-side
// launchers that queue the library kernels on the device, with no copy through
// host memory. The kernels are CUDA C kept in codegen (codegen/cuda_library.h),
// compiled with NVRTC by the CUDA backend once per process and architecture and
// attached to the plan's Sort, Attention and ClusterLogprob steps as loaded
// functions (CudaLibraryFunctions); runtime knows them only by name. A launcher
// runs through a CudaLibraryLauncher, so the same sequence of launches runs on
// a GPU (the CUDA executor) and under the host emulation in the tests. No CUDA
// header appears here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/attention.h"
#include "runtime/cluster_logprob.h"
#include "runtime/sort.h"

/// The library kernels' argument structs: each kernel takes one of them by
/// value. One macro, so the launchers (C++, below) and the kernels' CUDA C
/// (codegen/cuda_library.cpp stringizes it) share one definition.
#define KILN_CUDA_LIBRARY_ARGS                                                                     \
  struct KilnSortArgs {                                                                            \
    const void* in;    /* dense [outer, n, inner] */                                               \
    long long* out;    /* dense int64 [outer, count, inner] */                                     \
    void* keys[2];     /* radix: order keys, [lines, n] each, ping-pong */                         \
    long long* pos[2]; /* radix: positions beside them */                                          \
    unsigned* hist;    /* radix: [lines, 16 digits, tiles] counts, then offsets */                 \
    long long outer, n, inner, count;                                                              \
    long long tiles; /* radix: tiles per line */                                                   \
    int descending;                                                                                \
    int shift; /* radix: the pass's digit, bits from the bottom */                                 \
    int src;   /* radix: the buffer (0, 1) the pass reads */                                       \
  };                                                                                               \
  struct KilnAttentionArgs {                                                                       \
    const void *q, *k, *v; /* [batch, tq, d], [batch, tk, d], [batch, tk, dv] */                   \
    const void *out, *g;   /* gradients: the forward's output and its gradient, [batch, tq, dv] */ \
    void* dst;             /* the forward's output, or the gradient computed */                    \
    void* lse;             /* gradients: per query row, log-sum-exp of its scores */               \
    void* dsum;            /* gradients: per query row, g . out */                                 \
    long long batch, tq, tk, d, dv;                                                                \
    long long row_blocks, col_blocks; /* the grid: batch x row_blocks x col_blocks blocks */       \
    double scale;                                                                                  \
    int causal;                                                                                    \
    int which; /* -1 the forward, else the gradient of q (0), k (1) or v (2) */                    \
  };                                                                                               \
  struct KilnClusterArgs {                                                                         \
    const void *h, *w;  /* [rows, width], [columns, width] */                                      \
    const long long* t; /* [rows]: row r is a member when start <= t[r] < start + columns */       \
    const void* g;      /* gradients: the output's gradient, [rows] */                             \
    void* dst;          /* the forward's output; the stats' dh (or null); dw */                    \
    void* lse;          /* gradients: per member row, the log-sum-exp of its logits */             \
    long long rows, width, columns, start;                                                         \
  };

namespace kiln {

KILN_CUDA_LIBRARY_ARGS

/// Sizes the launchers and the kernels agree on (the kernels' CUDA C is
/// written for these values).
namespace cuda_library {
constexpr int64_t kBlockSortMax = 2048;  // longest line sorted by one block in shared memory
constexpr int kRadixThreads = 256, kRadixItems = 8;  // a radix tile: 2048 elements
constexpr int kRadixBits = 4;                        // bits per radix digit (16 buckets)
constexpr int kAttentionThreads = 128;               // 16 rows of 8 threads
constexpr int64_t kAttentionRows = 16;               // rows (queries, or keys for dk/dv) per block
constexpr int64_t kAttentionCols = 128;              // output columns per block
constexpr int kClusterThreads = 256;                 // a row's columns (or dw's columns) per block
}  // namespace cuda_library

/// Runs library kernels. The CUDA executor queues them on the device's stream
/// with the functions a plan step carries; the tests run them under the host
/// emulation. Any grid of at least one block is correct: the kernels stride
/// over the blocks the grid does not cover.
class CudaLibraryLauncher {
 public:
  virtual ~CudaLibraryLauncher() = default;
  /// Queues kernel `name` on `grid` blocks of `block` threads (1-D) with its
  /// argument struct (`bytes` bytes, read before this returns).
  virtual void launch(const char* name, int64_t grid, int block, const void* args,
                      size_t bytes) = 0;
  /// Device scratch memory for launches queued after this call.
  virtual void* alloc(size_t bytes) = 0;
  /// Gives scratch memory back once the launches queued so far are done with it.
  virtual void free(void* p, size_t bytes) = 0;
};

/// The names of every library kernel (what codegen compiles and loads).
const std::vector<std::string>& cuda_library_kernel_names();

/// The library kernels loaded on one device, by name (CUfunctions, opaque
/// here): what a CUDA plan's Sort, Attention and ClusterLogprob steps carry.
struct CudaLibraryFunctions {
  int device = 0;
  std::vector<std::pair<std::string, void*>> functions;
  /// The function named `name`; throws kiln::Error when there is none.
  void* find(const char* name) const;
};

/// sort_lines (runtime/sort.h) on device buffers: short lines one block each
/// (a bitonic sort of (key, position) pairs in shared memory), longer lines by
/// a least-significant-digit radix sort of the order keys, 4 bits a pass
/// (per-tile digit counts, a scan per line, a stable scatter).
void cuda_sort_lines(const SortLines& s, const void* in, int64_t* out, CudaLibraryLauncher& l);

/// attention_forward (runtime/attention.h) on device buffers: one block per
/// (batch, 16 query rows, 128 output columns), over blocks of 64 keys with an
/// online softmax; no [tq, tk] matrix in device memory.
void cuda_attention_forward(const AttentionShape& s, const void* q, const void* k, const void* v,
                            void* out, CudaLibraryLauncher& l);

/// The gradients of attention (runtime/attention.h) on device buffers: each of
/// dq [batch, tq, d], dk [batch, tk, d], dv [batch, tk, dv] that is not null.
/// Each query row's log-sum-exp and g . out first, then per gradient one block
/// per (batch, 16 rows of it, 128 columns), recomputing the probabilities.
void cuda_attention_backward(const AttentionShape& s, const void* q, const void* k, const void* v,
                             const void* out, const void* g, void* dq, void* dk, void* dv,
                             CudaLibraryLauncher& l);

/// cluster_logprob_forward (runtime/cluster_logprob.h) on device buffers: one
/// block per row (a member's 256 threads stride over the columns with a running
/// maximum and sum, combined by a fixed tree); a row that is not a member gets 0.
void cuda_cluster_logprob_forward(const ClusterShape& s, const void* h, const void* w,
                                  const int64_t* t, void* out, CudaLibraryLauncher& l);

/// The gradients of cluster_logprob (runtime/cluster_logprob.h) on device
/// buffers: each of dh [rows, width] and dw [columns, width] that is not null.
/// Per row (a block each) the member's log-sum-exp and dh, the probabilities a
/// tile of 256 columns at a time; then dw a thread per column, over the member
/// rows in order: no atomics, the same bits at every grid size.
void cuda_cluster_logprob_backward(const ClusterShape& s, const void* h, const void* w,
                                   const int64_t* t, const void* g, void* dh, void* dw,
                                   CudaLibraryLauncher& l);

}  // namespace kiln
