// The forward/backward split of a traced training function, and the removal of
// traced custom-function nodes (see autodiff.h).
#include <algorithm>

#include "passes/autodiff.h"
#include "passes/graph_copy.h"

namespace kiln {

namespace {

bool is_traced_custom(const Node& n) {
  return n.op == OpKind::custom && n.attrs.has(AttrKey::name) && n.attrs.str(AttrKey::name) == "traced";
}

}  // namespace

Graph strip_traced_custom(const Graph& g) {
  bool any = false;
  for (const Node& n : g.nodes()) any = any || is_traced_custom(n);
  if (!any) return g;
  Graph out;
  ValueMap m(g);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    if (is_traced_custom(n)) {
      const size_t n_in = n.operands.size() - n.results.size();
      for (uint32_t i = 0; i < n.results.size(); ++i) m.set(Value(id, i), m(n.operands[n_in + i]));
    } else {
      copy_node(g, id, out, m);
    }
  }
  copy_outputs(g, out, m);
  return out;
}

ForwardBackward split_forward_backward(const Graph& full, size_t forward_size,
                                       std::span<const Value> outs, std::span<const NodeId> seeds,
                                       std::span<const Value> grads, int64_t n_args,
                                       std::span<const int64_t> written_args) {
  auto is_seed = [&](NodeId id) { return std::find(seeds.begin(), seeds.end(), id) != seeds.end(); };
  // A parameter or argument the forward updates in place no longer holds, when
  // the backward runs, the value the forward read: the backward gets that value saved.
  auto updated = [&](const Node& n) {
    if (n.op == OpKind::arg)
      return std::find(written_args.begin(), written_args.end(), n.attrs.i(AttrKey::index)) !=
             written_args.end();
    if (n.op != OpKind::param) return false;
    for (const ParamUpdate& u : full.updates)
      if (u.param == n.attrs.i(AttrKey::index)) return true;
    return false;
  };
  std::vector<Value> saved;
  auto save_if_forward = [&](Value o) {
    if (o.node >= forward_size) return;
    const OpCategory c = op_info(full[o.node].op).category;
    if ((c == OpCategory::Input && !updated(full[o.node])) || c == OpCategory::Creation) return;
    if (std::find(saved.begin(), saved.end(), o) == saved.end()) saved.push_back(o);
  };
  for (NodeId id = static_cast<NodeId>(forward_size); id < full.size(); ++id) {
    if (is_seed(id)) continue;
    for (Value o : full[id].operands) save_if_forward(o);
  }
  // A gradient may be a forward value itself: the builder reuses an equal node,
  // and a gradient made of zeros (floor, sign) can equal one that a backward()
  // inside the traced function computed.
  for (Value g : grads) save_if_forward(g);
  ForwardBackward r;
  ValueMap fm(full);
  for (NodeId id = 0; id < forward_size; ++id) copy_node(full, id, r.forward, fm);
  for (Value v : outs) r.forward.outputs.push_back(fm(v));
  for (Value v : saved) r.forward.outputs.push_back(fm(v));
  for (const ParamUpdate& u : full.updates) r.forward.updates.push_back({u.param, fm(u.value)});

  ValueMap bm(full);
  Builder bb(r.backward);
  for (NodeId id = 0; id < forward_size; ++id) {
    const Node& n = full[id];
    // Every parameter keeps its slot; uses of an updated one read the saved value.
    if (n.op == OpKind::arg || n.op == OpKind::param || op_info(n.op).category == OpCategory::Creation)
      copy_node(full, id, r.backward, bm);
  }
  for (size_t k = 0; k < saved.size(); ++k) {
    bb.loc = full[saved[k].node].loc;
    bm.set(saved[k], bb.arg(n_args + static_cast<int64_t>(k), full.type(saved[k])));
  }
  for (size_t i = 0; i < seeds.size(); ++i)
    bm.set(Value(seeds[i]),
           bb.arg(n_args + static_cast<int64_t>(saved.size() + i), full[seeds[i]].type()));
  for (NodeId id = static_cast<NodeId>(forward_size); id < full.size(); ++id)
    if (!is_seed(id)) copy_node(full, id, r.backward, bm);
  for (Value g : grads) r.backward.outputs.push_back(bm(g));
  r.saved = saved.size();
  return r;
}

}  // namespace kiln
