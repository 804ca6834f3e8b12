// Dead code elimination: keeps only nodes that graph outputs or parameter
// updates depend on, plus every arg and param node (the calling convention).
#pragma once

#include "ir/graph.h"

namespace kiln {

Graph dce(const Graph& g);

}  // namespace kiln
