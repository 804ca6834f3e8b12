// The last step of an eager backward(): adding the gradients into the leaves'
// .grad (frontend/autograd.cpp's run_backward). A leaf whose gradient is
// scatter_add(0, index, src) (a gather's, an index_select's, an embedding's) has
// it scattered into its .grad in place (zeros first when it has none): no
// full-size temporary, sum or copy, and the same fold order per element as
// the traced step (passes/simplify.cpp's add_scatter rule).
#pragma once

#include <memory>
#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"

namespace kiln {

struct TensorImpl;

namespace detail {

/// A leaf (an index into the backward's leaves) whose gradient, graph node
/// `node` (a scatter_add), is scattered into its .grad instead of evaluated.
struct ScatterInto {
  size_t leaf;
  NodeId node;
};

/// The CPU leaves (with no .grad yet, or one of the gradient's type) whose
/// gradient grads[i] is a scatter_add onto a zero constant that nothing else
/// reads. Their scatter_add (and its zero base, when only it reads that) are
/// marked evaluated with nothing in `values`, so the gradient graph's
/// evaluation skips them; their index and source are still evaluated.
std::vector<ScatterInto> scatters_into_grads(const Graph& g, size_t first,
                                             const std::vector<std::shared_ptr<TensorImpl>>& leaves,
                                             const std::vector<Value>& grads,
                                             std::vector<std::vector<Tensor>>& values);

/// Adds each leaf's gradient into its .grad: the scatters of `into` in place,
/// the others (per_wrt[i], undefined when none came) by a copy for a fresh
/// .grad or an in-place add (recorded with create_graph). Leaves written go to
/// `accumulated` when given.
void accumulate_grads(const Graph& g, const std::vector<std::vector<Tensor>>& values,
                      const std::vector<ScatterInto>& into,
                      const std::vector<std::shared_ptr<TensorImpl>>& leaves,
                      const std::vector<Tensor>& per_wrt, bool create_graph,
                      std::vector<Tensor>* accumulated);

}  // namespace detail
}  // namespace kiln
