// Gradient analyses (see grad_analysis.h).
#include "passes/grad_analysis.h"

#include <algorithm>

#include "ir/builder.h"
#include "ir/vjp.h"

namespace kiln {

namespace {

// A node eager mode would record on its tape: differentiable, with a floating-point result.
bool on_tape(const Node& n) {
  return op_info(n.op).differentiable &&
         std::any_of(n.results.begin(), n.results.end(),
                     [](const TensorType& t) { return is_floating(t.dtype); });
}

}  // namespace

std::vector<char> gradient_reach(const Graph& g, std::span<const Value> roots) {
  std::vector<char> mark(g.size(), 0);
  std::vector<NodeId> stack;
  for (Value v : roots)
    if (!mark[v.node]) mark[v.node] = 1, stack.push_back(v.node);
  while (!stack.empty()) {
    const Node& node = g[stack.back()];
    stack.pop_back();
    if (!on_tape(node)) continue;
    for (Value o : node.operands)
      if (!mark[o.node]) mark[o.node] = 1, stack.push_back(o.node);
  }
  return mark;
}

std::vector<char> requiring_grad(const Graph& g, const std::vector<char>& arg_requires,
                                 const std::vector<char>& param_requires) {
  auto marked = [](const std::vector<char>& flags, int64_t i) {
    return i >= 0 && i < static_cast<int64_t>(flags.size()) && flags[static_cast<size_t>(i)];
  };
  std::vector<char> rg(g.size(), 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    if (n.op == OpKind::arg) {
      rg[id] = marked(arg_requires, n.attrs.i(AttrKey::index));
    } else if (n.op == OpKind::param) {
      rg[id] = marked(param_requires, n.attrs.i(AttrKey::index));
    } else if (on_tape(n)) {
      for (Value o : n.operands) rg[id] = rg[id] || rg[o.node];
    }
  }
  return rg;
}

bool vjp_reads(OpKind op, const Attrs& attrs, const std::vector<TensorType>& operand_types,
               const std::vector<bool>& needs, int64_t which) {
  if (op == OpKind::custom) return true;  // user code: assume it does
  const VjpRule rule = vjp_rule(op);
  if (!rule) return false;
  // Builds the rule on a graph of this one op and looks for readers of the target.
  Graph g;
  Builder b(g);
  std::vector<Value> operands;
  for (size_t i = 0; i < operand_types.size(); ++i)
    operands.push_back(b.arg(static_cast<int64_t>(i), operand_types[i]));
  const Value out = b.op(op, operands, attrs);
  const Value seed = b.arg(static_cast<int64_t>(operands.size()), g.type(out));
  const NodeId first = static_cast<NodeId>(g.size());
  const Node copy = g[out.node];
  const std::vector<Value> grads = rule(b, copy, out, seed, needs);
  const Value target = which >= 0 ? operands[static_cast<size_t>(which)] : out;
  for (NodeId id = first; id < g.size(); ++id)
    for (Value v : g[id].operands)
      if (v == target) return true;
  return std::find(grads.begin(), grads.end(), target) != grads.end();
}

bool vjp_reads(const Graph& g, NodeId id, const std::vector<bool>& needs, int64_t which) {
  const Node& n = g[id];
  std::vector<TensorType> types;
  for (Value o : n.operands) types.push_back(g.type(o));
  return vjp_reads(n.op, n.attrs, types, needs, which);
}

std::vector<size_t> saved_values_read(const Graph& g, std::span<const Value> roots,
                                      std::span<const SavedValue> saved) {
  std::vector<size_t> read;
  if (saved.empty()) return read;
  const std::vector<char> reach = gradient_reach(g, roots);
  for (size_t k = 0; k < saved.size(); ++k)
    if (reach[saved[k].node] && vjp_reads(g, saved[k].node, saved[k].needs, saved[k].which))
      read.push_back(k);
  return read;
}

NodeId freed_read(const Graph& g, std::span<const Value> roots,
                  const std::vector<char>& requires_grad, const std::vector<char>* freed) {
  if (freed && freed->empty()) return kNoNode;
  const std::vector<char> reach = gradient_reach(g, roots);
  for (NodeId id = 0; id < g.size(); ++id) {
    const bool was_freed = !freed || (id < freed->size() && (*freed)[id]);
    if (!was_freed || !reach[id] || !requires_grad[id]) continue;
    const Node& n = g[id];
    std::vector<bool> needs;
    for (Value o : n.operands) needs.push_back(requires_grad[o.node]);
    for (int64_t w = -1; w < static_cast<int64_t>(n.operands.size()); ++w)
      if (vjp_reads(g, id, needs, w)) return id;
  }
  return kNoNode;
}

}  // namespace kiln
