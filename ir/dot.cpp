// Graphviz pictures of a graph (see dot.h).
#include "ir/dot.h"

#include <map>
#include <set>
#include <sstream>

#include "ir/printer.h"

namespace kiln {
namespace {

// The parts appended in order (GCC 12 warns falsely, -Wrestrict, on "text" + std::string).
template <class... T>
std::string cat(const T&... parts) {
  std::string s;
  ((s += parts), ...);
  return s;
}

// A dot string literal's contents: quotes and backslashes escaped, line breaks as \n.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

const char* fill(OpCategory c) {
  switch (c) {
    case OpCategory::Input:
      return "#fff2cc";
    case OpCategory::Reduce:
    case OpCategory::Scan:
      return "#dae8fc";
    case OpCategory::Matmul:
      return "#f8cecc";
    case OpCategory::Movement:
      return "#eeeeee";
    case OpCategory::Gather:
    case OpCategory::Scatter:
    case OpCategory::Sort:
      return "#e1d5e7";
    case OpCategory::Collective:
    case OpCategory::Custom:
    case OpCategory::Check:
      return "#ffe6cc";
    default:
      return "#ffffff";
  }
}

std::string types_of(const Node& n) {
  std::string s;
  for (size_t r = 0; r < n.results.size(); ++r) s += (r ? ", " : "") + n.results[r].str();
  return s;
}

class DotWriter {
 public:
  DotWriter(const Graph& g, const DotOptions& o) : g_(g), o_(o), number_(value_numbers(g)) {}

  std::string write() {
    assign_homes();
    // newrank: Graphviz's default ranking, cluster by cluster, fails on some
    // kernel pictures ("trouble in init_rank"; a CNN training step's, with
    // dot 2.43); ranking the whole graph at once lays out every one we draw.
    os_ << "digraph kiln {\n"
        << "  graph [fontname=\"Helvetica\", fontsize=11, labelloc=t, labeljust=l, "
           "nodesep=0.25, ranksep=0.35, newrank=true];\n"
        << "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\", "
           "fillcolor=\"#ffffff\", margin=\"0.08,0.03\"];\n"
        << "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", arrowsize=0.6];\n";
    std::string title = o_.title;
    if (collapsed_ > 0)
      title += cat(title.empty() ? "" : "\n", std::to_string(collapsed_), " kernel",
                   collapsed_ == 1 ? "" : "s", " of more than ", std::to_string(o_.collapse_above),
                   " nodes drawn as one node (see their .kir files)");
    if (!title.empty()) os_ << "  label=\"" << escape(title) << "\";\n";

    for (size_t c = 0; c < o_.clusters.size(); ++c) write_cluster(c);
    for (NodeId id = 0; id < g_.size(); ++id)
      if (home_[id] < 0 && !is_constant(id) && needed_[id]) write_node(id, "  ");
    write_edges();
    os_ << "}\n";
    return os_.str();
  }

 private:
  bool is_constant(NodeId id) const { return g_[id].op == OpKind::constant; }

  // Which cluster draws each node (-1: none), which clusters are collapsed, and
  // which nodes are drawn at all (with clusters, only those the kernels compute,
  // the inputs they read and what those need).
  void assign_homes() {
    home_.assign(g_.size(), -1);
    needed_.assign(g_.size(), o_.clusters.empty());
    for (size_t c = 0; c < o_.clusters.size(); ++c) {
      size_t members = 0;
      for (NodeId id : o_.clusters[c].nodes) {
        if (id >= g_.size()) continue;
        if (!is_constant(id) && home_[id] < 0) {
          home_[id] = static_cast<int>(c);
          ++members;
        }
        needed_[id] = true;
      }
      collapse_.push_back(members > o_.collapse_above);
      collapsed_ += collapse_.back();
      empty_.push_back(members == 0 && !has_constant_member(c));
    }
    if (!o_.clusters.empty()) {
      for (NodeId id = 0; id < g_.size(); ++id)
        if (needed_[id])
          for (Value v : g_[id].operands)
            if (v.node < g_.size()) needed_[v.node] = true;
      for (Value v : g_.outputs)
        if (v.node < g_.size()) needed_[v.node] = true;
      for (const ParamUpdate& u : g_.updates)
        if (u.value.node < g_.size()) needed_[u.value.node] = true;
    }
  }

  bool has_constant_member(size_t c) const {
    for (NodeId id : o_.clusters[c].nodes)
      if (id < g_.size() && is_constant(id)) return true;
    return false;
  }

  std::string value(Value v) const { return cat("%", std::to_string(number_[v.node] + v.index)); }

  // The dot id of what draws node `id`: its own box, or its collapsed cluster.
  std::string id_of(NodeId id) const {
    const int h = home_[id];
    if (h >= 0 && collapse_[static_cast<size_t>(h)]) return cat("k", std::to_string(h));
    return cat("n", std::to_string(id));
  }

  std::string label(NodeId id) const {
    const Node& n = g_[id];
    std::string head;
    for (size_t r = 0; r < n.results.size(); ++r) head += cat(r ? ", " : "", value(Value(id, r)));
    head += cat(head.empty() ? "" : " = ", op_name(n.op));
    std::string lines = head;
    if (n.op == OpKind::arg) {
      lines = cat(head, " ", std::to_string(n.attrs.i(AttrKey::index, 0)));
    } else if (n.op == OpKind::param) {
      if (n.attrs.has(AttrKey::name)) lines = cat(head, " ", n.attrs.str(AttrKey::name));
    } else if (!n.attrs.empty()) {
      const std::string a = attrs_str(n.attrs);
      if (a.size() <= 32) lines += cat(" ", a);
    }
    lines += cat("\n", types_of(n));
    if (n.loc.known()) lines += cat("\n", n.loc.str());
    return lines;
  }

  void write_node(NodeId id, const std::string& indent) {
    const Node& n = g_[id];
    const OpCategory cat = op_info(n.op).category;
    os_ << indent << "n" << id << " [label=\"" << escape(label(id)) << "\"";
    if (cat == OpCategory::Input) os_ << ", shape=ellipse, style=filled";
    // With kernels drawn, a computed node outside every kernel is a view read in
    // place (a transpose a matmul reads as is).
    else if (!o_.clusters.empty() && home_[id] < 0)
      os_ << ", style=\"rounded,dashed,filled\", tooltip=\"in no kernel: read in place\"";
    if (fill(cat) != std::string("#ffffff")) os_ << ", fillcolor=\"" << fill(cat) << "\"";
    os_ << "];\n";
  }

  // A constant drawn for one place it is used: "n5_u7" beside node 7, or "n5_k3"
  // inside cluster 3 (where a cluster writes the constant as a buffer).
  std::string constant_copy(NodeId c, const std::string& where, const std::string& indent) {
    const std::string id = cat("n", std::to_string(c), "_", where);
    if (drawn_.insert(id).second) {
      const Node& n = g_[c];
      std::string text = n.attrs.has(AttrKey::value) ? float_text(n.attrs.f(AttrKey::value))
                                                     : std::string("constant");
      if (n.type().numel() != 1) text += cat("\n", n.type().str());
      os_ << indent << id << " [label=\"" << escape(text)
          << "\", shape=plaintext, style=\"\", fontsize=9, fontcolor=\"#555555\"];\n";
    }
    return id;
  }

  static std::string float_text(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }

  void write_cluster(size_t c) {
    const DotCluster& k = o_.clusters[c];
    const std::string label = cat(k.name, k.detail.empty() ? "" : "\n", k.detail);
    if (collapse_[c]) {
      std::map<std::string, int> ops;
      std::set<std::string> sources;
      size_t members = 0;
      for (NodeId id : k.nodes) {
        if (id >= g_.size() || home_[id] != static_cast<int>(c)) continue;
        ++members;
        ops[op_name(g_[id].op)]++;
        if (g_[id].loc.known()) sources.insert(g_[id].loc.str());
      }
      std::string text = cat(label, "\n", std::to_string(members), " nodes, collapsed:");
      size_t shown = 0;
      for (const auto& [op, count] : ops) {
        text += cat(shown % 4 == 0 ? "\n" : ", ", op,
                    count > 1 ? cat(" x", std::to_string(count)) : "");
        ++shown;
      }
      size_t s = 0;
      for (const std::string& src : sources) {
        if (s == 3) {
          text += cat("\n... ", std::to_string(sources.size() - 3), " more lines");
          break;
        }
        text += cat("\n", src);
        ++s;
      }
      os_ << "  subgraph cluster_k" << c << " {\n    label=\"" << escape(k.name)
          << "\"; style=\"rounded,filled\"; fillcolor=\"#f5f5f5\"; color=\"#888888\";\n"
          << "    k" << c << " [label=\"" << escape(text)
          << "\", shape=box3d, style=filled, fillcolor=\"#d5e8d4\"];\n  }\n";
      return;
    }
    os_ << "  subgraph cluster_k" << c << " {\n    label=\"" << escape(label)
        << "\"; style=\"rounded,filled\"; fillcolor=\"#f5f5f5\"; color=\"#888888\";\n";
    for (NodeId id : k.nodes)
      if (id < g_.size() && home_[id] == static_cast<int>(c)) write_node(id, "    ");
    if (empty_[c])
      os_ << "    k" << c << " [label=\"" << escape(k.name)
          << "\", shape=plaintext, style=\"\", fontsize=9];\n";
    // Constants this cluster writes as buffers (a group of constants alone).
    for (NodeId id : k.nodes)
      if (id < g_.size() && is_constant(id) && writes(c, id))
        constant_copy(id, cat("k", std::to_string(c)), "    ");
    // Constants its nodes use are drawn beside them, inside the cluster.
    for (NodeId id : k.nodes) {
      if (id >= g_.size() || home_[id] != static_cast<int>(c)) continue;
      for (Value v : g_[id].operands)
        if (v.node < g_.size() && is_constant(v.node))
          constant_copy(v.node, cat("u", std::to_string(id)), "    ");
    }
    os_ << "  }\n";
  }

  // Whether cluster c holds constant `id` without any of its own nodes using it.
  bool writes(size_t c, NodeId id) const {
    for (NodeId m : o_.clusters[c].nodes)
      if (m < g_.size() && home_[m] == static_cast<int>(c))
        for (Value v : g_[m].operands)
          if (v.node == id) return false;
    return true;
  }

  void write_edges() {
    std::set<std::pair<std::string, std::string>> seen;
    for (NodeId id = 0; id < g_.size(); ++id) {
      if (!needed_[id] || is_constant(id)) continue;
      const std::string to = id_of(id);
      for (size_t i = 0; i < g_[id].operands.size(); ++i) {
        const Value v = g_[id].operands[i];
        if (v.node >= g_.size()) continue;
        std::string from;
        if (is_constant(v.node)) {
          if (home_[id] >= 0 && collapse_[static_cast<size_t>(home_[id])]) continue;
          from = constant_copy(v.node, cat("u", std::to_string(id)), "  ");
        } else {
          from = id_of(v.node);
        }
        if (from == to || !seen.insert({from, to}).second) continue;
        os_ << "  " << from << " -> " << to;
        // An edge between kernels (or into one from an input) is a buffer in memory.
        const bool crosses = !o_.clusters.empty() && home_[id] != home_[v.node] &&
                             !is_constant(v.node) && (home_[id] >= 0 || home_[v.node] >= 0);
        if (crosses) os_ << " [label=\"" << escape(g_.type(v).str()) << "\"]";
        os_ << ";\n";
      }
    }
    if (g_.outputs.empty() && g_.updates.empty()) return;
    os_ << "  return_ [label=\"return\", shape=doublecircle, style=filled, fillcolor=\"#d5e8d4\", "
           "fontsize=9, width=0.3];\n";
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      const Value v = g_.outputs[i];
      if (v.node >= g_.size()) continue;
      const std::string from =
          is_constant(v.node) ? constant_copy(v.node, "out", "  ") : id_of(v.node);
      os_ << "  " << from << " -> return_ [label=\"" << i << "\", style=bold];\n";
    }
    for (const ParamUpdate& u : g_.updates) {
      if (u.value.node >= g_.size()) continue;
      const std::string from = is_constant(u.value.node) ? constant_copy(u.value.node, "out", "  ")
                                                         : id_of(u.value.node);
      os_ << "  " << from << " -> return_ [label=\"update " << u.param << "\", style=dashed];\n";
    }
  }

  const Graph& g_;
  const DotOptions& o_;
  std::vector<uint32_t> number_;
  std::vector<int> home_;
  std::vector<char> needed_, collapse_, empty_;
  size_t collapsed_ = 0;
  std::set<std::string> drawn_;
  std::ostringstream os_;
};

}  // namespace

std::string graph_dot(const Graph& g, const DotOptions& opts) {
  return DotWriter(g, opts).write();
}

}  // namespace kiln
