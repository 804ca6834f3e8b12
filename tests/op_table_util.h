// What the op tests of every backend ask of the op table (ir/ops.def), so no
// test keeps a list of ops by hand.
#pragma once

#include <cmath>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "runtime/reference.h"
#include "runtime/storage.h"

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

/// Whether float elementwise op k (unary, or binary with either operand swept
/// and the other at 0.7) is continuous over [-3, 3] by its reference kernel: no
/// jump over 0.25 between points 1e-3 apart. Step functions (sign, floor,
/// round, ...) are not: an ulp of difference before one flips a whole step.
inline bool continuous_on_default_range(OpKind k) {
  const int arity = op_info(k).arity;
  std::vector<double> xs;
  for (int i = -3000; i <= 3000; ++i) xs.push_back(i * 1e-3 + 1e-7);
  const Shape s = {int64_t(xs.size())};
  std::vector<double> other(xs.size(), 0.7), out(xs.size());
  for (int swept = 0; swept < arity; ++swept) {
    std::vector<View> in = {dense_view(swept == 0 ? xs.data() : other.data(), DType::f64, s)};
    if (arity == 2) in.push_back(dense_view(swept == 1 ? xs.data() : other.data(), DType::f64, s));
    reference_kernel(k, {}, in, dense_view(out.data(), DType::f64, s));
    for (size_t i = 1; i < out.size(); ++i)
      if (!(std::abs(out[i] - out[i - 1]) <= 0.25)) return false;
  }
  return true;
}

/// The unary (arity 1) or binary (2) ops that random fused graphs draw from
/// (tests/codegen/cpu_fused_test.cpp, tests/cuda/cuda_backend_test.cpp): every
/// math or arith op of the table with that arity whose domain holds [-3, 3] for
/// each operand and that is continuous there (so values stay comparable).
inline std::vector<OpKind> random_graph_ops(int arity) {
  std::vector<OpKind> v;
  for (OpKind k : all_ops()) {
    const OpInfo& info = op_info(k);
    if (info.arity != arity ||
        (info.scalar != ScalarRule::math && info.scalar != ScalarRule::arith))
      continue;
    bool whole_range = true;
    for (size_t i = 0; i < size_t(arity); ++i)
      whole_range = whole_range && info.domain.low(i) <= -3 && info.domain.high(i) >= 3;
    if (whole_range && continuous_on_default_range(k)) v.push_back(k);
  }
  return v;
}

}  // namespace kiln::test
