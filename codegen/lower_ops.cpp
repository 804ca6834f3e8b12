// One scalar expression per elementwise op of the table, with the reference
// kernels' dtype rules: arithmetic converts its operands to the result dtype,
// comparisons compare in the operands' promoted dtype, logical ops and
// where's condition test against zero (ops.def's `scalar` column).
#include "codegen/lower_ops.h"

#include <string>

#include "ir/error.h"

namespace kiln {

namespace {

using kir::KernelBuilder;
using kir::ScalarOp;
using kir::ValueId;

// The rows the table marks `custom`.
ValueId custom(KernelBuilder& kb, const Node& n, std::span<const ValueId> x) {
  const DType out = n.type().dtype;
  switch (n.op) {
    case OpKind::cast:
      return kb.cast(x[0], out);
    case OpKind::where:
      return kb.select(kb.cast(x[0], DType::b8), kb.cast(x[1], out), kb.cast(x[2], out));
    case OpKind::philox: {
      const ValueId key = kb.cast(x[0], DType::i64), counter = kb.cast(x[1], DType::i64);
      if (!n.attrs.has(AttrKey::low)) return kb.philox(key, counter, out);
      // [low, high): an offset in [0, high - low) added with wrap-around, so a range
      // wider than 2^63 lands in place (kernel IR integers wrap).
      const int64_t low = n.attrs.i(AttrKey::low), high = n.attrs.i(AttrKey::high);
      const ValueId bound = kb.iconst(int64_t(uint64_t(high) - uint64_t(low)));
      return kb.binary(ScalarOp::add, kb.philox_below(key, counter, bound), kb.iconst(low));
    }
    default:
      throw Error(std::string("no scalar expression for ") + op_name(n.op));
  }
}

ValueId apply(KernelBuilder& kb, ScalarOp op, std::span<const ValueId> x, DType to) {
  if (x.size() == 1) return kb.unary(op, kb.cast(x[0], to));
  return kb.binary(op, kb.cast(x[0], to), kb.cast(x[1], to));
}

}  // namespace

kir::ValueId lower_elementwise(kir::KernelBuilder& kb, const Node& n,
                               std::span<const kir::ValueId> operands) {
  const OpInfo& info = op_info(n.op);
  const DType out = n.type().dtype;
  KILN_CHECK(info.arity == int(operands.size()), "lowering ", info.name, ": expected ",
             info.arity, " operands, got ", operands.size());
  switch (info.scalar) {
    case ScalarRule::math:
      return apply(kb, kir::scalar_op_of(n.op), operands, out);
    case ScalarRule::arith:
      // Every unary arith op (neg, abs, sign, relu) is the identity on bool.
      if (operands.size() == 1 && out == DType::b8) return kb.cast(operands[0], out);
      return apply(kb, kir::scalar_op_of(n.op), operands, out);
    case ScalarRule::compare: {
      DType common = kb.type(operands[0]);
      for (ValueId v : operands) common = promote_types(common, kb.type(v));
      return apply(kb, kir::scalar_op_of(n.op), operands, common);
    }
    case ScalarRule::logical:
      return apply(kb, kir::scalar_op_of(n.op), operands, DType::b8);
    case ScalarRule::custom:
      return custom(kb, n, operands);
    case ScalarRule::none:
    case ScalarRule::reduce:  // lowered by lower_reduce.cpp
    case ScalarRule::argreduce:
    case ScalarRule::scan:  // lowered by lower_scan.cpp
      break;
  }
  throw Error(std::string(info.name) + " is not an elementwise op");
}

}  // namespace kiln
