// Dead code elimination: the live nodes (graph_copy.h's live_nodes: what the
// outputs and updates read) are copied densely in their original order.
#include "passes/dce.h"

#include "passes/graph_copy.h"

namespace kiln {

Graph dce(const Graph& g) {
  const std::vector<bool> live = live_nodes(g);

  Graph out;
  ValueMap map(g);
  for (NodeId id = 0; id < g.size(); ++id)
    if (live[id]) copy_node(g, id, out, map);
  copy_outputs(g, out, map);
  return out;
}

}  // namespace kiln
