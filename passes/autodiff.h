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

/// A traced training function split in two, as JAX splits a VJP: the forward runs
/// now, the backward when backward() is called.
struct ForwardBackward {
  Graph forward;     // returns `outs`, then the `saved` values; applies full's updates
  Graph backward;    // args: the forward's args, then the saved values, then the seeds
  size_t saved = 0;  // how many values the forward saves for the backward
};

/// Splits `full`, a forward (nodes [0, forward_size)) followed by its gradient
/// nodes (build_gradients with `seeds`, giving `grads`), in two. The forward saves
/// every forward value a gradient node reads, except graph inputs and creation
/// ops, which the backward has itself; a parameter the forward updates, or an
/// argument it writes (`written_args`), is saved too, as the backward must see
/// the value the forward read. The backward's args are numbered from `n_args`.
ForwardBackward split_forward_backward(const Graph& full, size_t forward_size,
                                       std::span<const Value> outs, std::span<const NodeId> seeds,
                                       std::span<const Value> grads, int64_t n_args,
                                       std::span<const int64_t> written_args);

/// Replaces each traced custom-function node (attribute name "traced"; its operands
/// are its inputs, then its forward's results) by its forward's results, once
/// autodiff has run the function's own backward.
Graph strip_traced_custom(const Graph& g);

}  // namespace kiln
