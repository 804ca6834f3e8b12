// Local algebraic rewrites, as a pattern table run to a fixed point by one
// driver: x*1, 1*x, x+0, 0+x, x-0, x/1 -> x (only where the result keeps x's
// type: no broadcast, no promotion); x*0 and x-x -> 0 for integral x only (not
// for floats: inf*0 and nan*0 are nan); neg(neg x) -> x; reshape(reshape x),
// permute(permute x) composed; pow(x, 2) -> x*x, pow(x, 1) -> x;
// where(c, x, x) -> x; a reshape/expand/permute/slice of a `constant` -> a
// constant; cast to the same dtype and identity reshapes, expands, permutes,
// slices and pads -> the operand; (a @ b)^T -> b^T @ a^T when the product has
// no other use (so the transposes fold into BLAS). Nodes a rewrite leaves
// unused stay for dce.
#pragma once

#include "ir/graph.h"

namespace kiln {

/// Returns the graph with every pattern in the table applied until none matches.
Graph simplify(const Graph& g);

}  // namespace kiln
