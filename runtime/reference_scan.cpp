// Reference kernels for scans (ir/ops.def's scan rows: cumsum, cumprod,
// logcumsumexp): along `dim`, each output the running fold of the elements up
// to it, started at the row's identity and combined in order with the row's
// combine op, in the result's dtype (the compiled kernels fold in the same
// order and type). Parallel over the positions outside `dim`.
#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/reference_math.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln::detail {
namespace {

constexpr int64_t kScanGrain = 1 << 14;

// The combine ops a scan row may name (ops.def), on the result's dtype: as the
// elementwise ops compute them (integers wrap, bools or/and; a binary math op's
// ref_math on floats).
template <class T>
T combine(OpKind op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return op == OpKind::add ? (a || b) : (a && b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(op == OpKind::add ? U(a) + U(b) : U(a) * U(b));
  } else {
    switch (op) {
      case OpKind::add:
        return a + b;
      case OpKind::mul:
        return a * b;
#define KILN_REF_COMBINE(k, name) \
  case OpKind::name:              \
    return ref_math::k(a, b);
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_MATH_N(2, KILN_REF_COMBINE, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_REF_COMBINE
      default:
        KILN_CHECK(false, "reference scan: no combine op ", op_name(op));
    }
    return a;
  }
}

template <class T>
T identity(Identity id) {
  switch (id) {
    case Identity::one:
      return T(1);
    case Identity::lowest:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    default:
      return T(0);
  }
}

}  // namespace

void ref_scan(OpKind k, const Attrs& attrs, const View& in, const View& out) {
  KILN_CHECK(out.shape == in.shape, op_name(k), ": output ", shape_str(out.shape), " for input ",
             shape_str(in.shape));
  const OpInfo& info = op_info(k);
  KILN_CHECK(info.scalar == ScalarRule::scan, "reference kernel: ", op_name(k), " is not a scan");
  std::vector<std::shared_ptr<Storage>> keep;
  const View x = in.dtype == out.dtype ? in : [&] {
    View c = scratch(in.shape, out.dtype, keep);
    copy_to(in, c);
    return c;
  }();
  if (out.numel() == 0) return;
  const int64_t rank = out.rank();
  const int64_t d = normalize_dim(attrs.i(AttrKey::dim), std::max<int64_t>(rank, 1));
  const bool reverse = attrs.i(AttrKey::reverse, 0) != 0;
  const int64_t n = rank == 0 ? 1 : out.shape[size_t(d)];
  const int64_t xs = rank == 0 ? 0 : x.strides[size_t(d)],
                os = rank == 0 ? 0 : out.strides[size_t(d)];
  // The lines along d: every position with coordinate d at 0.
  Shape lines = out.shape;
  if (rank > 0) lines[size_t(d)] = 1;
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    const T start = identity<T>(info.identity);
    parallel_for(numel(lines), std::max<int64_t>(1, kScanGrain / n),
                 [&](int64_t begin, int64_t end) {
                   // The fold along one line, its combine op known at compile time
                   // (walking backwards for reverse: negative steps).
                   auto fold = [&](auto op) {
                     for (int64_t line = begin; line < end; ++line) {
                       const auto [xo, oo] = offsets_at(line, lines, x.strides, out.strides);
                       const T* xp = x.ptr<T>() + xo + (reverse ? (n - 1) * xs : 0);
                       T* op_out = out.ptr<T>() + oo + (reverse ? (n - 1) * os : 0);
                       const int64_t xstep = reverse ? -xs : xs, ostep = reverse ? -os : os;
                       T acc = start;
                       for (int64_t i = 0; i < n; ++i) {
                         acc = combine<T>(op, acc, xp[i * xstep]);
                         op_out[i * ostep] = acc;
                       }
                     }
                   };
                   switch (info.combine) {
                     case OpKind::add:
                       return fold(std::integral_constant<OpKind, OpKind::add>{});
                     case OpKind::mul:
                       return fold(std::integral_constant<OpKind, OpKind::mul>{});
                     default:
                       return fold(info.combine);
                   }
                 });
  });
}

}  // namespace kiln::detail
