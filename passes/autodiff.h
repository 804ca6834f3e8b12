// Reverse-mode autodiff, graph to graph, from the VJP rules in the op table
// (ir/vjp.h). There is one autodiff: eager backward() turns the tape into a
// graph and calls this; traced backward() calls it on the graph being traced;
// and because the rules emit ordinary ops, it applies to its own output
// (second derivatives).
#pragma once

#include <span>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"

namespace kiln {

/// Appends to b's graph the gradients of `outputs` with respect to `wrt`, where
/// seeds[i] is the incoming gradient of outputs[i] (same type). Gradients
/// reaching a value along several paths are summed; broadcasting is undone with
/// sum_to. Returns one value per `wrt` entry; a value with no path from any
/// output gets a zeros constant of its type. Each gradient node carries the
/// source location of the forward node it differentiates.
std::vector<Value> build_gradients(Builder& b, std::span<const Value> outputs,
                                   std::span<const Value> seeds, std::span<const Value> wrt);

/// Graph form. Returns a copy of g (same node ids, unchanged) followed by the
/// gradient nodes. For each output i of g a new `arg` node is added as its seed
/// (index = 1 + the largest arg index in g, + i). The result's outputs are g's
/// outputs followed by one gradient per `wrt` value.
Graph autodiff(const Graph& g, std::span<const Value> wrt);

}  // namespace kiln
