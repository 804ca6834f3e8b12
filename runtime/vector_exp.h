// exp(x) for float and double in straight-line arithmetic that a compiler
// vectorises (no libm call, no branch, no table): the runtime's hot loops over
// exps (the attention library step's score blocks) call it in their inner
// loops. The method is codegen/llvm_math.cpp's: n = rint(x / ln2) by adding
// and subtracting 1.5 * 2^mantissa-bits, r = x - n ln2 with ln2 in two parts
// (Cody-Waite, n * hi exact), e^r by its Taylor polynomial on |r| <= ln2 / 2,
// times 2^n built in the exponent bits in two halves, so results that overflow
// to inf or underflow gradually to subnormals and 0 are right. Within 2 ulp of
// std::exp over the whole range; exp(0) = 1, exp(-inf) = 0, exp(inf) = inf,
// exp(NaN) = NaN (tests/runtime/vector_exp_test.cpp).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

/// On a function whose loops call vector_exp: compiled for AVX-512, AVX2+FMA and
/// the base ISA, and the CPU picks one at load time (the runtime is built for the
/// base ISA). Nothing on other compilers and targets, nor under ThreadSanitizer:
/// GCC (12) instruments the clones' ifunc resolver with __tsan_func_entry, and the
/// dynamic loader runs that resolver while relocating the executable, before
/// libtsan has set up its thread state, so every TSan-built binary that links a
/// cloned function crashed at load, before main (in gdb: `row_grad(...) [clone
/// .resolver] at runtime/cluster_logprob.cpp:291`, GCC's line for the resolver,
/// under _dl_relocate_object). TSan builds take the base ISA's code.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && \
    !defined(__SANITIZE_THREAD__)
#define KILN_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KILN_VECTOR_CLONES
#endif

namespace kiln {

namespace detail {

template <class T>
struct ExpConstants;
template <>
struct ExpConstants<float> {
  using Bits = int32_t;
  static constexpr float lo = -110.f, hi = 89.f;  // beyond: 0 and inf
  static constexpr float round = 0x1.8p23f;       // x + round - round = rint(x) for |x| < 2^22
  static constexpr float ln2_hi = 0x1.63p-1f, ln2_lo = -2.12194440054690583e-4f;
  static constexpr Bits bias = 127, mantissa = 23;
};
template <>
struct ExpConstants<double> {
  using Bits = int64_t;
  static constexpr double lo = -760.0, hi = 710.0;
  static constexpr double round = 0x1.8p52;
  static constexpr double ln2_hi = 0x1.62e42fefa2000p-1, ln2_lo = 7.371002565167799e-13;
  static constexpr Bits bias = 1023, mantissa = 52;
};

// 2^k for an integral k of the exponent range, from its bits: k + round holds k
// in its low mantissa bits, so no float-to-int conversion (which AVX2 lacks for
// double) is needed.
template <class T>
inline T pow2_integral(T k) {
  using C = ExpConstants<T>;
  using Bits = typename C::Bits;
  const Bits n = std::bit_cast<Bits>(T(k + C::round)) - std::bit_cast<Bits>(C::round);
  return std::bit_cast<T>(Bits((n + C::bias) << C::mantissa));
}

}  // namespace detail

/// e^x, within 2 ulp of std::exp, in a form the compiler vectorises.
template <class T>
inline T vector_exp(T x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  using C = detail::ExpConstants<T>;
  // Clamped (NaN passes through both comparisons and is restored at the end).
  T xc = x < C::lo ? C::lo : x;
  xc = xc > C::hi ? C::hi : xc;
  const T n = (xc * T(1.4426950408889634) + C::round) - C::round;
  const T r = (xc - n * C::ln2_hi) - n * C::ln2_lo;
  // e^r = sum r^k / k!, Horner; degree 7 (float) or 13 (double) leaves the
  // truncation well under half an ulp on |r| <= ln2 / 2.
  T p;
  if constexpr (std::is_same_v<T, float>) {
    p = T(1.0 / 5040);
    p = p * r + T(1.0 / 720);
    p = p * r + T(1.0 / 120);
    p = p * r + T(1.0 / 24);
    p = p * r + T(1.0 / 6);
    p = p * r + T(0.5);
    p = p * r + T(1);
    p = p * r + T(1);
  } else {
    p = 1.0 / 6227020800;
    p = p * r + 1.0 / 479001600;
    p = p * r + 1.0 / 39916800;
    p = p * r + 1.0 / 3628800;
    p = p * r + 1.0 / 362880;
    p = p * r + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = p * r + 1;
    p = p * r + 1;
  }
  // 2^n in two halves, each within the normal exponents.
  const T n1 = (n * T(0.5) + C::round) - C::round, n2 = n - n1;
  const T e = p * detail::pow2_integral(n1) * detail::pow2_integral(n2);
  return x != x ? x : e;
}

}  // namespace kiln
