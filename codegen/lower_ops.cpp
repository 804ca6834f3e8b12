// One scalar expression per elementwise op of the table, with the reference
// kernels' dtype rules: arithmetic converts its operands to the result dtype,
// comparisons compare in the operands' promoted dtype, logical ops and
// where's condition test against zero.
#include "codegen/lower_ops.h"

#include <string>

#include "ir/error.h"

namespace kiln {

namespace {

using kir::KernelBuilder;
using kir::ScalarOp;
using kir::ValueId;

ValueId unary(KernelBuilder& kb, const Node& n, ValueId x) {
  const DType out = n.type().dtype;
  switch (n.op) {
    case OpKind::logical_not:
      return kb.unary(ScalarOp::not_, kb.cast(x, DType::b8));
    case OpKind::cast:
      return kb.cast(x, out);
    default:
      break;
  }
  x = kb.cast(x, out);
  switch (n.op) {
    case OpKind::neg:
    case OpKind::abs:
    case OpKind::sign:
    case OpKind::relu:
      // On bool each of these is the identity.
      if (out == DType::b8) return x;
      return kb.unary(n.op == OpKind::neg    ? ScalarOp::neg
                      : n.op == OpKind::abs  ? ScalarOp::abs
                      : n.op == OpKind::sign ? ScalarOp::sign
                                             : ScalarOp::relu,
                      x);
    case OpKind::exp:
      return kb.unary(ScalarOp::exp, x);
    case OpKind::log:
      return kb.unary(ScalarOp::log, x);
    case OpKind::sqrt:
      return kb.unary(ScalarOp::sqrt, x);
    case OpKind::rsqrt:
      return kb.unary(ScalarOp::rsqrt, x);
    case OpKind::sin:
      return kb.unary(ScalarOp::sin, x);
    case OpKind::cos:
      return kb.unary(ScalarOp::cos, x);
    case OpKind::tanh:
      return kb.unary(ScalarOp::tanh, x);
    case OpKind::sigmoid:
      return kb.unary(ScalarOp::sigmoid, x);
    case OpKind::gelu:
      return kb.unary(ScalarOp::gelu, x);
    default:
      throw Error(std::string("no scalar op for ") + op_name(n.op));
  }
}

// pow with a constant exponent that multiplication computes exactly enough.
ValueId pow(KernelBuilder& kb, ValueId a, ValueId b) {
  const DType t = kb.type(a);
  if (t == DType::b8) {
    if (kb.is_const(b)) return kb.const_value(b) != 0 ? a : kb.iconst(1, DType::b8);
    return kb.binary(ScalarOp::or_, a, kb.unary(ScalarOp::not_, b));
  }
  if (kb.is_const(b)) {
    const double e = kb.const_value(b);
    auto mul = [&](ValueId x, ValueId y) { return kb.binary(ScalarOp::mul, x, y); };
    if (e == 0) return kb.constant(t, 1);
    if (e == 1) return a;
    if (e == 2) return mul(a, a);
    if (e == 3) return mul(mul(a, a), a);
    if (e == 4) return mul(mul(a, a), mul(a, a));
    if (is_floating(t) && e == -1) return kb.binary(ScalarOp::div, kb.constant(t, 1), a);
    if (is_floating(t) && e == -2) return kb.binary(ScalarOp::div, kb.constant(t, 1), mul(a, a));
  }
  return kb.binary(ScalarOp::pow, a, b);
}

ValueId binary(KernelBuilder& kb, const Node& n, ValueId a, ValueId b) {
  const DType out = n.type().dtype;
  auto arith = [&](ScalarOp op) { return kb.binary(op, kb.cast(a, out), kb.cast(b, out)); };
  auto compare = [&](ScalarOp op) {
    const DType common = promote_types(kb.type(a), kb.type(b));
    return kb.binary(op, kb.cast(a, common), kb.cast(b, common));
  };
  switch (n.op) {
    case OpKind::add:
      return arith(ScalarOp::add);
    case OpKind::sub:
      return arith(ScalarOp::sub);
    case OpKind::mul:
      return arith(ScalarOp::mul);
    case OpKind::div:
      return arith(ScalarOp::div);
    case OpKind::pow:
      return pow(kb, kb.cast(a, out), kb.cast(b, out));
    case OpKind::maximum:
      return arith(ScalarOp::max);
    case OpKind::minimum:
      return arith(ScalarOp::min);
    case OpKind::eq:
      return compare(ScalarOp::eq);
    case OpKind::ne:
      return compare(ScalarOp::ne);
    case OpKind::lt:
      return compare(ScalarOp::lt);
    case OpKind::le:
      return compare(ScalarOp::le);
    case OpKind::gt:
      return compare(ScalarOp::gt);
    case OpKind::ge:
      return compare(ScalarOp::ge);
    case OpKind::logical_and:
      return kb.binary(ScalarOp::and_, kb.cast(a, DType::b8), kb.cast(b, DType::b8));
    case OpKind::logical_or:
      return kb.binary(ScalarOp::or_, kb.cast(a, DType::b8), kb.cast(b, DType::b8));
    default:
      throw Error(std::string("no scalar op for ") + op_name(n.op));
  }
}

}  // namespace

kir::ValueId lower_elementwise(kir::KernelBuilder& kb, const Node& n,
                               std::span<const kir::ValueId> operands) {
  switch (op_info(n.op).category) {
    case OpCategory::Unary:
      return unary(kb, n, operands[0]);
    case OpCategory::Binary:
      return binary(kb, n, operands[0], operands[1]);
    case OpCategory::Ternary: {
      const DType out = n.type().dtype;
      return kb.select(kb.cast(operands[0], DType::b8), kb.cast(operands[1], out),
                       kb.cast(operands[2], out));
    }
    default:
      throw Error(std::string(op_name(n.op)) + " is not an elementwise op");
  }
}

}  // namespace kiln
