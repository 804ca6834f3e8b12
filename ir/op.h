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
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp) name,
#include "ir/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp) +1
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
  Movement,
  Matmul,
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

/// One row of the op table.
struct OpInfo {
  const char* name;
  int arity;  // -1: variadic
  OpCategory category;
  bool differentiable;  // has a VJP rule
};

const OpInfo& op_info(OpKind k);
inline const char* op_name(OpKind k) { return op_info(k).name; }
bool parse_op_name(std::string_view s, OpKind* out);
const char* category_name(OpCategory c);

/// True for unary, binary and ternary ops: one output element from the operands' elements at the same index.
bool is_elementwise(OpKind k);
/// Elementwise ops that cost much more than a load or an add (transcendentals,
/// division, pow): fusion does not recompute them per broadcast point, and
/// lowering keeps their results rather than computing them twice.
bool is_expensive(OpKind k);
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

}  // namespace kiln
