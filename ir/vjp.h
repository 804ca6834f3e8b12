// Vector-Jacobian products, one rule per differentiable op (named in ops.def's
// vjp column). A rule emits ordinary forward ops through the Builder, so the
// gradient graph is optimised, fused and differentiated again like any other.
#pragma once

#include <vector>

#include "ir/builder.h"

namespace kiln {

/// Gradients of node `n`'s operands given the gradient `grad` of its result `out`.
/// Returns one Value per operand; an invalid Value means "no gradient".
/// `out` is the node's result in the graph being built (the VJP may reuse it,
/// e.g. exp's gradient is grad * out). `n` is a copy owned by the caller: building
/// nodes appends to the graph, which would invalidate a reference into it.
/// `needs[i]` says whether operand i's gradient is wanted; a rule builds nothing
/// for the others (as PyTorch's grad_input_mask), so no dead nodes are left.
using VjpRule = std::vector<Value> (*)(Builder& b, const Node& n, Value out, Value grad,
                                       const std::vector<bool>& needs);

/// The rule for an op, or nullptr when it has none.
VjpRule vjp_rule(OpKind k);

}  // namespace kiln
