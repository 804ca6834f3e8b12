// Dead code elimination: a backward sweep marks what the outputs and updates
// read, then the live nodes are copied densely in their original order.
#include "passes/dce.h"

#include "passes/graph_copy.h"

namespace kiln {

Graph dce(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (Value v : g.outputs) live.at(v.node) = true;
  for (const ParamUpdate& u : g.updates) live.at(u.value.node) = true;
  for (NodeId id = 0; id < g.size(); ++id)
    if (g[id].op == OpKind::arg || g[id].op == OpKind::param) live[id] = true;
  // Operands are defined earlier, so one sweep from the back reaches everything.
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;)
    if (live[id])
      for (Value v : g[id].operands) live.at(v.node) = true;

  Graph out;
  ValueMap map(g);
  for (NodeId id = 0; id < g.size(); ++id)
    if (live[id]) copy_node(g, id, out, map);
  copy_outputs(g, out, map);
  return out;
}

}  // namespace kiln
