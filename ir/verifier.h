// The verifier: checks every node of a graph against the op table (arity,
// operand order, inferred vs recorded types, attributes, devices), and the
// graph's outputs and updates. Runs after every pass in tests and debug builds.
#pragma once

#include "ir/graph.h"

namespace kiln {

/// Throws kiln::Error describing the first problem (node, expected, got, location).
void verify(const Graph& g);

}  // namespace kiln
