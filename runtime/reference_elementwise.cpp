// Reference kernels for elementwise unary, binary and ternary ops. Inputs are
// broadcast to the output's shape through stride-0 dims; arithmetic runs in
// the output's dtype (inputs of another dtype are converted first), while
// comparisons and logical ops run in the inputs' promoted dtype and write bool.
// Every op goes through one strided loop that hands tight, vectorisable loops
// the runs whose strides are all 1 (or 0 for a broadcast scalar), split over
// cores for large tensors.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_functors.h"
#include "runtime/reference_impl.h"
#include "runtime/reference_math.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln::detail {
namespace {

// Transcendental ops cost tens of cycles per element; split them finer.
constexpr int64_t kMathGrain = 1 << 14;

// ---- Tight loops over runs ----

template <class O, class A, class F>
void unary_run(O* __restrict o, const A* __restrict a, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <class O, class A, class F>
void binary_run(O* __restrict o, const A* __restrict a, const A* __restrict b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}
template <class O, class A, class F>
void binary_run_scalar_b(O* __restrict o, const A* __restrict a, A b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b);
}
template <class O, class A, class F>
void binary_run_scalar_a(O* __restrict o, A a, const A* __restrict b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a, b[i]);
}
// where picks with a bit mask, reading the condition's bytes as integers (any
// nonzero byte is true): a select the compiler vectorises, where `c[i] ? a[i] : b[i]`
// stayed a branch per element (a random mask cost 8 ns an element in
// mispredictions, 30x an add) and a mask made from a bool stayed scalar.
template <class T>
inline T pick(uint8_t c, T x, T y) {
  using U = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  U ux, uy;
  std::memcpy(&ux, &x, sizeof(T));
  std::memcpy(&uy, &y, sizeof(T));
  const U m = static_cast<U>(U(0) - U(c != 0));
  const U r = static_cast<U>((ux & m) | (uy & static_cast<U>(~m)));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
template <class T>
void where_run(T* __restrict o, const uint8_t* __restrict c, const T* __restrict a,
               const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], a[i], b[i]);
}
template <class T>
void where_run_scalar_b(T* __restrict o, const uint8_t* __restrict c, const T* __restrict a, T y,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], a[i], y);
}
template <class T>
void where_run_scalar_a(T* __restrict o, const uint8_t* __restrict c, T x,
                        const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], x, b[i]);
}

// ---- Drivers: broadcast, coalesce, split over cores, pick a loop per run ----

template <class O, class A, class F>
void map_unary(const View& a, const View& out, F f, int64_t grain) {
  Strides sa = broadcast_strides(a, out.shape);
  auto L = make_loop<2>(out.shape, {out.data, a.data}, {&out.strides, &sa},
                        {int64_t(sizeof(O)), int64_t(sizeof(A))});
  if (L.numel == 0) return;
  const int64_t so_ = L.inner_stride(0) / int64_t(sizeof(O));
  const int64_t sa_ = L.inner_stride(1) / int64_t(sizeof(A));
  parallel_for(L.numel, grain, [&](int64_t begin, int64_t end) {
    for_each_segment(L, L.base, begin, end, [&](const std::array<char*, 2>& p, int64_t n, int64_t) {
      O* o = reinterpret_cast<O*>(p[0]);
      const A* x = reinterpret_cast<const A*>(p[1]);
      if (so_ == 1 && sa_ == 1) {
        unary_run(o, x, n, f);
      } else if (so_ == 1 && sa_ == 0) {
        std::fill(o, o + n, f(*x));
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * so_] = f(x[i * sa_]);
      }
    });
  });
}

template <class O, class A, class F>
void map_binary(const View& a, const View& b, const View& out, F f, int64_t grain) {
  Strides sa = broadcast_strides(a, out.shape);
  Strides sb = broadcast_strides(b, out.shape);
  auto L = make_loop<3>(out.shape, {out.data, a.data, b.data}, {&out.strides, &sa, &sb},
                        {int64_t(sizeof(O)), int64_t(sizeof(A)), int64_t(sizeof(A))});
  if (L.numel == 0) return;
  const int64_t so_ = L.inner_stride(0) / int64_t(sizeof(O));
  const int64_t sa_ = L.inner_stride(1) / int64_t(sizeof(A));
  const int64_t sb_ = L.inner_stride(2) / int64_t(sizeof(A));
  parallel_for(L.numel, grain, [&](int64_t begin, int64_t end) {
    for_each_segment(L, L.base, begin, end, [&](const std::array<char*, 3>& p, int64_t n, int64_t) {
      O* o = reinterpret_cast<O*>(p[0]);
      const A* x = reinterpret_cast<const A*>(p[1]);
      const A* y = reinterpret_cast<const A*>(p[2]);
      if (so_ == 1 && sa_ == 1 && sb_ == 1) {
        binary_run(o, x, y, n, f);
      } else if (so_ == 1 && sa_ == 1 && sb_ == 0) {
        binary_run_scalar_b(o, x, *y, n, f);
      } else if (so_ == 1 && sa_ == 0 && sb_ == 1) {
        binary_run_scalar_a(o, *x, y, n, f);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * so_] = f(x[i * sa_], y[i * sb_]);
      }
    });
  });
}

template <class T>
void map_where(const View& c, const View& a, const View& b, const View& out) {
  Strides sc = broadcast_strides(c, out.shape);
  Strides sa = broadcast_strides(a, out.shape);
  Strides sb = broadcast_strides(b, out.shape);
  constexpr int64_t kT = sizeof(T);
  auto L = make_loop<4>(out.shape, {out.data, c.data, a.data, b.data},
                        {&out.strides, &sc, &sa, &sb}, {kT, int64_t(sizeof(bool)), kT, kT});
  if (L.numel == 0) return;
  const int64_t so_ = L.inner_stride(0) / kT, sc_ = L.inner_stride(1);
  const int64_t sa_ = L.inner_stride(2) / kT, sb_ = L.inner_stride(3) / kT;
  parallel_for(L.numel, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for_each_segment(L, L.base, begin, end, [&](const std::array<char*, 4>& p, int64_t n, int64_t) {
      T* o = reinterpret_cast<T*>(p[0]);
      const uint8_t* cc = reinterpret_cast<const uint8_t*>(p[1]);  // bools, 0 or 1
      const T* x = reinterpret_cast<const T*>(p[2]);
      const T* y = reinterpret_cast<const T*>(p[3]);
      if (so_ == 1 && sc_ == 1 && sa_ == 1 && sb_ == 1) {
        where_run(o, cc, x, y, n);
      } else if (so_ == 1 && sc_ == 1 && sa_ == 1 && sb_ == 0) {
        where_run_scalar_b(o, cc, x, *y, n);
      } else if (so_ == 1 && sc_ == 1 && sa_ == 0 && sb_ == 1) {
        where_run_scalar_a(o, cc, *x, y, n);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * so_] = pick(cc[i * sc_], x[i * sa_], y[i * sb_]);
      }
    });
  });
}

// Arithmetic: inputs converted to out's dtype, computed there.
template <class F>
void unary_same(const View& in, const View& out, F f, int64_t grain) {
  std::vector<std::shared_ptr<Storage>> keep;
  View x = as_dtype(in, out.dtype, keep);
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    map_unary<T, T>(x, out, f, grain);
  });
}

template <class F>
void binary_same(const View& a, const View& b, const View& out, F f,
                 int64_t grain = kElementwiseGrain) {
  std::vector<std::shared_ptr<Storage>> keep;
  View x = as_dtype(a, out.dtype, keep);
  View y = as_dtype(b, out.dtype, keep);
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    map_binary<T, T>(x, y, out, f, grain);
  });
}

// Predicates: computed in the inputs' promoted dtype, written as bool.
template <class F>
void binary_predicate(const View& a, const View& b, const View& out, F f) {
  std::vector<std::shared_ptr<Storage>> keep;
  DType common = promote_types(a.dtype, b.dtype);
  View x = as_dtype(a, common, keep);
  View y = as_dtype(b, common, keep);
  View dst = out.dtype == DType::b8 ? out : scratch(out.shape, DType::b8, keep);
  visit_dtype(common, [&](auto t) {
    using T = decltype(t);
    map_binary<bool, T>(x, y, dst, f, kElementwiseGrain);
  });
  if (dst.data != out.data) copy_to(dst, out);
}

// philox (ops.def): the draw of the dtype its attributes give, at key a and
// counters b (both as int64), written into out through a scratch of that dtype.
void ref_philox(const Attrs& attrs, const View& a, const View& b, const View& out) {
  std::vector<std::shared_ptr<Storage>> keep;
  View key = as_dtype(a, DType::i64, keep), counter = as_dtype(b, DType::i64, keep);
  const DType t = attrs.has(AttrKey::dtype) ? attrs.dtype(AttrKey::dtype) : DType::f32;
  View dst = out.dtype == t ? out : scratch(out.shape, t, keep);
  switch (t) {
    case DType::f32:
      map_binary<float, int64_t>(key, counter, dst, philox_uniform, kMathGrain);
      break;
    case DType::f64:
      map_binary<double, int64_t>(key, counter, dst, philox_uniform_f64, kMathGrain);
      break;
    case DType::i64:
      if (attrs.has(AttrKey::low)) {
        // Computed in uint64, so a range wider than 2^63 wraps into place.
        const auto low = static_cast<uint64_t>(attrs.i(AttrKey::low));
        const uint64_t bound = static_cast<uint64_t>(attrs.i(AttrKey::high)) - low;
        map_binary<int64_t, int64_t>(
            key, counter, dst,
            [=](int64_t k, int64_t c) {
              return static_cast<int64_t>(low + philox_below(k, c, bound));
            },
            kMathGrain);
      } else {
        map_binary<int64_t, int64_t>(
            key, counter, dst,
            [](int64_t k, int64_t c) { return static_cast<int64_t>(philox_bits(k, c)); },
            kMathGrain);
      }
      break;
    default:
      KILN_CHECK(false, "philox: no draw of dtype ", dtype_name(t));
  }
  if (dst.data != out.data) copy_to(dst, out);
}

}  // namespace

void ref_unary(OpKind k, const View& in, const View& out) {
  switch (k) {
    case OpKind::neg:
      return unary_same(in, out, Neg{}, kElementwiseGrain);
    case OpKind::abs:
      return unary_same(in, out, Abs{}, kElementwiseGrain);
    case OpKind::sign:
      return unary_same(in, out, Sign{}, kElementwiseGrain);
    case OpKind::relu:
      return unary_same(in, out, Relu{}, kElementwiseGrain);
#define KILN_REF_MATH(k, name)                                                             \
  case OpKind::name:                                                                       \
    return unary_same(                                                                     \
        in, out, [](auto x) { return math_in(x, [](auto m) { return ref_math::k(m); }); }, \
        kMathGrain);
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_MATH_N(1, KILN_REF_MATH, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_REF_MATH
    case OpKind::logical_not: {
      std::vector<std::shared_ptr<Storage>> keep;
      View dst = out.dtype == DType::b8 ? out : scratch(out.shape, DType::b8, keep);
      visit_dtype(in.dtype, [&](auto t) {
        using T = decltype(t);
        map_unary<bool, T>(
            in, dst, [](T x) { return x == T(0); }, kElementwiseGrain);
      });
      if (dst.data != out.data) copy_to(dst, out);
      return;
    }
    case OpKind::cast: {
      View src = in;
      src.strides = broadcast_strides(in, out.shape);
      src.shape = out.shape;
      return copy_to(src, out);
    }
    default:
      break;
  }
  KILN_CHECK(false, "reference kernel: ", op_name(k), " is not an elementwise unary op");
}

void ref_binary(OpKind k, const Attrs& attrs, const View& a, const View& b, const View& out) {
  if (k == OpKind::philox) return ref_philox(attrs, a, b, out);
  const bool done = with_binary_functor(k, [&](auto f) {
    if constexpr (std::is_same_v<decltype(f(0.0, 0.0)), bool>) {  // compare, logical
      binary_predicate(a, b, out, f);
    } else {
      binary_same(a, b, out, f, is_math(k) ? kMathGrain : kElementwiseGrain);
    }
  });
  KILN_CHECK(done, "reference kernel: ", op_name(k), " is not an elementwise binary op");
}

void ref_where(const View& cond, const View& a, const View& b, const View& out) {
  std::vector<std::shared_ptr<Storage>> keep;
  View c = as_dtype(cond, DType::b8, keep);
  View x = as_dtype(a, out.dtype, keep);
  View y = as_dtype(b, out.dtype, keep);
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    map_where<T>(c, x, y, out);
  });
}

}  // namespace kiln::detail
