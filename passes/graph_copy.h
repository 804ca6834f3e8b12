// Copying nodes from one graph into another with remapped operands: the
// skeleton the graph-to-graph passes (dce, cse, fold_constants, simplify) share.
#pragma once

#include <vector>

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

}  // namespace kiln
