// Constant folding: a pure node whose operands are all constants is evaluated
// with the reference kernels and replaced by a `constant` (when all elements
// are equal) or a `literal` (when the result is small, at most
// kMaxFoldElements elements; larger results are left to run at call time).
#pragma once

#include "ir/graph.h"

namespace kiln {

inline constexpr int64_t kMaxFoldElements = 4096;

Graph fold_constants(const Graph& g);

}  // namespace kiln
