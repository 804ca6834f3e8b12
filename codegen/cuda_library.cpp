// The sort, attention and cluster log-probability library kernels (see
// cuda_library.h): their CUDA C, and compiling and loading it once per
// architecture and device.
//
// Sort. Each element becomes an unsigned key whose integer order is PyTorch's
// order (as runtime/sort.cpp: floats flip their sign bit or all their bits,
// -0.0 is 0.0, every NaN the largest key; signed integers flip the sign bit;
// descending complements the key); ties go by position in every algorithm:
//   - kiln_sort_block_*: one block per line of at most 2048 elements, a bitonic
//     sort of (key, position) pairs in shared memory (the pairs are distinct,
//     so the unstable network gives the one stable order);
//   - longer lines: kiln_sort_keys_* writes the pairs, then per 4-bit digit
//     kiln_radix_hist_* counts each 2048-element tile's digits, kiln_radix_scan
//     turns a line's counts (digit-major, tiles in order) into offsets, and
//     kiln_radix_scatter_* moves each pair to its digit's next place (a thread
//     owns 8 consecutive elements and ranks them after the lower threads', so
//     the pass is stable); kiln_sort_write copies the first `count` positions.
//
// Attention. Blocks of 128 threads own 16 rows (8 threads a row, each with 16
// of the block's 128 output columns in registers); a tile of 16 x 64 scores is
// computed from 32-column chunks of both operands staged in shared memory, and
// the 8 threads of a row reduce over it with shuffles. The forward keeps a
// running maximum and sum per row (online softmax); the gradient first writes
// each query row's log-sum-exp and g . out (kiln_attention_stats_*), then
// recomputes P = exp(S - lse) tile by tile: dq by query rows over the keys, dk
// and dv by key rows over the queries that see them.
//
// Cluster log-probabilities. A block of 256 threads per row: a row that is not
// a member writes 0 (and a zero dh row); a member's threads stride over the
// columns with a running maximum and sum of exps each, combined by a fixed tree
// in shared memory (kiln_cluster_lse), so a row's bits do not depend on the
// grid. The gradient's kiln_cluster_stats_* writes each member's log-sum-exp
// and dh; kiln_cluster_dw_* gives each column to one thread, which sums the
// member rows in order: no atomics.
#include "codegen/cuda_library.h"

#include <mutex>
#include <unordered_map>

#include "codegen/cuda_backend.h"
#include "codegen/cuda_compile.h"
#include "ir/error.h"
#include "runtime/cuda_driver.h"

namespace kiln {
namespace {

#define KILN_LIBRARY_STR2(...) #__VA_ARGS__
#define KILN_LIBRARY_STR(...) KILN_LIBRARY_STR2(__VA_ARGS__)

const char* const kArgs = KILN_LIBRARY_STR(KILN_CUDA_LIBRARY_ARGS);

const char* const kKernels = R"(
// A library kernel takes its argument struct by value; under the host emulation
// through the generated kernels' signature, with buffers[0] pointing at it.
// `threads` is the most threads a block of it has (the launchers' choice).
#if defined(__CUDA_ARCH__)
#define KILN_LIB_KERNEL(name, Args, threads) \
  extern "C" __global__ void __launch_bounds__(threads) name(const Args a)
#else
#define KILN_LIB_KERNEL(name, Args, threads)                               \
  static void name##_body(const Args& a);                                  \
  extern "C" void name(void* const* kiln_buffers, long long, long long) {  \
    name##_body(*(const Args*)kiln_buffers[0]);                            \
  }                                                                        \
  static void name##_body(const Args& a)
#endif

// ---- sort ----

__device__ inline unsigned kiln_order_key(float v) {
  if (v != v) return 0xffffffffu;
  if (v == 0.0f) v = 0.0f;
  const unsigned b = (unsigned)__float_as_int(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ inline unsigned long long kiln_order_key(double v) {
  if (v != v) return 0xffffffffffffffffull;
  if (v == 0.0) v = 0.0;
  const unsigned long long b = (unsigned long long)__double_as_longlong(v);
  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);
}
__device__ inline unsigned kiln_order_key(int v) { return (unsigned)v ^ 0x80000000u; }
__device__ inline unsigned long long kiln_order_key(long long v) {
  return (unsigned long long)v ^ 0x8000000000000000ull;
}
__device__ inline unsigned kiln_order_key(short v) { return (unsigned)(unsigned short)v ^ 0x8000u; }
__device__ inline unsigned kiln_order_key(signed char v) { return (unsigned)(unsigned char)v ^ 0x80u; }
__device__ inline unsigned kiln_order_key(unsigned char v) { return (unsigned)v; }

template <class T, class K>
__device__ inline K kiln_sort_key(const T* x, const KilnSortArgs& a) {
  const K k = kiln_order_key(*x);
  return a.descending ? (K)~k : k;
}

template <class T, class K>
__device__ void kiln_sort_block(const KilnSortArgs& a) {
  __shared__ K sk[2048];
  __shared__ int sp[2048];
  const T* in = (const T*)a.in;
  const long long lines = a.outer * a.inner;
  int width = 1;
  while (width < a.n) width *= 2;
  const int t = threadIdx.x, nt = blockDim.x;
  for (long long line = blockIdx.x; line < lines; line += gridDim.x) {
    const long long o = line / a.inner, i = line % a.inner;
    const T* x = in + o * a.n * a.inner + i;
    for (int j = t; j < width; j += nt) {
      if (j < a.n) {
        sk[j] = kiln_sort_key<T, K>(x + j * a.inner, a);
        sp[j] = j;
      } else {
        sk[j] = (K)~(K)0;
        sp[j] = 0x7fffffff;
      }
    }
    __syncthreads();
    for (int size = 2; size <= width; size *= 2)
      for (int stride = size / 2; stride > 0; stride /= 2) {
        for (int p = t; p < width / 2; p += nt) {
          const int lo = 2 * stride * (p / stride) + p % stride, hi = lo + stride;
          const K klo = sk[lo], khi = sk[hi];
          const int plo = sp[lo], phi = sp[hi];
          const bool greater = klo > khi || (klo == khi && plo > phi);
          if (greater == ((lo & size) == 0)) {
            sk[lo] = khi;
            sk[hi] = klo;
            sp[lo] = phi;
            sp[hi] = plo;
          }
        }
        __syncthreads();
      }
    long long* y = a.out + o * a.count * a.inner + i;
    for (int j = t; j < a.count; j += nt) y[j * a.inner] = sp[j];
    __syncthreads();
  }
}

template <class T, class K>
__device__ void kiln_sort_keys(const KilnSortArgs& a) {
  const T* in = (const T*)a.in;
  K* keys = (K*)a.keys[0];
  long long* pos = a.pos[0];
  const long long total = a.outer * a.inner * a.n;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long line = e / a.n, j = e % a.n, o = line / a.inner, i = line % a.inner;
    keys[e] = kiln_sort_key<T, K>(in + (o * a.n + j) * a.inner + i, a);
    pos[e] = j;
  }
}

// Radix tiles: 256 threads of 8 consecutive elements.
template <class K>
__device__ void kiln_radix_hist(const KilnSortArgs& a) {
  __shared__ unsigned cnt[16][256];
  const K* keys = (const K*)a.keys[a.src];
  const long long blocks = a.outer * a.inner * a.tiles;
  const int t = threadIdx.x;
  for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
    const long long line = b / a.tiles, tile = b % a.tiles, base = tile * 2048 + t * 8;
    unsigned c[16];
    for (int d = 0; d < 16; ++d) c[d] = 0;
    for (int q = 0; q < 8; ++q)
      if (base + q < a.n) c[(unsigned)(keys[line * a.n + base + q] >> a.shift) & 15u]++;
    for (int d = 0; d < 16; ++d) cnt[d][t] = c[d];
    __syncthreads();
    if (t < 16) {
      unsigned s = 0;
      for (int u = 0; u < 256; ++u) s += cnt[t][u];
      a.hist[(line * 16 + t) * a.tiles + tile] = s;
    }
    __syncthreads();
  }
}

__device__ void kiln_radix_scan_lines(const KilnSortArgs& a) {
  __shared__ unsigned part[256];
  const long long lines = a.outer * a.inner, m = 16 * a.tiles, per = (m + 255) / 256;
  const int t = threadIdx.x;
  for (long long line = blockIdx.x; line < lines; line += gridDim.x) {
    unsigned* h = a.hist + line * m;
    const long long lo = t * per < m ? t * per : m, hi = lo + per < m ? lo + per : m;
    unsigned s = 0;
    for (long long e = lo; e < hi; ++e) s += h[e];
    part[t] = s;
    __syncthreads();
    if (t == 0) {
      unsigned run = 0;
      for (int u = 0; u < 256; ++u) {
        const unsigned x = part[u];
        part[u] = run;
        run += x;
      }
    }
    __syncthreads();
    unsigned run = part[t];
    for (long long e = lo; e < hi; ++e) {
      const unsigned x = h[e];
      h[e] = run;
      run += x;
    }
    __syncthreads();
  }
}

template <class K>
__device__ void kiln_radix_scatter(const KilnSortArgs& a) {
  __shared__ unsigned cnt[16][256];
  __shared__ unsigned seg[16][16];
  const K* keys = (const K*)a.keys[a.src];
  K* keys_out = (K*)a.keys[a.src ^ 1];
  const long long* pos = a.pos[a.src];
  long long* pos_out = a.pos[a.src ^ 1];
  const long long blocks = a.outer * a.inner * a.tiles;
  const int t = threadIdx.x, d0 = t >> 4, s0 = (t & 15) * 16;
  for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
    const long long line = b / a.tiles, tile = b % a.tiles, base = tile * 2048 + t * 8;
    const long long at = line * a.n;
    K kk[8];
    long long pp[8];
    unsigned c[16];
    for (int d = 0; d < 16; ++d) c[d] = 0;
    for (int q = 0; q < 8; ++q)
      if (base + q < a.n) {
        kk[q] = keys[at + base + q];
        pp[q] = pos[at + base + q];
        c[(unsigned)(kk[q] >> a.shift) & 15u]++;
      }
    for (int d = 0; d < 16; ++d) cnt[d][t] = c[d];
    __syncthreads();
    // Exclusive scans of cnt[d][0..255]: 16 threads a digit, 16 counts a thread.
    unsigned sum = 0;
    for (int u = 0; u < 16; ++u) sum += cnt[d0][s0 + u];
    seg[d0][t & 15] = sum;
    __syncthreads();
    if (t < 16) {
      unsigned run = 0;
      for (int u = 0; u < 16; ++u) {
        const unsigned x = seg[t][u];
        seg[t][u] = run;
        run += x;
      }
    }
    __syncthreads();
    unsigned run = seg[d0][t & 15];
    for (int u = 0; u < 16; ++u) {
      const unsigned x = cnt[d0][s0 + u];
      cnt[d0][s0 + u] = run;
      run += x;
    }
    __syncthreads();
    unsigned off[16];
    for (int d = 0; d < 16; ++d) off[d] = a.hist[(line * 16 + d) * a.tiles + tile] + cnt[d][t];
    for (int q = 0; q < 8; ++q)
      if (base + q < a.n) {
        const unsigned dst = off[(unsigned)(kk[q] >> a.shift) & 15u]++;
        keys_out[at + dst] = kk[q];
        pos_out[at + dst] = pp[q];
      }
    __syncthreads();
  }
}

__device__ void kiln_sort_write_lines(const KilnSortArgs& a) {
  const long long* pos = a.pos[a.src];
  const long long total = a.outer * a.inner * a.count;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long line = e / a.count, j = e % a.count, o = line / a.inner, i = line % a.inner;
    a.out[(o * a.count + j) * a.inner + i] = pos[line * a.n + j];
  }
}

#define KILN_SORT_KERNELS(name, T, K)                                                        \
  KILN_LIB_KERNEL(kiln_sort_block_##name, KilnSortArgs, 1024) { kiln_sort_block<T, K>(a); }       \
  KILN_LIB_KERNEL(kiln_sort_keys_##name, KilnSortArgs, 256) { kiln_sort_keys<T, K>(a); }
KILN_SORT_KERNELS(f32, float, unsigned)
KILN_SORT_KERNELS(f64, double, unsigned long long)
KILN_SORT_KERNELS(i32, int, unsigned)
KILN_SORT_KERNELS(i64, long long, unsigned long long)
KILN_SORT_KERNELS(bool, unsigned char, unsigned)
KILN_SORT_KERNELS(u8, unsigned char, unsigned)
KILN_SORT_KERNELS(i8, signed char, unsigned)
KILN_SORT_KERNELS(i16, short, unsigned)
KILN_LIB_KERNEL(kiln_radix_hist_u32, KilnSortArgs, 256) { kiln_radix_hist<unsigned>(a); }
KILN_LIB_KERNEL(kiln_radix_hist_u64, KilnSortArgs, 256) { kiln_radix_hist<unsigned long long>(a); }
KILN_LIB_KERNEL(kiln_radix_scatter_u32, KilnSortArgs, 256) { kiln_radix_scatter<unsigned>(a); }
KILN_LIB_KERNEL(kiln_radix_scatter_u64, KilnSortArgs, 256) { kiln_radix_scatter<unsigned long long>(a); }
KILN_LIB_KERNEL(kiln_radix_scan, KilnSortArgs, 256) { kiln_radix_scan_lines(a); }
KILN_LIB_KERNEL(kiln_sort_write, KilnSortArgs, 256) { kiln_sort_write_lines(a); }

// ---- attention ----

__device__ inline float kiln_lib_exp(float x) { return expf(x); }
__device__ inline double kiln_lib_exp(double x) { return exp(x); }
__device__ inline float kiln_lib_log(float x) { return logf(x); }
__device__ inline double kiln_lib_log(double x) { return log(x); }
template <class T> __device__ inline T kiln_lib_inf();
template <> __device__ inline float kiln_lib_inf<float>() { return __int_as_float(0x7f800000); }
template <> __device__ inline double kiln_lib_inf<double>() {
  return __longlong_as_double(0x7ff0000000000000ll);
}

// Reductions over the 8 threads of a row (lanes 8r .. 8r+7 of a warp).
template <class T>
__device__ inline T kiln_row_max(T v) {
  for (int o = 4; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}
template <class T>
__device__ inline T kiln_row_sum(T v) {
  for (int o = 4; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// acc[k] = A[r] . B[lane + 8k] over `width` columns, for the thread's row r and
// lane; A has a_rows rows and B b_rows (rows past them count as zeros). Both
// are staged in shared memory 32 columns at a time (As: 16 x 33, Bs: 64 x 33).
template <class T>
__device__ void kiln_att_dots(const T* A, long long a_rows, const T* B, long long b_rows,
                              long long width, T* As, T* Bs, T (&acc)[8]) {
  const int t = threadIdx.x, r = t >> 3, lane = t & 7;
  for (int k = 0; k < 8; ++k) acc[k] = T(0);
  for (long long c0 = 0; c0 < width; c0 += 32) {
    for (int e = t; e < 16 * 32; e += 128) {
      const int rr = e >> 5, cc = e & 31;
      As[rr * 33 + cc] = rr < a_rows && c0 + cc < width ? A[rr * width + c0 + cc] : T(0);
    }
    for (int e = t; e < 64 * 32; e += 128) {
      const int rr = e >> 5, cc = e & 31;
      Bs[rr * 33 + cc] = rr < b_rows && c0 + cc < width ? B[rr * width + c0 + cc] : T(0);
    }
    __syncthreads();
    const int cn = width - c0 < 32 ? (int)(width - c0) : 32;
    for (int cc = 0; cc < cn; ++cc) {
      const T x = As[r * 33 + cc];
      for (int k = 0; k < 8; ++k) acc[k] += x * Bs[(lane + 8 * k) * 33 + cc];
    }
    __syncthreads();
  }
}

// Online softmax over one tile of scores s (masked ones -inf): updates the row's
// running maximum m and sum l, returns the factor the accumulators fade by, and
// leaves the tile's probabilities (relative to the new maximum) in p.
template <class T>
__device__ inline T kiln_online_softmax(const T (&s)[8], T& m, T& l, T (&p)[8]) {
  const T inf = kiln_lib_inf<T>();
  T mx = m;
  for (int k = 0; k < 8; ++k) mx = s[k] > mx ? s[k] : mx;
  mx = kiln_row_max(mx);
  const bool none = mx == -inf;  // nothing seen yet: every p is 0
  const T base = none ? T(0) : mx;
  T sum = T(0);
  for (int k = 0; k < 8; ++k) sum += p[k] = kiln_lib_exp(s[k] - base);
  sum = kiln_row_sum(sum);
  const T fade = none ? T(1) : kiln_lib_exp(m - mx);
  l = l * fade + sum;
  if (!none) m = mx;
  return fade;
}

// The block's place: (batch, row block, column block).
struct KilnAttBlock {
  long long b, rb, cb;
};
__device__ inline KilnAttBlock kiln_att_block(const KilnAttentionArgs& a, long long blk) {
  KilnAttBlock p;
  p.cb = blk % a.col_blocks;
  p.rb = blk / a.col_blocks % a.row_blocks;
  p.b = blk / (a.col_blocks * a.row_blocks);
  return p;
}

// The thread's row's scores against keys [j0, j0 + 64): masked past tk and, when
// causal, after query row i; the forward and the statistics share it.
template <class T>
__device__ void kiln_att_scores(const KilnAttentionArgs& a, long long b, long long i0, long long j0,
                                T* As, T* Bs, T (&s)[8]) {
  const T* Q = (const T*)a.q;
  const T* K = (const T*)a.k;
  const long long rows = a.tq - i0 < 16 ? a.tq - i0 : 16, keys = a.tk - j0 < 64 ? a.tk - j0 : 64;
  kiln_att_dots(Q + (b * a.tq + i0) * a.d, rows, K + (b * a.tk + j0) * a.d, keys, a.d, As, Bs, s);
  const long long i = i0 + (threadIdx.x >> 3);
  for (int k = 0; k < 8; ++k) {
    const long long j = j0 + (threadIdx.x & 7) + 8 * k;
    s[k] = j < a.tk && !(a.causal && j > i) ? s[k] * (T)a.scale : -kiln_lib_inf<T>();
  }
}

template <class T>
__device__ void kiln_attention_fwd(const KilnAttentionArgs& a) {
  __shared__ T As[16 * 33];
  __shared__ T Bs[64 * 33];
  __shared__ T Ps[16 * 64];
  const T* V = (const T*)a.v;
  T* O = (T*)a.dst;
  const int t = threadIdx.x, r = t >> 3, lane = t & 7;
  const long long blocks = a.batch * a.row_blocks * a.col_blocks;
  for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    const KilnAttBlock at = kiln_att_block(a, blk);
    const long long i0 = at.rb * 16, i = i0 + r, c0 = at.cb * 128 + lane;
    const long long kend = a.causal && i0 + 16 < a.tk ? i0 + 16 : a.tk;
    T m = -kiln_lib_inf<T>(), l = T(0), acc[16];
    for (int c = 0; c < 16; ++c) acc[c] = T(0);
    for (long long j0 = 0; j0 < kend; j0 += 64) {
      T s[8], p[8];
      kiln_att_scores(a, at.b, i0, j0, As, Bs, s);
      const T fade = kiln_online_softmax(s, m, l, p);
      for (int c = 0; c < 16; ++c) acc[c] *= fade;
      for (int k = 0; k < 8; ++k) Ps[r * 64 + lane + 8 * k] = p[k];
      __syncthreads();
      const long long keys = a.tk - j0 < 64 ? a.tk - j0 : 64;
      for (long long jj = 0; jj < keys; ++jj) {
        const T pj = Ps[r * 64 + jj];
        const T* vrow = V + (at.b * a.tk + j0 + jj) * a.dv;
        for (int c = 0; c < 16; ++c)
          if (c0 + 8 * c < a.dv) acc[c] += pj * vrow[c0 + 8 * c];
      }
      __syncthreads();
    }
    if (i < a.tq)
      for (int c = 0; c < 16; ++c)
        if (c0 + 8 * c < a.dv) O[(at.b * a.tq + i) * a.dv + c0 + 8 * c] = acc[c] / l;
  }
}

// Per query row: lse (the log-sum-exp of its scores) and g . out.
template <class T>
__device__ void kiln_attention_stats(const KilnAttentionArgs& a) {
  __shared__ T As[16 * 33];
  __shared__ T Bs[64 * 33];
  const T* G = (const T*)a.g;
  const T* O = (const T*)a.out;
  const int t = threadIdx.x, r = t >> 3, lane = t & 7;
  const long long blocks = a.batch * a.row_blocks * a.col_blocks;
  for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    const KilnAttBlock at = kiln_att_block(a, blk);
    const long long i0 = at.rb * 16, i = i0 + r, row = at.b * a.tq + i;
    const long long kend = a.causal && i0 + 16 < a.tk ? i0 + 16 : a.tk;
    T m = -kiln_lib_inf<T>(), l = T(0);
    for (long long j0 = 0; j0 < kend; j0 += 64) {
      T s[8], p[8];
      kiln_att_scores(a, at.b, i0, j0, As, Bs, s);
      kiln_online_softmax(s, m, l, p);
    }
    T dot = T(0);
    if (i < a.tq)
      for (long long c = lane; c < a.dv; c += 8) dot += G[row * a.dv + c] * O[row * a.dv + c];
    dot = kiln_row_sum(dot);
    if (i < a.tq && lane == 0) {
      ((T*)a.lse)[row] = m + kiln_lib_log(l);
      ((T*)a.dsum)[row] = dot;
    }
  }
}

// The gradient of q (which 0: rows are queries, over the keys), k (1) or v (2:
// rows are keys, over the queries that see them).
template <class T>
__device__ void kiln_attention_grad(const KilnAttentionArgs& a) {
  __shared__ T As[16 * 33];
  __shared__ T Bs[64 * 33];
  __shared__ T Ps[16 * 64];
  const T* Q = (const T*)a.q;
  const T* K = (const T*)a.k;
  const T* V = (const T*)a.v;
  const T* G = (const T*)a.g;
  const T* lse = (const T*)a.lse;
  const T* dsum = (const T*)a.dsum;
  T* dst = (T*)a.dst;
  const int mode = a.which;
  const long long own_n = mode == 0 ? a.tq : a.tk, other_n = mode == 0 ? a.tk : a.tq;
  const long long W = mode == 2 ? a.dv : a.d;
  const T* X = mode == 0 ? K : mode == 1 ? Q : G;  // what the coefficients weigh
  const T scale = (T)a.scale;
  const int t = threadIdx.x, r = t >> 3, lane = t & 7;
  const long long blocks = a.batch * a.row_blocks * a.col_blocks;
  for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    const KilnAttBlock at = kiln_att_block(a, blk);
    const long long b = at.b, o0 = at.rb * 16, o = o0 + r, c0 = at.cb * 128 + lane;
    const long long own_rows = own_n - o0 < 16 ? own_n - o0 : 16;
    const T* own_qk = mode == 0 ? Q + (b * a.tq + o0) * a.d : K + (b * a.tk + o0) * a.d;
    const T* own_gv = mode == 0 ? G + (b * a.tq + o0) * a.dv : V + (b * a.tk + o0) * a.dv;
    long long begin = 0, end = other_n;
    if (a.causal && mode == 0 && o0 + 16 < a.tk) end = o0 + 16;
    if (a.causal && mode != 0) begin = o0;
    T acc[16];
    for (int c = 0; c < 16; ++c) acc[c] = T(0);
    for (long long p0 = begin; p0 < end; p0 += 64) {
      const long long cnt = other_n - p0 < 64 ? other_n - p0 : 64;
      const T* other_qk = mode == 0 ? K + (b * a.tk + p0) * a.d : Q + (b * a.tq + p0) * a.d;
      T s[8], coef[8];
      bool valid[8];
      long long qrow[8];
      kiln_att_dots(own_qk, own_rows, other_qk, cnt, a.d, As, Bs, s);
      for (int k = 0; k < 8; ++k) {
        const long long x = p0 + lane + 8 * k, qi = mode == 0 ? o : x, kj = mode == 0 ? x : o;
        valid[k] = x < other_n && o < own_n && !(a.causal && kj > qi);
        qrow[k] = b * a.tq + (valid[k] ? qi : 0);
        coef[k] = valid[k] ? kiln_lib_exp(s[k] * scale - lse[qrow[k]]) : T(0);
      }
      if (mode != 2) {  // dS = P (dP - g . out), dP = g v^T
        const T* other_gv = mode == 0 ? V + (b * a.tk + p0) * a.dv : G + (b * a.tq + p0) * a.dv;
        T dp[8];
        kiln_att_dots(own_gv, own_rows, other_gv, cnt, a.dv, As, Bs, dp);
        for (int k = 0; k < 8; ++k)
          coef[k] = valid[k] ? scale * coef[k] * (dp[k] - dsum[qrow[k]]) : T(0);
      }
      for (int k = 0; k < 8; ++k) Ps[r * 64 + lane + 8 * k] = coef[k];
      __syncthreads();
      for (long long jj = 0; jj < cnt; ++jj) {
        const T cj = Ps[r * 64 + jj];
        const T* xrow = X + (b * other_n + p0 + jj) * W;
        for (int c = 0; c < 16; ++c)
          if (c0 + 8 * c < W) acc[c] += cj * xrow[c0 + 8 * c];
      }
      __syncthreads();
    }
    if (o < own_n)
      for (int c = 0; c < 16; ++c)
        if (c0 + 8 * c < W) dst[(b * own_n + o) * W + c0 + 8 * c] = acc[c];
  }
}

#define KILN_ATTENTION_KERNELS(name, T)                                                          \
  KILN_LIB_KERNEL(kiln_attention_fwd_##name, KilnAttentionArgs, 128) { kiln_attention_fwd<T>(a); }     \
  KILN_LIB_KERNEL(kiln_attention_stats_##name, KilnAttentionArgs, 128) { kiln_attention_stats<T>(a); } \
  KILN_LIB_KERNEL(kiln_attention_grad_##name, KilnAttentionArgs, 128) { kiln_attention_grad<T>(a); }
KILN_ATTENTION_KERNELS(f32, float)
KILN_ATTENTION_KERNELS(f64, double)

// ---- cluster log-probabilities ----

// Whether row r is a member (start <= t[r] < start + columns, without overflow),
// and its target relative to the cluster.
__device__ inline bool kiln_cluster_member(const KilnClusterArgs& a, long long r, long long* rel) {
  const unsigned long long d = (unsigned long long)a.t[r] - (unsigned long long)a.start;
  *rel = (long long)d;
  return d < (unsigned long long)a.columns;
}

template <class T>
__device__ inline T kiln_cluster_dot(const T* x, const T* y, long long width) {
  T s = T(0);
  for (long long c = 0; c < width; ++c) s += x[c] * y[c];
  return s;
}

// The log-sum-exp of row hr's logits, by the block's 256 threads: each a running
// maximum and sum over its columns, then a fixed tree in shared memory.
template <class T>
__device__ T kiln_cluster_lse(const KilnClusterArgs& a, const T* hr, T* Ms, T* Ls) {
  const T* W = (const T*)a.w;
  const T inf = kiln_lib_inf<T>();
  const int t = threadIdx.x;
  T m = -inf, l = T(0);
  for (long long j = t; j < a.columns; j += 256) {
    const T z = kiln_cluster_dot(hr, W + j * a.width, a.width);
    if (z > m) {
      l = (m == -inf ? T(0) : l * kiln_lib_exp(m - z)) + T(1);
      m = z;
    } else {
      l += z == -inf ? T(0) : kiln_lib_exp(z - m);  // a NaN z makes l NaN
    }
  }
  Ms[t] = m;
  Ls[t] = l;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (t < w) {
      const T m1 = Ms[t], m2 = Ms[t + w];
      const T mx = m2 > m1 ? m2 : m1;
      const T f1 = m1 == -inf ? T(0) : kiln_lib_exp(m1 - mx);
      const T f2 = m2 == -inf ? T(0) : kiln_lib_exp(m2 - mx);
      Ls[t] = Ls[t] * f1 + Ls[t + w] * f2;
      Ms[t] = mx;
    }
    __syncthreads();
  }
  const T lse = Ms[0] + kiln_lib_log(Ls[0]);
  __syncthreads();  // every thread has read Ms[0] and Ls[0] before the next row writes them
  return lse;
}

// out[r] = z_t - lse for a member row, 0 for any other (its h not read).
template <class T>
__device__ void kiln_cluster_fwd(const KilnClusterArgs& a) {
  __shared__ T Ms[256];
  __shared__ T Ls[256];
  const T* H = (const T*)a.h;
  const T* W = (const T*)a.w;
  T* out = (T*)a.dst;
  for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {
    long long rel;
    if (!kiln_cluster_member(a, r, &rel)) {
      if (threadIdx.x == 0) out[r] = T(0);
      continue;
    }
    const T* hr = H + r * a.width;
    const T lse = kiln_cluster_lse(a, hr, Ms, Ls);
    if (threadIdx.x == 0) out[r] = kiln_cluster_dot(hr, W + rel * a.width, a.width) - lse;
  }
}

// Per member row: lse, and with dh (dst, may be null) dh = g (w_t - sum_j p_j
// w_j), the probabilities of 256 columns at a time in shared memory and each
// feature summed over them in order by one thread. Any other row's dh is 0.
template <class T>
__device__ void kiln_cluster_stats(const KilnClusterArgs& a) {
  __shared__ T Ms[256];
  __shared__ T Ls[256];
  __shared__ T Ps[256];
  const T* H = (const T*)a.h;
  const T* W = (const T*)a.w;
  const T* G = (const T*)a.g;
  T* dh = (T*)a.dst;
  const int t = threadIdx.x;
  for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {
    long long rel;
    T* d = dh ? dh + r * a.width : (T*)0;
    if (!kiln_cluster_member(a, r, &rel)) {
      if (d)
        for (long long c = t; c < a.width; c += 256) d[c] = T(0);
      continue;
    }
    const T* hr = H + r * a.width;
    const T lse = kiln_cluster_lse(a, hr, Ms, Ls);
    if (t == 0) ((T*)a.lse)[r] = lse;
    if (!d) continue;
    for (long long c = t; c < a.width; c += 256) d[c] = T(0);
    for (long long j0 = 0; j0 < a.columns; j0 += 256) {
      const long long j = j0 + t;
      Ps[t] = j < a.columns ? kiln_lib_exp(kiln_cluster_dot(hr, W + j * a.width, a.width) - lse)
                            : T(0);
      __syncthreads();
      const long long n = a.columns - j0 < 256 ? a.columns - j0 : 256;
      for (long long c = t; c < a.width; c += 256) {
        T s = d[c];
        for (long long jj = 0; jj < n; ++jj) s += Ps[jj] * W[(j0 + jj) * a.width + c];
        d[c] = s;
      }
      __syncthreads();
    }
    const T gr = G[r];
    const T* wt = W + rel * a.width;
    for (long long c = t; c < a.width; c += 256) d[c] = gr * (wt[c] - d[c]);
  }
}

// dw (dst): a thread per column j, over the member rows in order: dw_j += g_r
// (delta(j, t) - exp(z_rj - lse_r)) h_r.
template <class T>
__device__ void kiln_cluster_dw(const KilnClusterArgs& a) {
  const T* H = (const T*)a.h;
  const T* W = (const T*)a.w;
  const T* G = (const T*)a.g;
  const T* lse = (const T*)a.lse;
  T* dw = (T*)a.dst;
  const long long blocks = (a.columns + 255) / 256;
  for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    const long long j = blk * 256 + threadIdx.x;
    if (j >= a.columns) continue;
    T* d = dw + j * a.width;
    const T* wj = W + j * a.width;
    for (long long c = 0; c < a.width; ++c) d[c] = T(0);
    for (long long r = 0; r < a.rows; ++r) {
      long long rel;
      if (!kiln_cluster_member(a, r, &rel)) continue;
      const T* hr = H + r * a.width;
      const T coef = G[r] * ((j == rel ? T(1) : T(0)) -
                             kiln_lib_exp(kiln_cluster_dot(hr, wj, a.width) - lse[r]));
      for (long long c = 0; c < a.width; ++c) d[c] += coef * hr[c];
    }
  }
}

#define KILN_CLUSTER_KERNELS(name, T)                                                          \
  KILN_LIB_KERNEL(kiln_cluster_fwd_##name, KilnClusterArgs, 256) { kiln_cluster_fwd<T>(a); }     \
  KILN_LIB_KERNEL(kiln_cluster_stats_##name, KilnClusterArgs, 256) { kiln_cluster_stats<T>(a); } \
  KILN_LIB_KERNEL(kiln_cluster_dw_##name, KilnClusterArgs, 256) { kiln_cluster_dw<T>(a); }
KILN_CLUSTER_KERNELS(f32, float)
KILN_CLUSTER_KERNELS(f64, double)
)";

}  // namespace

const std::string& cuda_library_source() {
  static const std::string source =
      std::string(
          "// Kiln: the sort, attention and cluster log-probability library kernels "
          "(codegen/cuda_library.cpp).\n") +
      kArgs + "\n" + kKernels;
  return source;
}

std::shared_ptr<const CudaLibraryFunctions> cuda_library_functions(int device,
                                                                   const std::string& cache_dir) {
  static std::mutex mu;
  static std::unordered_map<int, std::string> images;  // by architecture
  static std::unordered_map<int, std::shared_ptr<const CudaLibraryFunctions>> loaded;  // by device
  const int arch = cuda_arch(Device(kCUDA, device));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(device); it != loaded.end()) return it->second;
  auto it = images.find(arch);
  if (it == images.end()) {
    const std::vector<std::string>& names = cuda_library_kernel_names();
    const CudaBinary bin =
        nvrtc_compile(cuda_library_source(), names.front(), arch, /*want_cubin=*/true, cache_dir);
    it = images
             .emplace(arch,
                      bin.cubin.empty() ? bin.ptx : std::string(bin.cubin.begin(), bin.cubin.end()))
             .first;
  }
  auto fns = std::make_shared<CudaLibraryFunctions>();
  fns->device = device;
  for (const std::string& name : cuda_library_kernel_names())
    fns->functions.emplace_back(name, cuda::load_function(it->second, name, device));
  loaded.emplace(device, fns);
  return fns;
}

}  // namespace kiln
