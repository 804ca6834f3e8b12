// KernelBuilder: how lowering writes kernel IR. It appends statements to the
// innermost open block, hash-conses values within the visible blocks, folds
// integer index arithmetic (so coordinates that are linearised and split again
// cancel out), and drops unused values when the kernel is taken.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::kir {

/// Builds a kernel statement by statement. Values are hash-consed within the
/// visible blocks (building the same expression twice gives the same value),
/// and simple integer identities are folded (x*1, x+0, x/1, x%1, constants).
class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name);

  Kernel& kernel() { return k_; }
  /// The finished kernel: blocks must be closed. Values nothing uses are dropped
  /// and the rest renumbered densely, in definition order.
  Kernel take();

  int32_t add_buffer(Buffer b);
  int32_t add_table(Table t);
  int32_t add_accumulator(OpKind op, DType type, bool ordered = false);

  DType type(ValueId v) const { return k_.values.at(v).type; }
  const ValueDef& def(ValueId v) const { return k_.values.at(v); }
  bool is_const(ValueId v) const { return def(v).op == ScalarOp::const_; }
  /// The value of a constant as a double (integers converted).
  double const_value(ValueId v) const;

  // Values.
  ValueId constant(DType t, double v);
  ValueId iconst(int64_t v, DType t = DType::i64);
  ValueId index(int32_t loop);
  ValueId load(int32_t buffer, ValueId idx);
  ValueId load_table(int32_t table, ValueId idx);
  ValueId acc_value(int32_t acc);
  ValueId cast(ValueId x, DType to);
  ValueId unary(ScalarOp op, ValueId x);
  /// pow with a constant exponent of 0..4 (and -1, -2 for floats) becomes
  /// multiplications (and a division); pow on bool becomes a || !b.
  ValueId binary(ScalarOp op, ValueId a, ValueId b);
  /// select of two loads of one buffer becomes one load at a selected index, and
  /// a select of two index sums adds their shared terms after the choice (so a
  /// chosen read stays contiguous in the loop variable).
  ValueId select(ValueId c, ValueId a, ValueId b);
  /// A Philox draw of type t (f32, f64 or i64) from an i64 key and counter.
  ValueId philox(ValueId key, ValueId counter, DType t);
  /// A Philox draw in [0, bound) from an i64 key and counter (bound: i64, read as
  /// unsigned, at least 1).
  ValueId philox_below(ValueId key, ValueId counter, ValueId bound);

  // Statements, appended to the innermost open block.
  void store(int32_t buffer, ValueId idx, ValueId value);
  /// Opens `for i in [0, extent)`; returns the loop variable.
  int32_t begin_loop(int64_t extent);
  void end_loop();
  void begin_if(ValueId cond);
  void end_if();
  void acc_init(int32_t acc);
  void acc_update(int32_t acc, ValueId value, ValueId position = kNoValue);

  /// Per-block memo for callers (lowering caches "value of node at coordinates"):
  /// entries made in a block are forgotten when it closes.
  ValueId memo_find(const std::string& key) const;
  void memo_put(const std::string& key, ValueId v);

  /// Declares 0 <= v < upper for an i64 index value (loop variables get their
  /// extent automatically). Bounds let idiv/imod of `x*k + y` with y < k by a
  /// multiple c of k fold (to x / (c/k) and (x % (c/k))*k + y), and by a divisor c
  /// of k (to x*(k/c) + y/c and y % c), so linearising and de-linearising
  /// coordinates cancel out.
  void set_upper_bound(ValueId v, int64_t upper);
  /// The exclusive upper bound of a non-negative index value, or -1 if unknown.
  int64_t upper_bound(ValueId v) const;

  /// Inclusive bounds of an i64 value.
  struct Range {
    int64_t lo = 0, hi = 0;
  };
  /// What the builder can prove about an i64 value's range: constants, values
  /// with a declared upper bound (loop variables), and sums, differences,
  /// products, min/max, selects, quotients and remainders of those. Comparisons
  /// of i64 values fold when the ranges decide them (a pad's guard inside a
  /// loop over its interior: codegen/lower_map.cpp). Empty when unknown.
  std::optional<Range> range(ValueId v) const;

  /// The terms of an i64 sum (nested adds), its constants added into `constant`.
  void add_terms(ValueId v, std::vector<ValueId>& terms, int64_t& constant, int depth = 0) const;

 private:
  ValueId add_value(const ValueDef& d);
  ValueId fold_binary(ScalarOp op, ValueId a, ValueId b);
  ValueId fold_index(ScalarOp op, ValueId a, ValueId b);
  ValueId fold_pow(ValueId a, ValueId b);
  // A comparison or min/max of i64 values that their ranges decide.
  ValueId fold_by_range(ScalarOp op, ValueId a, ValueId b);
  ValueId factor_select(ValueId c, ValueId a, ValueId b);
  ValueId fold_masked_loads(ValueId c, ValueId a, ValueId b);
  bool same_const(ValueId a, ValueId b) const;
  bool is_op(ValueId v, ScalarOp op) const { return def(v).op == op; }
  void push_stmt(Stmt s);
  void open_block(Stmt s);
  void close_block(StmtKind kind);

  struct Scope {
    std::unordered_map<std::string, ValueId> cse;
    std::unordered_map<std::string, ValueId> memo;
  };
  Kernel k_;
  std::vector<int64_t> upper_;              // per value: exclusive bound, -1 unknown
  // Per value: range() once computed (a declared bound resets it).
  mutable std::vector<std::optional<Range>> range_;
  mutable std::vector<char> range_done_;
  std::vector<std::vector<Stmt>*> blocks_;  // innermost last
  std::vector<Scope> scopes_;               // parallel to blocks_
};

}  // namespace kiln::kir
