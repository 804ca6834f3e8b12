// Op kinds and their table entries, generated from ops.def.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ir/attrs.h"
#include "ir/device.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace kiln {

enum class OpKind : uint8_t {
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, ...) name,
#include "ir/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, ...) +1
#include "ir/ops.def"
#undef KILN_OP
    ;

enum class OpCategory : uint8_t {
  Input,
  Creation,
  Unary,
  Binary,
  Ternary,
  Reduce,
  Scan,
  Movement,
  Matmul,
  Gather,
  Scatter,
  Sort,
  Attention,
  Check,
  Collective,
  Custom
};

/// The static type of a value: element type, shape, device.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  Device device;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return kiln::numel(shape); }
  /// Bytes of a dense buffer of this type; throws kiln::Error when that overflows.
  int64_t bytes() const { return byte_size(shape, dtype_size(dtype)); }
  /// "f32[64,100]", prefixed "cuda:" on a GPU.
  std::string str() const;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// How kernels compute one element of an op: ops.def's `scalar` column.
enum class ScalarRule : uint8_t {
  none,
  custom,
  math,
  arith,
  compare,
  logical,
  reduce,
  argreduce,
  scan,
  decomp
};

/// Where a reduction's accumulator starts (ops.def's reduce(identity, combine)):
/// 0, 1, or the dtype's lowest or highest value (-inf and +inf for floats).
enum class Identity : uint8_t { none, zero, one, lowest, highest };

/// Where tests draw an op's inputs (ops.def's `domain` column): operand 0 in
/// [lo[0], hi[0]], every later operand in [lo[1], hi[1]].
struct Domain {
  double lo[2];
  double hi[2];
  double low(size_t operand) const { return lo[operand == 0 ? 0 : 1]; }
  double high(size_t operand) const { return hi[operand == 0 ? 0 : 1]; }
};

/// One row of the op table.
struct OpInfo {
  const char* name;
  int arity;  // -1: variadic
  OpCategory category;
  bool differentiable;  // has a gradient: a VJP rule (ir/vjp.h), or for custom, user code
  bool costly;          // ops.def's `cost` column
  ScalarRule scalar;
  /// Reductions (scalar rule reduce or argreduce): the starting value and the
  /// binary op that folds each element in.
  Identity identity;
  OpKind combine;
  Domain domain;
};

const OpInfo& op_info(OpKind k);
inline const char* op_name(OpKind k) { return op_info(k).name; }
bool parse_op_name(std::string_view s, OpKind* out);
const char* category_name(OpCategory c);

/// True for unary, binary and ternary ops: one output element from the operands' elements at the same index.
bool is_elementwise(OpKind k);
/// Elementwise ops that cost much more than a load or an add (transcendentals,
/// division, pow): ops.def's `cost` column.
inline bool is_expensive(OpKind k) { return op_info(k).costly; }
/// Float-only elementwise ops (ops.def's `math` scalar kind): exp, tanh, gelu,
/// atan2, logaddexp, ... (unary or binary: see the op's arity)
inline bool is_math(OpKind k) { return op_info(k).scalar == ScalarRule::math; }
/// Composites (ops.def's `decomp`): ops defined as other ops of the table,
/// expanded where they are applied (ir/decompose.h), so no graph holds them.
inline bool is_composite(OpKind k) { return op_info(k).scalar == ScalarRule::decomp; }
/// Scans (ops.def's `scan`): cumsum, cumprod, logcumsumexp.
inline bool is_scan(OpKind k) { return op_info(k).scalar == ScalarRule::scan; }
/// Reductions whose result is a position (ops.def's `argreduce`): argmax, argmin.
inline bool is_arg_reduction(OpKind k) { return op_info(k).scalar == ScalarRule::argreduce; }
/// Ops the builder must not merge (graph inputs, random draws, custom calls).
bool has_identity(OpKind k);

/// Result type of an op from its operand types and attributes, by the table's
/// shape and dtype rules. Throws kiln::Error (expected vs got, no location:
/// callers attach it). Not for Input/Creation/Custom ops, whose type is given.
TensorType infer_type(OpKind k, std::span<const TensorType> operands, const Attrs& attrs);

/// The reduction of a collective (all_reduce, reduce_scatter): attribute `reduce`.
enum class ReduceOp : uint8_t { sum, avg, max, min };
const char* reduce_op_name(ReduceOp r);
/// Parses "sum", "avg", "max", "min"; false for anything else.
bool parse_reduce_op(std::string_view s, ReduceOp* out);

/// All op kinds, in table order (for table-driven tests and benchmarks).
const std::vector<OpKind>& all_ops();

// ---- Generating code from ops.def's `scalar` column ----
// Inside a KILN_OP definition over the table:
//   KILN_SCALAR_RULE(scalar)                the row's ScalarRule
//   KILN_SCALAR_KIR(F, name, arity, scalar) F(kind, k, name, arity) for a row with a kernel-IR
//                                           op k (math, arith, compare, logical); else nothing
//   KILN_SCALAR_MATH(F, name, scalar)       F(k, name) for a math row; else nothing
//   KILN_SCALAR_MATH_N(N, F, name, arity, scalar)
//                                           F(k, name) for a math row of arity N (1 or
//                                           2: math(k) takes one operand or two); else
//                                           nothing
#define KILN_SCALAR_SPLIT_none none, _
#define KILN_SCALAR_SPLIT_custom custom, _
#define KILN_SCALAR_SPLIT_math(k) math, k
#define KILN_SCALAR_SPLIT_arith(k) arith, k
#define KILN_SCALAR_SPLIT_compare(k) compare, k
#define KILN_SCALAR_SPLIT_logical(k) logical, k
#define KILN_SCALAR_SPLIT_reduce(identity, k) reduce, k
#define KILN_SCALAR_SPLIT_argreduce(identity, k) argreduce, k
#define KILN_SCALAR_SPLIT_scan(identity, k) scan, k
#define KILN_SCALAR_SPLIT_decomp(expansion) decomp, expansion
#define KILN_SCALAR_EXPAND(M, ...) M(__VA_ARGS__)

#define KILN_SCALAR_RULE(scalar) KILN_SCALAR_EXPAND(KILN_SCALAR_RULE_I, KILN_SCALAR_SPLIT_##scalar)
#define KILN_SCALAR_RULE_I(kind, k) ::kiln::ScalarRule::kind

#define KILN_SCALAR_KIR(F, name, arity, scalar) \
  KILN_SCALAR_EXPAND(KILN_SCALAR_KIR_I, F, name, arity, KILN_SCALAR_SPLIT_##scalar)
#define KILN_SCALAR_KIR_I(F, name, arity, kind, k) KILN_SCALAR_KIR_##kind(F, name, arity, k)
#define KILN_SCALAR_KIR_none(F, name, arity, k)
#define KILN_SCALAR_KIR_custom(F, name, arity, k)
#define KILN_SCALAR_KIR_math(F, name, arity, k) F(math, k, name, arity)
#define KILN_SCALAR_KIR_arith(F, name, arity, k) F(arith, k, name, arity)
#define KILN_SCALAR_KIR_compare(F, name, arity, k) F(compare, k, name, arity)
#define KILN_SCALAR_KIR_logical(F, name, arity, k) F(logical, k, name, arity)
#define KILN_SCALAR_KIR_reduce(F, name, arity, k)
#define KILN_SCALAR_KIR_argreduce(F, name, arity, k)
#define KILN_SCALAR_KIR_scan(F, name, arity, k)
#define KILN_SCALAR_KIR_decomp(F, name, arity, k)

#define KILN_SCALAR_MATH(F, name, scalar) \
  KILN_SCALAR_EXPAND(KILN_SCALAR_MATH_I, F, name, KILN_SCALAR_SPLIT_##scalar)
#define KILN_SCALAR_MATH_I(F, name, kind, k) KILN_SCALAR_MATH_##kind(F, name, k)
#define KILN_SCALAR_MATH_none(F, name, k)
#define KILN_SCALAR_MATH_custom(F, name, k)
#define KILN_SCALAR_MATH_math(F, name, k) F(k, name)
#define KILN_SCALAR_MATH_arith(F, name, k)
#define KILN_SCALAR_MATH_compare(F, name, k)
#define KILN_SCALAR_MATH_logical(F, name, k)
#define KILN_SCALAR_MATH_reduce(F, name, k)
#define KILN_SCALAR_MATH_argreduce(F, name, k)
#define KILN_SCALAR_MATH_scan(F, name, k)
#define KILN_SCALAR_MATH_decomp(F, name, k)

#define KILN_SCALAR_MATH_N(N, F, name, arity, scalar) \
  KILN_SCALAR_EXPAND(KILN_SCALAR_MATH_N_I, N, F, name, arity, KILN_SCALAR_SPLIT_##scalar)
#define KILN_SCALAR_MATH_N_I(N, F, name, arity, kind, k) \
  KILN_SCALAR_MATH_N_##kind(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_none(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_custom(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_math(N, F, name, arity, k) KILN_SCALAR_IF_##N##_##arity(F(k, name))
#define KILN_SCALAR_MATH_N_arith(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_compare(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_logical(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_reduce(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_argreduce(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_scan(N, F, name, arity, k)
#define KILN_SCALAR_MATH_N_decomp(N, F, name, arity, k)
// A math row of another arity has no KILN_SCALAR_IF_ and fails to compile.
#define KILN_SCALAR_IF_1_1(...) __VA_ARGS__
#define KILN_SCALAR_IF_1_2(...)
#define KILN_SCALAR_IF_2_1(...)
#define KILN_SCALAR_IF_2_2(...) __VA_ARGS__

//   KILN_SCALAR_REDUCE(scalar)              the row's Identity and combine OpKind
#define KILN_SCALAR_REDUCE(scalar) KILN_SCALAR_REDUCE_##scalar
#define KILN_SCALAR_REDUCE_none ::kiln::Identity::none, ::kiln::OpKind::arg
#define KILN_SCALAR_REDUCE_custom KILN_SCALAR_REDUCE_none
#define KILN_SCALAR_REDUCE_math(k) KILN_SCALAR_REDUCE_none
#define KILN_SCALAR_REDUCE_arith(k) KILN_SCALAR_REDUCE_none
#define KILN_SCALAR_REDUCE_compare(k) KILN_SCALAR_REDUCE_none
#define KILN_SCALAR_REDUCE_logical(k) KILN_SCALAR_REDUCE_none
#define KILN_SCALAR_REDUCE_reduce(identity, k) ::kiln::Identity::identity, ::kiln::OpKind::k
#define KILN_SCALAR_REDUCE_argreduce(identity, k) ::kiln::Identity::identity, ::kiln::OpKind::k
#define KILN_SCALAR_REDUCE_scan(identity, k) ::kiln::Identity::identity, ::kiln::OpKind::k
#define KILN_SCALAR_REDUCE_decomp(expansion) KILN_SCALAR_REDUCE_none

//   KILN_SCALAR_DECOMP(F, name, scalar)     F(name, expansion) for a composite row; else nothing
#define KILN_SCALAR_DECOMP(F, name, scalar) \
  KILN_SCALAR_EXPAND(KILN_SCALAR_DECOMP_I, F, name, KILN_SCALAR_SPLIT_##scalar)
#define KILN_SCALAR_DECOMP_I(F, name, kind, e) KILN_SCALAR_DECOMP_##kind(F, name, e)
#define KILN_SCALAR_DECOMP_none(F, name, e)
#define KILN_SCALAR_DECOMP_custom(F, name, e)
#define KILN_SCALAR_DECOMP_math(F, name, e)
#define KILN_SCALAR_DECOMP_arith(F, name, e)
#define KILN_SCALAR_DECOMP_compare(F, name, e)
#define KILN_SCALAR_DECOMP_logical(F, name, e)
#define KILN_SCALAR_DECOMP_reduce(F, name, e)
#define KILN_SCALAR_DECOMP_argreduce(F, name, e)
#define KILN_SCALAR_DECOMP_scan(F, name, e)
#define KILN_SCALAR_DECOMP_decomp(F, name, e) F(name, e)

//   KILN_DOMAIN(domain)                     the row's Domain
#define KILN_DOMAIN(domain) KILN_DOMAIN_##domain
#define KILN_DOMAIN_any ::kiln::Domain{{-3, -3}, {3, 3}}
#define KILN_DOMAIN_in(lo, hi) ::kiln::Domain{{lo, lo}, {hi, hi}}
#define KILN_DOMAIN_in2(lo, hi, lo2, hi2) ::kiln::Domain{{lo, lo2}, {hi, hi2}}

}  // namespace kiln
