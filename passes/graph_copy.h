// Copying nodes from one graph into another with remapped operands: the
// skeleton the graph-to-graph passes (dce, cse, fold_constants, simplify) share.
#pragma once

#include <optional>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"

namespace kiln {

/// Appends a copy of src's node `id` to dst (no checks, no hash-consing) with its
/// operands mapped through `map`, and maps each of its results to the copy's.
inline NodeId copy_node(const Graph& src, NodeId id, Graph& dst, ValueMap& map) {
  Node n = src[id];
  for (Value& v : n.operands) v = map(v);
  uint32_t results = static_cast<uint32_t>(n.results.size());
  NodeId new_id = dst.add(std::move(n));
  for (uint32_t r = 0; r < results; ++r) map.set(Value(id, r), Value(new_id, r));
  return new_id;
}

/// The nodes g's outputs and parameter updates read, and every arg and param
/// (the calling convention). Operands come before their users, so one sweep
/// from the back reaches them all.
inline std::vector<bool> live_nodes(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (Value v : g.outputs) live.at(v.node) = true;
  for (const ParamUpdate& u : g.updates) live.at(u.value.node) = true;
  for (NodeId id = 0; id < g.size(); ++id)
    if (g[id].op == OpKind::arg || g[id].op == OpKind::param) live[id] = true;
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;)
    if (live[id])
      for (Value v : g[id].operands) live.at(v.node) = true;
  return live;
}

/// Sets dst's outputs and parameter updates to src's, mapped through `map`.
inline void copy_outputs(const Graph& src, Graph& dst, const ValueMap& map) {
  dst.outputs.clear();
  for (Value v : src.outputs) dst.outputs.push_back(map(v));
  dst.updates.clear();
  for (const ParamUpdate& u : src.updates) dst.updates.push_back({u.param, map(u.value)});
}

/// A copy of g in which `replace(b, n, x)` may stand for a one-result node n with
/// operand x (g's first operand, mapped into the copy): it builds the
/// replacement with b (whose loc is n's) and returns it, or returns
/// std::nullopt to copy n as it is. The skeleton of the passes that rewrite one
/// kind of node into several (split_scans, split_column_sums).
template <class F>
Graph replace_nodes(const Graph& g, F replace) {
  Graph out;
  Builder b(out);
  ValueMap map(g);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    if (!n.operands.empty() && n.results.size() == 1) {
      b.loc = n.loc;
      if (std::optional<Value> v = replace(b, n, map(n.operands[0]))) {
        map.set(Value(id), *v);
        continue;
      }
    }
    copy_node(g, id, out, map);
  }
  copy_outputs(g, out, map);
  return out;
}

}  // namespace kiln
