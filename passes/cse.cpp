// Common subexpression elimination: every node is rebuilt through a Builder,
// whose hash-consing returns the existing node for a structurally identical
// pure one (same op, remapped operands, attributes and result types). Nodes
// with identity (arg, param, custom) are always kept apart.
#include "passes/cse.h"

#include "ir/builder.h"
#include "passes/graph_copy.h"

namespace kiln {

Graph cse(const Graph& g) {
  Graph out;
  Builder b(out);
  ValueMap map(g);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    std::vector<Value> operands;
    operands.reserve(n.operands.size());
    for (Value v : n.operands) operands.push_back(map(v));
    b.loc = n.loc;
    NodeId new_id = b.op_multi(n.op, std::move(operands), n.attrs, n.results);
    for (uint32_t r = 0; r < n.results.size(); ++r) map.set(Value(id, r), Value(new_id, r));
  }
  copy_outputs(g, out, map);
  return out;
}

}  // namespace kiln
