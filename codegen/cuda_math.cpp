// The device helpers of generated CUDA C (see cuda_codegen.h): the scalar
// semantics the kernel IR promises (kernel_ir.h) written once as CUDA C, and
// the block-wide reductions of BlockPerRow kernels; and how types and
// constants are spelled in CUDA C. Transcendentals come from
// CUDA's own math library (expf, tanhf, erff, ...; no --use_fast_math), which
// is accurate to a few ulp; the vectorisable polynomial forms are a CPU concern.
// The same text compiles as host C++ under the emulation prelude
// (cuda_emulation.h), so everything here uses only what both provide.
#include <cmath>
#include <cstdio>
#include <limits>

#include "codegen/cuda_codegen.h"

namespace kiln {

namespace cuda_c {

const char* reg_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
    case DType::i32:
      return "int";
    case DType::i64:
      return "long long";
    case DType::b8:
      return "bool";
    case DType::u8:
      return "unsigned char";
    case DType::i8:
      return "signed char";
    case DType::i16:
      return "short";
  }
  return "?";
}

const char* mem_type(DType t) {
  return t == DType::b8 ? "unsigned char" : reg_type(t);
}

// Types narrower than int accumulate (and shuffle between lanes) as int.
const char* acc_type(DType t) {
  return t == DType::b8 || dtype_size(t) < 4 ? "int" : reg_type(t);
}

std::string float_literal(double v, DType t) {
  const bool f32 = t == DType::f32;
  if (std::isnan(v)) return f32 ? "kiln_nan_f32()" : "kiln_nan_f64()";
  if (std::isinf(v)) {
    std::string s = f32 ? "kiln_inf_f32()" : "kiln_inf_f64()";
    return v < 0 ? cat("(-", s, ")") : s;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, f32 ? "%.9g" : "%.17g", f32 ? double(float(v)) : v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (f32) s += "f";
  return std::signbit(v) ? cat("(", s, ")") : s;
}

std::string int_literal(int64_t v, DType t) {
  if (t == DType::b8) return v ? "true" : "false";
  // A typed constant, so that templates (kiln_max) deduce one type from both operands.
  if (t == DType::u8) return cat("((unsigned char)", std::to_string(uint8_t(v)), ")");
  if (t == DType::i8) return cat("((signed char)", std::to_string(int8_t(v)), ")");
  if (t == DType::i16) return cat("((short)", std::to_string(int16_t(v)), ")");
  if (t == DType::i32) {
    const int32_t x = int32_t(v);
    if (x == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
    return x < 0 ? cat("(", std::to_string(x), ")") : std::to_string(x);
  }
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  const std::string s = cat(std::to_string(v), "LL");
  return v < 0 ? cat("(", s, ")") : s;
}

std::string literal(DType t, double f, int64_t i) {
  return is_floating(t) ? float_literal(f, t) : int_literal(i, t);
}

}  // namespace cuda_c

const char* cuda_device_helpers() {
  return R"(#ifndef KILN_CUDA_HELPERS
#define KILN_CUDA_HELPERS
// Kiln device helpers: the kernel IR's scalar semantics and block reductions.

__device__ __forceinline__ float kiln_inf_f32() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float kiln_nan_f32() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double kiln_inf_f64() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ double kiln_nan_f64() { return __longlong_as_double(0x7ff8000000000000LL); }

// Integers wrap around (two's complement) instead of overflowing.
__device__ __forceinline__ int kiln_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ int kiln_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ int kiln_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ int kiln_neg(int a) { return (int)(0u - (unsigned)a); }
__device__ __forceinline__ long long kiln_add(long long a, long long b) {
  return (long long)((unsigned long long)a + (unsigned long long)b);
}
__device__ __forceinline__ long long kiln_sub(long long a, long long b) {
  return (long long)((unsigned long long)a - (unsigned long long)b);
}
__device__ __forceinline__ long long kiln_mul(long long a, long long b) {
  return (long long)((unsigned long long)a * (unsigned long long)b);
}
__device__ __forceinline__ long long kiln_neg(long long a) {
  return (long long)(0ull - (unsigned long long)a);
}
// Whether x < 0; never for unsigned char (no comparison, which NVRTC would call pointless).
template <class T> __device__ __forceinline__ bool kiln_is_neg(T x) { return x < T(0); }
__device__ __forceinline__ bool kiln_is_neg(unsigned char) { return false; }
template <class T> __device__ __forceinline__ T kiln_iabs(T a) { return kiln_is_neg(a) ? T(kiln_neg(a)) : a; }
// x / 0 = 0 and x / -1 = -x (wrapping); otherwise truncating. (An unsigned
// type has no -1: its T(-1) is its largest value.)
template <class T> __device__ __forceinline__ T kiln_idiv(T a, T b) {
  return b == 0 ? T(0) : (kiln_is_neg(b) && b == T(-1)) ? T(kiln_neg(a)) : T(a / b);
}
// fmod (the sign of a) and remainder (the sign of b), as the reference kernels:
// integers with x % 0 = x % -1 = 0.
__device__ __forceinline__ float kiln_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double kiln_fmod(double a, double b) { return fmod(a, b); }
template <class T> __device__ __forceinline__ T kiln_fmod(T a, T b) {
  return b == 0 || (kiln_is_neg(b) && b == T(-1)) ? T(0) : T(a % b);
}
template <class T> __device__ __forceinline__ T kiln_remainder(T a, T b) {
  T r = kiln_fmod(a, b);
  return r != 0 && (kiln_is_neg(r) != kiln_is_neg(b)) ? T(r + b) : r;
}
// Exact modulo 2^bits; negative exponents give 0 unless |x| = 1.
template <class T, class U> __device__ __forceinline__ T kiln_ipow_(T x, T e) {
  if (e < 0) return x == 1 ? T(1) : x == T(-1) ? ((e & 1) ? T(-1) : T(1)) : T(0);
  U r = 1, b = (U)x;
  for (U k = (U)e; k; k >>= 1) {
    if (k & 1) r *= b;
    b *= b;
  }
  return (T)r;
}
__device__ __forceinline__ int kiln_ipow(int x, int e) { return kiln_ipow_<int, unsigned>(x, e); }
__device__ __forceinline__ long long kiln_ipow(long long x, long long e) {
  return kiln_ipow_<long long, unsigned long long>(x, e);
}

// -1, 0 or 1 (0 for NaN).
template <class T> __device__ __forceinline__ T kiln_sign(T x) {
  return (T)((int)(T(0) < x) - (int)kiln_is_neg(x));
}
// NaN-propagating max/min (the reference kernels' form); on bool, or/and.
template <class T> __device__ __forceinline__ T kiln_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <class T> __device__ __forceinline__ T kiln_min(T a, T b) { return (a < b || a != a) ? a : b; }

// The scalar math of the op table's math ops (ops.def: math(k) is kiln_k here,
// of one operand or two).
__device__ __forceinline__ float kiln_exp(float x) { return expf(x); }
__device__ __forceinline__ double kiln_exp(double x) { return exp(x); }
__device__ __forceinline__ float kiln_log(float x) { return logf(x); }
__device__ __forceinline__ double kiln_log(double x) { return log(x); }
__device__ __forceinline__ float kiln_log2(float x) { return log2f(x); }
__device__ __forceinline__ double kiln_log2(double x) { return log2(x); }
__device__ __forceinline__ float kiln_log10(float x) { return log10f(x); }
__device__ __forceinline__ double kiln_log10(double x) { return log10(x); }
__device__ __forceinline__ float kiln_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double kiln_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float kiln_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double kiln_rsqrt(double x) { return rsqrt(x); }
__device__ __forceinline__ float kiln_sin(float x) { return sinf(x); }
__device__ __forceinline__ double kiln_sin(double x) { return sin(x); }
__device__ __forceinline__ float kiln_cos(float x) { return cosf(x); }
__device__ __forceinline__ double kiln_cos(double x) { return cos(x); }
__device__ __forceinline__ float kiln_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double kiln_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float kiln_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double kiln_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float kiln_gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.707106781186547524f));
}
__device__ __forceinline__ double kiln_gelu(double x) {
  return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}
__device__ __forceinline__ float kiln_erf(float x) { return erff(x); }
__device__ __forceinline__ double kiln_erf(double x) { return erf(x); }
__device__ __forceinline__ float kiln_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double kiln_log1p(double x) { return log1p(x); }
// log(exp(a) + exp(b)) without overflow; a == b (+-inf too) gives a + log 2.
template <class T> __device__ __forceinline__ T kiln_logaddexp(T a, T b) {
  if (a == b) return a + T(0.69314718055994530942);
  const T m = (a > b || a != a) ? a : b;
  return m + kiln_log1p(kiln_exp(a > b ? b - a : a - b));
}
__device__ __forceinline__ float kiln_atan2(float y, float x) { return atan2f(y, x); }
__device__ __forceinline__ double kiln_atan2(double y, double x) { return atan2(y, x); }
__device__ __forceinline__ float kiln_hypot(float x, float y) { return hypotf(x, y); }
__device__ __forceinline__ double kiln_hypot(double x, double y) { return hypot(x, y); }
__device__ __forceinline__ float kiln_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ double kiln_expm1(double x) { return expm1(x); }
__device__ __forceinline__ float kiln_floor(float x) { return floorf(x); }
__device__ __forceinline__ double kiln_floor(double x) { return floor(x); }
__device__ __forceinline__ float kiln_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ double kiln_ceil(double x) { return ceil(x); }
__device__ __forceinline__ float kiln_round(float x) { return rintf(x); }
__device__ __forceinline__ double kiln_round(double x) { return rint(x); }
__device__ __forceinline__ float kiln_trunc(float x) { return truncf(x); }
__device__ __forceinline__ double kiln_trunc(double x) { return trunc(x); }

// Philox-4x32-10 (ops.def, philox): words 0 and 1 (word 0 high) of the block at
// counter (lo, hi, attempt, 0) and key (lo, hi). The products are written as
// 64-bit multiplies so the same text runs in host emulation.
__device__ __forceinline__ unsigned long long kiln_philox_bits(long long key, long long counter,
                                                               unsigned attempt) {
  unsigned c0 = (unsigned)counter, c1 = (unsigned)((unsigned long long)counter >> 32),
           c2 = attempt, c3 = 0u;
  unsigned k0 = (unsigned)key, k1 = (unsigned)((unsigned long long)key >> 32);
  for (int r = 0; r < 10; ++r) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned h0 = (unsigned)(p0 >> 32), l0 = (unsigned)p0;
    const unsigned h1 = (unsigned)(p1 >> 32), l1 = (unsigned)p1;
    c0 = h1 ^ c1 ^ k0;
    c1 = l1;
    c2 = h0 ^ c3 ^ k1;
    c3 = l0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (unsigned long long)c0 << 32 | c1;
}
// The draws: the top 24 bits as a float, the top 53 as a double, all 64.
__device__ __forceinline__ float kiln_philox_f32(long long key, long long counter) {
  return (float)(unsigned)(kiln_philox_bits(key, counter, 0u) >> 40) * 5.9604644775390625e-8f;
}
__device__ __forceinline__ double kiln_philox_f64(long long key, long long counter) {
  return (double)(kiln_philox_bits(key, counter, 0u) >> 11) * 1.1102230246251565e-16;
}
__device__ __forceinline__ long long kiln_philox_i64(long long key, long long counter) {
  return (long long)kiln_philox_bits(key, counter, 0u);
}
// Uniform in [0, bound) (bound >= 1, unsigned), without bias: Lemire's
// multiply-shift, a rejected attempt replaced by the next block's.
__device__ __forceinline__ long long kiln_philox_below(long long key, long long counter,
                                                       long long bound) {
  const unsigned long long s = (unsigned long long)bound;
  for (unsigned attempt = 0u;; ++attempt) {
    const unsigned long long x = kiln_philox_bits(key, counter, attempt), low = x * s;
    if (low >= s || low >= (0ull - s) % s) return (long long)__umul64hi(x, s);
  }
}

// Sequential argmax/argmin: a strictly better value, or the first NaN, wins.
template <class T>
__device__ __forceinline__ void kiln_arg_update(bool up, T& acc, long long& pos, T x, long long at) {
  if ((up ? x > acc : x < acc) || (x != x && acc == acc)) {
    acc = x;
    pos = at;
  }
}
// Is (a, ap) better than (b, bp)? NaN first, then the value, then the lower position.
template <class T>
__device__ __forceinline__ bool kiln_arg_better(bool up, T a, long long ap, T b, long long bp) {
  const bool an = a != a, bn = b != b;
  if (an || bn) return an && (!bn || ap < bp);
  if (a == b) return ap < bp;
  return up ? a > b : a < b;
}

// Block-wide reductions (blockDim.x a multiple of 32, every thread of the block
// calling). Each warp reduces with shuffles, lane 0 of each warp writes its
// partial to shared memory, then every warp reduces the partials with a
// butterfly so that all threads get the result (the same bits everywhere; no
// second broadcast through shared memory). The first barrier keeps a previous
// row's readers of `sh` ahead of this row's writers.
template <class T, class Op>
__device__ __forceinline__ T kiln_block_reduce(T v, T* sh, T identity, Op op) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? sh[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <class T>
__device__ __forceinline__ void kiln_block_arg(bool up, T& v, long long& p, T* shv, long long* shp,
                                               T identity) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const T ov = __shfl_down_sync(0xffffffffu, v, o);
    const long long op = __shfl_down_sync(0xffffffffu, p, o);
    if (kiln_arg_better(up, ov, op, v, p)) {
      v = ov;
      p = op;
    }
  }
  __syncthreads();
  if (lane == 0) {
    shv[warp] = v;
    shp[warp] = p;
  }
  __syncthreads();
  if (lane < (blockDim.x >> 5)) {
    v = shv[lane];
    p = shp[lane];
  } else {
    v = identity;
    p = 0x7fffffffffffffffLL;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const T ov = __shfl_xor_sync(0xffffffffu, v, o);
    const long long op = __shfl_xor_sync(0xffffffffu, p, o);
    if (kiln_arg_better(up, ov, op, v, p)) {
      v = ov;
      p = op;
    }
  }
}
#endif  // KILN_CUDA_HELPERS
)";
}

}  // namespace kiln
