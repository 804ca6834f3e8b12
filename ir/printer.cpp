// The canonical IR text. Values are named %0, %1, ... by a running value number
// (a node with two results defines two consecutive names), so the text is dense
// whatever the node ids; the parser renumbers.
#include "ir/printer.h"

namespace kiln {

namespace {

class Namer {
 public:
  explicit Namer(const Graph& g) : g_(g), first_(value_numbers(g)) {}

  // A reference that points at no value prints as "%?node.index", which the
  // parser rejects (the verifier names such nodes in its messages).
  std::string name(Value v) const {
    // Appended, not "%" + ...: GCC 12 warns falsely (-Wrestrict) on the latter.
    std::string s = "%";
    if (v.node >= g_.size() || v.index >= g_[v.node].results.size()) {
      s += "?";
      s += v.node == kNoNode ? std::string("none") : std::to_string(v.node);
      s += ".";
      s += std::to_string(v.index);
      return s;
    }
    s += std::to_string(first_[v.node] + v.index);
    return s;
  }

  std::string node_line(NodeId id, const PrintOptions& opts) const {
    const Node& n = g_[id];
    std::string out;
    for (uint32_t r = 0; r < n.results.size(); ++r) {
      if (r) out += ", ";
      out += name(Value(id, r));
    }
    if (!n.results.empty()) out += " = ";
    out += op_name(n.op);
    for (size_t i = 0; i < n.operands.size(); ++i) {
      out += i ? ", " : " ";
      out += name(n.operands[i]);
    }
    if (!n.attrs.empty()) {
      out += " ";
      out += attrs_str(n.attrs);
    }
    for (size_t r = 0; r < n.results.size(); ++r) {
      out += r ? ", " : " : ";
      out += n.results[r].str();
    }
    if (opts.locations && n.loc.known()) out += "  @ " + n.loc.str();
    return out;
  }

 private:
  const Graph& g_;
  std::vector<uint32_t> first_;  // value number of each node's result 0
};

}  // namespace

std::vector<uint32_t> value_numbers(const Graph& g) {
  std::vector<uint32_t> first(g.size() + 1, 0);
  for (NodeId i = 0; i < g.size(); ++i)
    first[i + 1] = first[i] + static_cast<uint32_t>(g[i].results.size());
  return first;
}

std::string print_node(const Graph& g, NodeId id, const PrintOptions& opts) {
  return Namer(g).node_line(id, opts);
}

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  Namer names(g);
  std::string out;
  for (NodeId i = 0; i < g.size(); ++i) out += names.node_line(i, opts) + "\n";
  out += "return";
  for (size_t i = 0; i < g.outputs.size(); ++i) out += (i ? ", " : " ") + names.name(g.outputs[i]);
  out += "\n";
  for (const ParamUpdate& u : g.updates)
    out += "update " + std::to_string(u.param) + " = " + names.name(u.value) + "\n";
  return out;
}

}  // namespace kiln
