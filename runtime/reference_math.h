// The reference kernels' scalar math: the definition of each math op of the op
// table (ir/ops.def: math(k) is ref_math::k here, of one operand or two, as the
// row's arity), for M = float or double.
// Compiled kernels are tested against these (codegen/llvm_math.cpp,
// codegen/cuda_math.cpp have their own forms of the same functions).
#pragma once

#include <cmath>

namespace kiln::ref_math {

template <class M>
M exp(M x) {
  return std::exp(x);
}
template <class M>
M log(M x) {
  return std::log(x);
}
template <class M>
M log2(M x) {
  return std::log2(x);
}
template <class M>
M log10(M x) {
  return std::log10(x);
}
template <class M>
M sqrt(M x) {
  return std::sqrt(x);
}
template <class M>
M rsqrt(M x) {
  return M(1) / std::sqrt(x);
}
template <class M>
M sin(M x) {
  return std::sin(x);
}
template <class M>
M cos(M x) {
  return std::cos(x);
}
template <class M>
M tanh(M x) {
  return std::tanh(x);
}
template <class M>
M sigmoid(M x) {
  return M(1) / (M(1) + std::exp(-x));
}
template <class M>
M gelu(M x) {
  return M(0.5) * x * (M(1) + std::erf(x * M(0.70710678118654752440)));
}

/// log(exp(a) + exp(b)) without overflow; a == b (+-inf included) gives a + log 2.
template <class M>
M logaddexp(M a, M b) {
  if (a == b) return a + M(0.69314718055994530942);
  const M m = (a > b || a != a) ? a : b;  // NaN-propagating max
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

/// The angle of (b, a) in [-pi, pi] (C's atan2).
template <class M>
M atan2(M a, M b) {
  return std::atan2(a, b);
}
/// sqrt(a^2 + b^2) without intermediate overflow (C's hypot).
template <class M>
M hypot(M a, M b) {
  return std::hypot(a, b);
}

template <class M>
M erf(M x) {
  return std::erf(x);
}
template <class M>
M log1p(M x) {
  return std::log1p(x);
}
template <class M>
M expm1(M x) {
  return std::expm1(x);
}
template <class M>
M floor(M x) {
  return std::floor(x);
}
template <class M>
M ceil(M x) {
  return std::ceil(x);
}
/// Half to even (the default rounding mode), as torch.round.
template <class M>
M round(M x) {
  return std::nearbyint(x);
}
template <class M>
M trunc(M x) {
  return std::trunc(x);
}

}  // namespace kiln::ref_math
