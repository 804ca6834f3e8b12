// The sort library step (ir/ops.def's argsort): for each line of a dense
// buffer along one dim, the positions of its first `count` elements in sorted
// order. One order everywhere (PyTorch's): ascending or descending, ties by
// position (stable), NaN the largest value (last ascending, first descending),
// -0.0 equal to 0.0. The reference kernel (runtime/reference_sort.cpp) is a
// plain comparison sort, the oracle of this one.
#pragma once

#include <cstdint>

#include "ir/attrs.h"
#include "ir/op.h"

namespace kiln {

/// A dense [outer, n, inner] buffer of `dtype`, sorted along its middle dim.
struct SortLines {
  DType dtype = DType::f32;
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count = 0;  // positions wanted per line, <= n
  bool descending = false;
};

/// The lines of an argsort node (ir/ops.def) on a dense operand of type `in`.
SortLines sort_lines_for(const TensorType& in, const Attrs& attrs);

/// Writes the first `count` positions of each line's order into `out` (a dense
/// int64 [outer, count, inner] buffer). Lines run in parallel; each line is
/// radix sorted on order-preserving integer keys (O(n)), sorted by comparison
/// when short, or, for a few positions of a long line, selected in one pass.
void sort_lines(const SortLines& s, const void* in, int64_t* out);

}  // namespace kiln
