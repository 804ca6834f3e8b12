// What the op tests of every backend ask of the op table (ir/ops.def), so no
// test keeps a list of ops by hand.
#pragma once

#include <vector>

#include "ir/error.h"
#include "ir/op.h"

namespace kiln::test {

/// Every reduction of the op table (its Reduce rows).
inline std::vector<OpKind> table_reductions() {
  std::vector<OpKind> v;
  for (OpKind k : all_ops())
    if (op_info(k).category == OpCategory::Reduce) v.push_back(k);
  return v;
}

/// Whether unary op k takes a bool operand (the table's type rules say so).
inline bool takes_bool(OpKind k) {
  try {
    (void)infer_type(k, std::vector<TensorType>{TensorType{DType::b8, {2}, {}}}, {});
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace kiln::test
