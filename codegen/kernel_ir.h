// The kernel IR: a small loop-level IR between a fusion group and a backend.
// Lowering (codegen/lower.h) writes it through KernelBuilder
// (codegen/kernel_builder.h); the CPU backend (LLVM) and the CUDA C
// backend read it unchanged, so it says everything about indexing and nothing
// about the target: no LLVM types, no vector widths, no thread counts.
//
// A kernel is a list of dense row-major buffers with static shapes and a body
// run once per iteration of an outer, parallel loop of `range` iterations. The
// runtime splits [0, range) into chunks (threads on the CPU, blocks and
// threads on CUDA); loop variable i0 is the outer index. Inside the body:
//
//   %3 = load buf0[%2] : f32          values are SSA, defined by `let` statements
//   for i1 in [0, 100): ...           inner loops with static trip counts
//   for i1 in [0, p0): ...            ... or a trip count passed at run time
//   %4 = param p1 : f32               a run-time parameter (see below)
//   if %7: ...                        guarded statements
//   store buf2[%2] = %5
//   acc0 = init                       accumulators: sum/max/min/argmax/argmin
//   acc0 <- %5 (at %1)                ... updated inside a loop (argmax: with a position)
//   %9 = acc acc0 : f64               ... and read after it
//
// A value is visible in the block that defines it and in blocks nested inside.
// An output buffer may be loaded back after the kernel stored to it (softmax
// keeps exp(x - max) in its output between two loops over a row): a load reads
// the element this outer iteration stored last at that index.
// Indices are i64 element offsets into the dense buffers; bool elements are one
// byte holding 0 or 1. Lowering has already made every dtype conversion explicit
// (`cast`), so each scalar op sees operands of the types listed below.
// Elementwise ops of the op table map one-to-one onto scalar ops here; the
// composite ones (tanh, sigmoid, gelu, ...) are kept whole and each backend
// expands them (the CPU backend into vectorisable polynomials, CUDA into its
// math library).
//
// Sizes are static, except in a kernel template (codegen/kernel_template.h):
// there, constants and loop trip counts that depend on a dynamic size (a batch
// dimension) are run-time parameters p0, p1, ... (i64 slots, or f64 for floating
// constants), and the buffers marked "sized at run time" have the shapes of one
// instance only. The caller passes the parameter values in a table after the
// buffer pointers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "ir/shape.h"

namespace kiln::kir {

// Scalar ops: the kernel's own (leaves, conversion, choice, index arithmetic)
// around the elementwise ops of the op table, which ir/ops.def's `scalar`
// column names (math, arith, compare and logical rows). A trailing underscore
// in an enumerator is not part of its spelling.
//   const      immediate: fimm (floats) or iimm (integers, bool)
//   index      the value of loop variable `ref` (i64)
//   load       buffer `ref` at element args[0] (i64)
//   table      constant table `ref` at element args[0] (i64)
//   acc        the result of accumulator `ref` (argmax/argmin: the i64 position)
//   param      run-time parameter `ref`, converted to the value's type like a const
//   cast       args[0] converted to the value's type, as static_cast (x != 0 to bool)
//   select     args[0] (bool) ? args[1] : args[2]
//   table ops  math and arith: operands of the value's type; compare: operands of
//              any one type, result bool; logical: bool. Semantics as the reference
//              kernels: sign gives 0 for NaN; relu keeps NaN; integer div gives 0
//              for x/0, wrapping -x for x/-1, else truncates; integer pow is exact
//              with wrap-around (negative exponents give 0 unless |x| = 1); max/min
//              propagate NaN (which zero of +-0 is unspecified).
//   idiv imod  index arithmetic on non-negative i64 with a positive divisor
//   philox     a draw from an i64 key and an i64 counter (ops.def, philox): f32 or
//              f64 in [0, 1) or, for i64, all 64 bits, by the value's type
//   philox_below  i64 uniform in [0, args[2]) from key args[0] and counter args[1]:
//              args[2] >= 1 is read as unsigned (ops.def, philox with low and high,
//              less low)
enum class ScalarOp : uint8_t {
  const_,
  index,
  load,
  table,
  acc,
  param,
  cast,
  select,
#define KILN_KIR_ENUM(kind, k, name, arity) k,
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_KIR(KILN_KIR_ENUM, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_KIR_ENUM
  idiv,
  imod,
  philox,
  philox_below,
};

/// The op's spelling in kernel IR text ("exp", "and", "load").
std::string_view scalar_op_name(ScalarOp op);
/// Operand count: 0 for leaves (load and table take their index as args[0]).
int scalar_op_arity(ScalarOp op);
/// The op table's scalar kind of an elementwise op (ScalarRule::none for the
/// kernel's own ops).
ScalarRule scalar_op_rule(ScalarOp op);
/// True for the compare ops (result bool, operands of any one type).
inline bool is_comparison(ScalarOp op) {
  return scalar_op_rule(op) == ScalarRule::compare;
}
/// Float-only ops: the table's math ops.
inline bool is_float_only(ScalarOp op) {
  return scalar_op_rule(op) == ScalarRule::math;
}
/// The scalar op that computes one element of elementwise op `k` (ops.def's
/// `scalar` column); throws kiln::Error for an op without one (custom, none).
ScalarOp scalar_op_of(OpKind k);

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

/// One SSA value. Operand count follows the op: leaves use none (load and
/// table use args[0]), unary ops one, binary ops two, select three.
struct ValueDef {
  ScalarOp op = ScalarOp::const_;
  DType type = DType::f32;
  ValueId args[3] = {kNoValue, kNoValue, kNoValue};
  double fimm = 0;   // const_ of a floating type
  int64_t iimm = 0;  // const_ of an integer or bool type
  int32_t ref = -1;  // index: loop variable; load: buffer; table: table; acc: accumulator;
                     // param: parameter
};

/// A running reduction: reduction op `op` of the op table (ops.def's
/// reduce(identity, combine) and argreduce rows). `type` is the type of the
/// values folded in (and of the result, except an argreduce's, which is the i64
/// position of the first element its combine keeps; a NaN counts as kept). The
/// accumulator starts at the identity and folds each element in with the
/// combine op, which backends may reassociate. A scan's running value (op a
/// scan row: cumsum, cumprod, logcumsumexp) is `ordered`: folded strictly in
/// order and read inside its loop after each update (kept in a register
/// rather than loaded back from memory); backends must not reassociate it.
struct Accumulator {
  OpKind op = OpKind::sum;
  DType type = DType::f32;
  bool ordered = false;
  bool arg() const { return is_arg_reduction(op); }
};

/// An immediate of some type: `f` for floating types, `i` for integers and bool.
struct Immediate {
  double f = 0;
  int64_t i = 0;
};
/// Where an accumulator of reduction `op` starts in type t (ops.def's identity:
/// 0, 1, or the type's lowest or highest, +-inf for floats, false/true for bool).
Immediate identity_of(OpKind op, DType t);
/// The scalar op that folds an element into an accumulator of reduction `op`.
ScalarOp combine_of(OpKind op);

/// A dense row-major buffer the kernel reads or writes.
struct Buffer {
  std::string name;  // "buf0"
  DType dtype = DType::f32;
  Shape shape;
  bool output = false;
  /// For an output written in place of an input (a matmul epilogue computed in the
  /// matmul's result buffer): the input buffer whose pointer the stores use, else -1.
  int32_t alias = -1;
  /// The graph value this buffer holds (for callers; not part of the kernel's meaning).
  Value value;
  /// Kernel templates: `shape` is one instance's; others differ (the code assumes nothing
  /// about the buffer's extent).
  bool sized_at_run_time = false;

  int64_t numel() const { return kiln::numel(shape); }
};

/// Constant data (a `literal` inside a group), read with `table`.
struct Table {
  DType dtype = DType::f32;
  std::vector<double> fdata;   // floating types
  std::vector<int64_t> idata;  // integer and bool types
  int64_t size() const { return int64_t(fdata.empty() ? idata.size() : fdata.size()); }
};

enum class StmtKind : uint8_t { let, store, loop, if_, acc_init, acc_update };

struct Stmt {
  StmtKind kind = StmtKind::let;
  ValueId value = kNoValue;  // let: the value defined; store/acc_update: the value; if_: condition
  ValueId index = kNoValue;  // store: element index; acc_update of argmax/argmin: the position
  int32_t ref = -1;          // store: buffer; loop: loop variable; acc_init/acc_update: accumulator
  int64_t extent = 0;        // loop: trip count (the variable runs over [0, extent))
  int32_t extent_param = -1;  // loop: >= 0 when the trip count is that run-time parameter
  std::vector<Stmt> body;     // loop, if_
};

struct Kernel {
  std::string name;
  std::vector<Buffer> buffers;  // argument order
  std::vector<Table> tables;
  std::vector<Accumulator> accs;
  std::vector<ValueDef> values;
  int32_t num_loops = 1;  // loop variables i0 (the outer, parallel one) .. i{n-1}
  int64_t range = 0;      // trip count of the outer loop
  /// The inner loops run in order on one thread (a scatter's read-modify-write
  /// of one column): a backend must not split them across threads.
  bool serial_inner = false;
  /// Run-time parameters (kernel templates only): i64 (sizes, integer constants) or
  /// f64 (floating constants, converted to the value's type as a constant would be).
  std::vector<DType> params;
  std::vector<Stmt> body;  // one outer iteration; i0 is its index
};

struct PrintKernelOptions {
  /// Include the kernel's name and the graph values of its buffers. Off for the
  /// text that keys caches, so equal kernels from different graphs share entries.
  bool names = true;
  /// Leave out every size-like quantity (constants, loop trip counts, the range,
  /// buffer shapes): the text that a kernel shares with itself at other sizes.
  bool skeleton = false;
};

/// The kernel as text (the dumps' "kernel IR" section; see the file comment).
std::string print_kernel(const Kernel& k, const PrintKernelOptions& opts = {});

/// Checks that every value is defined once before use in a visible block, that
/// operand types follow the op, and that references are in range. Throws
/// kiln::Error naming the first problem.
void verify_kernel(const Kernel& k);

/// Integer divisions and remainders one outer iteration of `k` executes, each
/// counted as often as the loops it depends on run (one that depends on the outer
/// index alone counts once: it is hoisted out of the inner loops). By powers of
/// two (shifts and masks) they are not counted. Lowering picks loop shapes by it.
int64_t divisions_per_iteration(const Kernel& k);

}  // namespace kiln::kir
