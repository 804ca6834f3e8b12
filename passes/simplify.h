// Local algebraic rewrites, as a pattern table run to a fixed point by one
// driver: x*1, x+0, x-0, x/1, x*0 (only where x is known finite), neg(neg x),
// reshape(reshape x), permute(permute x), expand of a scalar constant,
// cast to the same type, identity reshapes/permutes/slices.
#pragma once

#include "ir/graph.h"

namespace kiln {

/// Returns the graph with every pattern in the table applied until none matches.
Graph simplify(const Graph& g);

}  // namespace kiln
