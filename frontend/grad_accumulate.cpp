// Adding an eager backward's gradients into the leaves' .grad (grad_accumulate.h).
#include "frontend/grad_accumulate.h"

#include <unordered_map>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"

namespace kiln::detail {

std::vector<ScatterInto> scatters_into_grads(const Graph& g, size_t first,
                                             const std::vector<std::shared_ptr<TensorImpl>>& leaves,
                                             const std::vector<Value>& grads,
                                             std::vector<std::vector<Tensor>>& values) {
  std::unordered_map<NodeId, int> uses;
  for (NodeId id = static_cast<NodeId>(first); id < g.size(); ++id)
    for (Value v : g[id].operands) uses[v.node]++;
  for (Value v : grads) uses[v.node]++;
  std::vector<ScatterInto> out;
  for (size_t i = 0; i < leaves.size() && i < grads.size(); ++i) {
    const Value v = grads[i];
    if (!v.valid() || v.node < first) continue;
    const Node& n = g[v.node];
    if (n.op != OpKind::scatter_add || uses[v.node] != 1) continue;
    const Node& base = g[n.operands[0].node];
    if (base.op != OpKind::constant || base.attrs.f(AttrKey::value) != 0.0) continue;
    if ((leaves[i]->grad && leaves[i]->grad->type != n.type()) || n.type().device.is_cuda())
      continue;
    values[v.node] = {Tensor()};
    if (uses[n.operands[0].node] == 1 && n.operands[0].node >= first)
      values[n.operands[0].node] = {Tensor()};
    out.push_back({i, v.node});
  }
  return out;
}

void accumulate_grads(const Graph& g, const std::vector<std::vector<Tensor>>& values,
                      const std::vector<ScatterInto>& into,
                      const std::vector<std::shared_ptr<TensorImpl>>& leaves,
                      const std::vector<Tensor>& per_wrt, bool create_graph,
                      std::vector<Tensor>* accumulated) {
  NoGradGuard no_grad;
  for (const ScatterInto& s : into) {
    const Node& n = g[s.node];
    std::shared_ptr<TensorImpl>& grad = leaves[s.leaf]->grad;
    if (!grad) grad = zeros(n.type().shape, TensorOptions(n.type().dtype)).impl_ptr();
    scatter_add_into(grad, n.attrs, values[n.operands[1].node].at(n.operands[1].index),
                     values[n.operands[2].node].at(n.operands[2].index), n.loc);
    if (accumulated) accumulated->emplace_back(leaves[s.leaf]);
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    TensorImpl& leaf = *leaves[i];
    Tensor g_new = per_wrt[i];
    if (!g_new.defined()) continue;  // reached only through outputs no gradient came to
    if (!create_graph) g_new = g_new.detach();
    if (!leaf.grad) {
      // A fresh buffer: the gradient may alias a seed or a forward value.
      leaf.grad = create_graph ? g_new.impl_ptr() : g_new.clone().impl_ptr();
    } else if (create_graph) {
      EnableGradGuard grad_on;
      leaf.grad = (Tensor(leaf.grad) + g_new).impl_ptr();
    } else {
      Tensor(leaf.grad).add_(g_new);
    }
    if (accumulated) accumulated->emplace_back(leaves[i]);
  }
}

}  // namespace kiln::detail
