// Common subexpression elimination: rebuilds the graph through a Builder, whose
// hash-consing merges structurally identical pure nodes.
#pragma once

#include "ir/graph.h"

namespace kiln {

Graph cse(const Graph& g);

}  // namespace kiln
