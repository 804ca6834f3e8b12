// Reverse-mode autodiff, graph to graph, from the VJP rules in the op table
// (ir/vjp.h). There is one autodiff: eager backward() turns the tape into a
// graph and calls this; traced backward() calls it on the graph being traced;
// and because the rules emit ordinary ops, it applies to its own output
// (second derivatives).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"

namespace kiln {

/// The gradients of a `custom` node's operands, from user code: given every result
/// of node n and its gradient (zeros for results no output depends on), the
/// gradient of each operand (invalid: none). The frontend's autograd::Function
/// supplies it.
using CustomVjp = std::function<std::vector<Value>(Builder& b, const Node& n,
                                                   const std::vector<Value>& outs,
                                                   const std::vector<Value>& grads)>;

/// Appends to b's graph the gradients of `outputs` with respect to `wrt`, where
/// seeds[i] is the incoming gradient of outputs[i] (same type). Gradients
/// reaching a value along several paths are summed; broadcasting is undone with
/// sum_to. Returns one value per `wrt` entry; a value with no path from any
/// output gets a zeros constant of its type. Each gradient node carries the
/// source location of the forward node it differentiates. `custom`
/// differentiates custom nodes; a custom node met without it is an error.
std::vector<Value> build_gradients(Builder& b, std::span<const Value> outputs,
                                   std::span<const Value> seeds, std::span<const Value> wrt,
                                   const CustomVjp& custom = {});

/// Graph form (for graphs without custom nodes, or with `custom`). Returns a copy of g (same node ids, unchanged) followed by the
/// gradient nodes. For each output i of g a new `arg` node is added as its seed
/// (index = 1 + the largest arg index in g, + i). The result's outputs are g's
/// outputs followed by one gradient per `wrt` value.
Graph autodiff(const Graph& g, std::span<const Value> wrt, const CustomVjp& custom = {});

}  // namespace kiln
