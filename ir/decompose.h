// Composite ops: ops of the table defined as other ops (ops.def's scalar column
// `decomp(expansion)`, e.g. softsign = x / (1 + |x|)). A composite is expanded
// where it is applied, by the one expansion in its row: the Builder expands it
// into a graph (so no graph, pass or backend ever holds it, and autodiff
// differentiates the expansion), and the frontend expands it into eager or
// traced ops (frontend/dispatch.cpp), so eager and traced mode run the same ops.
//
// An expansion is an expression over the operands `x` (and `y`) in which every
// elementwise op of the table is a function of its name, taking terms or plain
// numbers (`add(1.0, abs(x))`): a number becomes a 0-d constant as one in
// `1 + x.abs()` would (ir/dtype.h's promote_with_scalar).
#pragma once

#include <vector>

#include "ir/op.h"

namespace kiln {

class Builder;
struct Value;

namespace detail {
[[noreturn]] void throw_not_composite(OpKind k);
}  // namespace detail

/// How an expansion applies one op of the table: records or runs it, on values
/// of type T (a graph Value, a Tensor).
template <class T>
class Expander {
 public:
  virtual ~Expander() = default;
  /// Op k of the table on the operands (a composite is expanded in turn).
  virtual T op(OpKind k, std::vector<T> operands) = 0;
  /// The number `c` as a 0-d constant used with `like` (dtype by promote_with_scalar).
  virtual T number(const T& like, double c) = 0;
};

namespace decomp_dsl {

/// A value of an expansion, with the expander that makes its ops.
template <class T>
struct Term {
  Expander<T>* e;
  T v;
};

// One function per elementwise op of the table, named as the op.
#define KILN_DSL_Unary(name)                   \
  template <class T>                           \
  Term<T> name(const Term<T>& a) {             \
    return {a.e, a.e->op(OpKind::name, {a.v})}; \
  }
#define KILN_DSL_Binary(name)                                    \
  template <class T>                                             \
  Term<T> name(const Term<T>& a, const Term<T>& b) {             \
    return {a.e, a.e->op(OpKind::name, {a.v, b.v})};             \
  }                                                              \
  template <class T>                                             \
  Term<T> name(const Term<T>& a, double b) {                     \
    return {a.e, a.e->op(OpKind::name, {a.v, a.e->number(a.v, b)})}; \
  }                                                              \
  template <class T>                                             \
  Term<T> name(double a, const Term<T>& b) {                     \
    return {b.e, b.e->op(OpKind::name, {b.e->number(b.v, a), b.v})}; \
  }
#define KILN_DSL_Ternary(name)                                          \
  template <class T>                                                    \
  Term<T> name(const Term<T>& a, const Term<T>& b, const Term<T>& c) { \
    return {a.e, a.e->op(OpKind::name, {a.v, b.v, c.v})};              \
  }
#define KILN_DSL_Input(name)
#define KILN_DSL_Creation(name)
#define KILN_DSL_Reduce(name)
#define KILN_DSL_Scan(name)
#define KILN_DSL_Movement(name)
#define KILN_DSL_Matmul(name)
#define KILN_DSL_Gather(name)
#define KILN_DSL_Scatter(name)
#define KILN_DSL_Sort(name)
#define KILN_DSL_Attention(name)
#define KILN_DSL_Check(name)
#define KILN_DSL_Collective(name)
#define KILN_DSL_Custom(name)
#define KILN_OP(name, arity, category, ...) KILN_DSL_##category(name)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_DSL_Unary
#undef KILN_DSL_Binary
#undef KILN_DSL_Ternary
#undef KILN_DSL_Input
#undef KILN_DSL_Creation
#undef KILN_DSL_Reduce
#undef KILN_DSL_Scan
#undef KILN_DSL_Movement
#undef KILN_DSL_Matmul
#undef KILN_DSL_Gather
#undef KILN_DSL_Scatter
#undef KILN_DSL_Sort
#undef KILN_DSL_Attention
#undef KILN_DSL_Check
#undef KILN_DSL_Collective
#undef KILN_DSL_Custom

}  // namespace decomp_dsl

/// Composite k (is_composite) on its operands, by its row's expansion, each op
/// applied through `e`. Throws kiln::Error for an op that is not a composite.
template <class T>
T expand_composite(OpKind k, Expander<T>& e, const std::vector<T>& operands) {
  using namespace decomp_dsl;
  const Term<T> x{&e, operands.empty() ? T{} : operands[0]};
  const Term<T> y{&e, operands.size() < 2 ? T{} : operands[1]};
  (void)x;
  (void)y;
  switch (k) {
#define KILN_DECOMP_CASE(name, expansion) \
  case OpKind::name:                      \
    return (expansion).v;
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_DECOMP(KILN_DECOMP_CASE, name, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_DECOMP_CASE
    default:
      break;
  }
  detail::throw_not_composite(k);
}

/// Composite k expanded into b's graph (what Builder::op does with one).
Value expand_composite(Builder& b, OpKind k, const std::vector<Value>& operands);

/// The result type of composite k on operands of these types: its expansion's,
/// built in a scratch graph (the table's shape and dtype rule `decomp`). Throws
/// the expansion's kiln::Error where it rejects them.
TensorType composite_type(OpKind k, std::span<const TensorType> operands);

}  // namespace kiln
