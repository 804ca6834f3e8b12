// The SSA graph and ValueMap.
#include "ir/graph.h"

#include <algorithm>
#include <ostream>

#include "ir/printer.h"

namespace kiln {

NodeId Graph::add(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

namespace {
std::vector<NodeId> inputs_of(const std::vector<Node>& nodes, OpKind k) {
  std::vector<std::pair<int64_t, NodeId>> found;
  for (NodeId i = 0; i < nodes.size(); ++i)
    if (nodes[i].op == k) found.push_back({nodes[i].attrs.i(AttrKey::index, -1), i});
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<NodeId> out;
  for (const auto& f : found) out.push_back(f.second);
  return out;
}
}  // namespace

std::vector<NodeId> Graph::args() const {
  return inputs_of(nodes_, OpKind::arg);
}
std::vector<NodeId> Graph::params() const {
  return inputs_of(nodes_, OpKind::param);
}
Value Graph::param_value(int64_t index) const {
  for (NodeId id = 0; id < nodes_.size(); ++id)
    if (nodes_[id].op == OpKind::param && nodes_[id].attrs.i(AttrKey::index, -1) == index)
      return Value(id);
  return Value();
}

bool Graph::is_zero_constant(Value v) const {
  const Node* n = &nodes_.at(v.node);
  while (n->op == OpKind::expand || n->op == OpKind::reshape) n = &nodes_.at(n->operands[0].node);
  return n->op == OpKind::constant && n->attrs.f(AttrKey::value) == 0.0;
}

std::vector<uint32_t> Graph::use_counts() const {
  std::vector<uint32_t> uses(nodes_.size(), 0);
  auto use = [&](Value v) {
    if (v.node < uses.size()) ++uses[v.node];
  };
  for (const Node& n : nodes_)
    for (Value v : n.operands) use(v);
  for (Value v : outputs) use(v);
  for (const ParamUpdate& u : updates) use(u.value);
  return uses;
}

std::string Graph::str(bool with_locations) const {
  PrintOptions opts;
  opts.locations = with_locations;
  return print_graph(*this, opts);
}

std::ostream& operator<<(std::ostream& os, const Graph& g) {
  return os << print_graph(g);
}

void ValueMap::set(Value old_v, Value new_v) {
  std::vector<Value>& slots = map_.at(old_v.node);
  if (slots.size() <= old_v.index) slots.resize(old_v.index + 1);
  slots[old_v.index] = new_v;
}

bool ValueMap::has(Value old_v) const {
  return old_v.node < map_.size() && old_v.index < map_[old_v.node].size() &&
         map_[old_v.node][old_v.index].valid();
}

Value ValueMap::operator()(Value old_v) const {
  KILN_CHECK(has(old_v), "internal error: ValueMap has no value for node ", old_v.node, " result ",
             old_v.index);
  return map_[old_v.node][old_v.index];
}

}  // namespace kiln
