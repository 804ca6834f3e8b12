// Internal to the reference kernels: the scalar functors of the elementwise
// ops (one element in, one out, in the dtype the caller computes in), shared by
// the elementwise kernels (reference_elementwise.cpp) and by the reductions and
// scans, which fold with their row's combine op (ops.def's reduce(identity,
// combine), scan(identity, combine)) through with_binary_functor.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/op.h"
#include "runtime/reference_math.h"
#include "runtime/strided_loop.h"

namespace kiln::detail {

// Floats compute in their own type; integers and bool go through double.
template <class T>
using MathT = std::conditional_t<std::is_floating_point_v<T>, T, double>;

// Integer arithmetic wraps (through the unsigned type) instead of being UB.
template <class T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>>
struct Wrap {
  using type = T;
};
template <class T>
struct Wrap<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using WrapT = typename Wrap<T>::type;

// ---- Unary functors: T -> T ----

struct Neg {
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else {
      return static_cast<T>(WrapT<T>(0) - static_cast<WrapT<T>>(x));
    }
  }
};
struct Abs {
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(x);
    } else if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else {
      return x < 0 ? Neg{}(x) : x;
    }
  }
};
struct Sign {
  template <class T>
  T operator()(T x) const {
    return static_cast<T>(int(T(0) < x) - int(x < T(0)));
  }
};
struct Relu {
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};

// The op table's math ops on any dtype: ref_math::k computed in MathT<T>.
template <class T, class F>
T math_in(T x, F f) {
  using M = MathT<T>;
  return convert<T>(static_cast<M>(f(static_cast<M>(x))));
}
template <class T, class F>
T math_in(T x, T y, F f) {
  using M = MathT<T>;
  return convert<T>(static_cast<M>(f(static_cast<M>(x), static_cast<M>(y))));
}

// ---- Binary functors: (T, T) -> T ----

#define KILN_WRAP_FUNCTOR(Name, op)                                                  \
  struct Name {                                                                      \
    template <class T>                                                               \
    T operator()(T a, T b) const {                                                   \
      if constexpr (std::is_same_v<T, bool>) {                                       \
        return convert<bool>(int(a) op int(b));                                      \
      } else {                                                                       \
        return static_cast<T>(static_cast<WrapT<T>>(a) op static_cast<WrapT<T>>(b)); \
      }                                                                              \
    }                                                                                \
  };
KILN_WRAP_FUNCTOR(Add, +)
KILN_WRAP_FUNCTOR(Sub, -)
KILN_WRAP_FUNCTOR(Mul, *)
#undef KILN_WRAP_FUNCTOR

struct Div {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else if constexpr (std::is_same_v<T, bool>) {
      return b ? a : false;
    } else {
      // Integer outputs only arise when a caller asks for them; avoid the traps.
      if (b == 0) return 0;
      if (b == -1) return Neg{}(a);
      return a / b;
    }
  }
};

template <class T>
T int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? T(-1) : T(1);
    return 0;
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  for (auto e = static_cast<U>(exp); e; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}

struct Pow {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      return int_pow(a, b);
    }
  }
};
// C's fmod (the sign of a) and Python's % (the sign of b), as torch.fmod and
// torch.remainder. Integers in their own type: x % 0 and x % -1 give 0 (the
// frontend refuses a zero integer divisor before any kernel runs).
struct Fmod {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else {
      // b == -1 compared as an int: never true for an unsigned b (uint8's 255).
      return b == 0 || b == -1 ? T(0) : static_cast<T>(a % b);
    }
  }
};
struct Remainder {
  template <class T>
  T operator()(T a, T b) const {
    const T r = Fmod{}(a, b);
    if constexpr (std::is_same_v<T, bool>) {
      return r;
    } else {
      return r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
    }
  }
};
// NaN-propagating, as torch.maximum/minimum.
struct Maximum {
  template <class T>
  T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct Minimum {
  template <class T>
  T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

// ---- Predicates: (T, T) -> bool ----

#define KILN_COMPARE_FUNCTOR(Name, expr) \
  struct Name {                          \
    template <class T>                   \
    bool operator()(T a, T b) const {    \
      return expr;                       \
    }                                    \
  };
KILN_COMPARE_FUNCTOR(Eq, a == b)
KILN_COMPARE_FUNCTOR(Ne, a != b)
KILN_COMPARE_FUNCTOR(Lt, a < b)
KILN_COMPARE_FUNCTOR(Le, a <= b)
KILN_COMPARE_FUNCTOR(Gt, a > b)
KILN_COMPARE_FUNCTOR(Ge, a >= b)
KILN_COMPARE_FUNCTOR(LogicalAnd, a != T(0) && b != T(0))
KILN_COMPARE_FUNCTOR(LogicalOr, a != T(0) || b != T(0))
#undef KILN_COMPARE_FUNCTOR

/// Where an accumulator of type T starts (ops.def's identity column): 0, 1, or
/// T's lowest or highest value (-inf and +inf for floats).
template <class T>
T identity_value(Identity id) {
  using L = std::numeric_limits<T>;
  switch (id) {
    case Identity::one:
      return T(1);
    case Identity::lowest:
      return L::has_infinity ? -L::infinity() : L::lowest();
    case Identity::highest:
      return L::has_infinity ? L::infinity() : L::max();
    default:
      return T(0);
  }
}

/// Calls fn(f) with the scalar functor f(a, b) of binary op k, as the
/// elementwise kernels compute it: arith and math ops in the operands' own
/// dtype (a math op through ref_math, integers through double), compare and
/// logical ops as predicates (bool). Returns false when k has no scalar functor
/// (philox, or not a binary elementwise op).
template <class Fn>
bool with_binary_functor(OpKind k, Fn&& fn) {
  switch (k) {
    case OpKind::add:
      return fn(Add{}), true;
    case OpKind::sub:
      return fn(Sub{}), true;
    case OpKind::mul:
      return fn(Mul{}), true;
    case OpKind::div:
      return fn(Div{}), true;
    case OpKind::pow:
      return fn(Pow{}), true;
    case OpKind::fmod:
      return fn(Fmod{}), true;
    case OpKind::remainder:
      return fn(Remainder{}), true;
#define KILN_REF_MATH(k, name)                                                       \
  case OpKind::name:                                                                 \
    return fn([](auto x, auto y) {                                                   \
             return math_in(x, y, [](auto m, auto n) { return ref_math::k(m, n); }); \
           }),                                                                       \
           true;
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_MATH_N(2, KILN_REF_MATH, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_REF_MATH
    case OpKind::maximum:
      return fn(Maximum{}), true;
    case OpKind::minimum:
      return fn(Minimum{}), true;
    case OpKind::eq:
      return fn(Eq{}), true;
    case OpKind::ne:
      return fn(Ne{}), true;
    case OpKind::lt:
      return fn(Lt{}), true;
    case OpKind::le:
      return fn(Le{}), true;
    case OpKind::gt:
      return fn(Gt{}), true;
    case OpKind::ge:
      return fn(Ge{}), true;
    case OpKind::logical_and:
      return fn(LogicalAnd{}), true;
    case OpKind::logical_or:
      return fn(LogicalOr{}), true;
    default:
      return false;
  }
}

/// A combine op's scalar functor on T as a plain function.
template <class T>
using CombineFn = T (*)(T, T);

/// The scalar functor of binary op k on T (with_binary_functor's) as a plain
/// function, or null when k has none: what a reduction or scan folds with
/// when its combine op has no loop of its own.
template <class T>
CombineFn<T> combine_fn(OpKind k) {
  CombineFn<T> fn = nullptr;
  with_binary_functor(k, [&](auto f) {
    using F = decltype(f);
    fn = [](T a, T b) { return static_cast<T>(F{}(a, b)); };
  });
  return fn;
}

}  // namespace kiln::detail
