// Gradient analyses of a graph, as eager mode's autograd tape sees the same
// ops: which values a gradient reaches, which require grad, which saved
// values a VJP reads, and where a backward would read what an earlier one
// freed. Pure functions of the graph (and of which inputs require grad); the
// tracer (frontend/trace_state.cpp), the forward/backward partition
// (passes/partition.h) and eager autograd ask them.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"

namespace kiln {

/// Per node of g: whether a gradient of `roots` reaches it. A gradient flows
/// only through the ops eager mode records on its tape (differentiable ops with
/// a floating-point result), so a value reached only through a comparison, a
/// cast to an integer type or detach() gets none.
std::vector<char> gradient_reach(const Graph& g, std::span<const Value> roots);

/// Per node of g: whether its value requires grad (eager mode would make it a
/// leaf that requires grad or give it a grad_fn): an arg whose index is marked
/// in `arg_requires`, a param whose index is marked in `param_requires`, or a
/// differentiable op with a floating-point result and an operand that requires
/// grad. An index beyond either list requires no grad.
std::vector<char> requiring_grad(const Graph& g, const std::vector<char>& arg_requires,
                                 const std::vector<char>& param_requires);

/// Whether the VJP of `op` (with these attributes and operand types) reads its
/// operand `which`, or, when `which` is negative, its result: what eager mode
/// saves for the gradient. `needs[i]`: operand i's gradient is wanted. A custom
/// op's backward is user code, assumed to read everything.
bool vjp_reads(OpKind op, const Attrs& attrs, const std::vector<TensorType>& operand_types,
               const std::vector<bool>& needs, int64_t which);
/// The same for node `id` of g.
bool vjp_reads(const Graph& g, NodeId id, const std::vector<bool>& needs, int64_t which);

/// A value recorded node `node` saved for its gradient, as eager mode's tape
/// saves it: its operand `which`, or its result -1 - which (vjp_reads'
/// numbering); `needs`: which of the node's operands need a gradient.
struct SavedValue {
  NodeId node = kNoNode;
  int64_t which = 0;
  std::vector<bool> needs;
};

/// Of `saved`, the indices (in order) of the values a backward from `roots`
/// reads: those of nodes a gradient of the roots reaches whose VJP reads them.
std::vector<size_t> saved_values_read(const Graph& g, std::span<const Value> roots,
                                      std::span<const SavedValue> saved);

/// The first node (in id order) a backward from `roots` goes through whose VJP
/// reads a value its op saved, given which nodes require grad (requiring_grad),
/// or kNoNode. With `freed`, only nodes marked there count (those an earlier
/// backward without retain_graph freed: eager mode's "backward through the
/// graph a second time"); without, every node does (what a backward would read
/// once the graph is freed).
NodeId freed_read(const Graph& g, std::span<const Value> roots,
                       const std::vector<char>& requires_grad,
                       const std::vector<char>* freed = nullptr);

}  // namespace kiln
