// Reverse-mode autodiff: walks the nodes between `wrt` and `outputs` in
// reverse topological order (node ids are topological), calls each node's VJP
// rule (ir/vjp.h) with its accumulated output gradient, and sums what reaches
// each value along several paths.
#include "passes/autodiff.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/vjp.h"

namespace kiln {
namespace {

/// Which values the gradient can flow through: those that depend on a `wrt`
/// value (forward from wrt) in nodes that feed an output (backward from outputs).
class Paths {
 public:
  Paths(const Graph& g, std::span<const Value> outputs, std::span<const Value> wrt)
      : wrt_(wrt.begin(), wrt.end()), depends_(g.size(), 0), feeds_(g.size(), 0) {
    for (NodeId id = 0; id < g.size(); ++id) {
      for (Value v : g[id].operands) {
        if (reaches(v)) {
          depends_[id] = 1;
          break;
        }
      }
    }
    for (Value v : outputs) feeds_[v.node] = 1;
    for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;) {
      if (!feeds_[id]) continue;
      for (Value v : g[id].operands) feeds_[v.node] = 1;
    }
  }

  /// True when v is a wrt value or computed from one.
  bool reaches(Value v) const { return depends_[v.node] || wrt_.count(v); }
  /// True when the node's operands may receive gradient: it depends on a wrt
  /// value and its results feed an output.
  bool active(NodeId id) const { return depends_[id] && feeds_[id]; }

 private:
  std::unordered_set<Value, ValueHash> wrt_;
  std::vector<char> depends_;
  std::vector<char> feeds_;
};

/// Gradients accumulated per forward value; a second arrival is summed.
class GradMap {
 public:
  void add(Builder& b, Value v, Value grad) {
    auto [it, inserted] = map_.try_emplace(v, grad);
    if (!inserted) it->second = b.add(it->second, grad);
  }
  Value get(Value v) const {
    auto it = map_.find(v);
    return it == map_.end() ? Value{} : it->second;
  }

 private:
  std::unordered_map<Value, Value, ValueHash> map_;
};

bool any_floating(const Node& n) {
  return std::any_of(n.results.begin(), n.results.end(),
                     [](const TensorType& t) { return is_floating(t.dtype); });
}

/// Operand gradients of a custom node: its hook gets every result with its
/// gradient (zeros for results no output depends on).
std::vector<Value> custom_grads(Builder& b, NodeId id, const Node& n, const GradMap& grads,
                                const CustomVjp& hook) {
  if (!hook)
    throw Error("custom function has no backward: differentiated without a CustomVjp", n.loc);
  std::vector<Value> outs, result_grads;
  for (uint32_t i = 0; i < n.results.size(); ++i) {
    const Value r(id, i);
    const Value g = grads.get(r);
    outs.push_back(r);
    result_grads.push_back(g ? g : b.zeros_like(r));
  }
  std::vector<Value> og = hook(b, n, outs, result_grads);
  // User code may return gradients in another float dtype: cast them.
  for (size_t i = 0; i < og.size() && i < n.operands.size(); ++i) {
    const DType want = b.type(n.operands[i]).dtype;
    if (og[i] && b.type(og[i]).dtype != want && is_floating(want)) og[i] = b.cast(og[i], want);
  }
  return og;
}

/// The gradients of node `id`'s operands (n is its copy), or an empty list when it has none.
std::vector<Value> node_grads(Builder& b, NodeId id, const Node& n, const Paths& paths,
                              const GradMap& grads, const CustomVjp& custom) {
  if (!any_floating(n)) return {};
  if (n.op == OpKind::custom) return custom_grads(b, id, n, grads, custom);
  const VjpRule rule = vjp_rule(n.op);
  const Value g = grads.get(Value(id, 0));
  if (!rule || !g) return {};
  std::vector<bool> needs;
  for (Value v : n.operands) needs.push_back(paths.reaches(v));
  return rule(b, n, Value(id, 0), g, needs);
}

void check_grad_type(const Builder& b, const Node& n, size_t i, Value grad) {
  const TensorType want = b.type(n.operands[i]);
  const TensorType got = b.type(grad);
  if (got == want) return;
  throw Error(std::string("gradient of operand ") + std::to_string(i) + " of " + op_name(n.op) +
                  ": expected " + want.str() + ", got " + got.str(),
              n.loc);
}

void check_value(const Graph& g, Value v, const char* what) {
  KILN_CHECK(v.valid() && v.node < g.size() && v.index < g[v.node].results.size(),
             "build_gradients: ", what, " refers to no value of the graph (node ", v.node,
             " result ", v.index, ")");
}

}  // namespace

std::vector<Value> build_gradients(Builder& b, std::span<const Value> outputs,
                                   std::span<const Value> seeds, std::span<const Value> wrt,
                                   const CustomVjp& custom) {
  KILN_CHECK(outputs.size() == seeds.size(), "build_gradients: expected one seed per output (",
             outputs.size(), "), got ", seeds.size());
  for (Value v : outputs) check_value(b.graph(), v, "an output");
  for (Value v : seeds) check_value(b.graph(), v, "a seed");
  for (Value v : wrt) check_value(b.graph(), v, "a wrt value");
  const NodeId forward_size = static_cast<NodeId>(b.graph().size());
  const Paths paths(b.graph(), outputs, wrt);

  GradMap grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK(b.type(seeds[i]) == b.type(outputs[i]), "build_gradients: seed ", i,
               " must have its output's type: expected ", b.type(outputs[i]).str(), ", got ",
               b.type(seeds[i]).str());
    if (paths.reaches(outputs[i])) grads.add(b, outputs[i], seeds[i]);
  }

  for (NodeId id = forward_size; id-- > 0;) {
    if (!paths.active(id)) continue;
    const Node n = b.graph().node(id);  // a copy: rules append to the graph
    LocScope at(b, n.loc);
    const std::vector<Value> og = node_grads(b, id, n, paths, grads, custom);
    if (og.empty()) continue;
    if (og.size() != n.operands.size()) {
      throw Error(std::string("VJP of ") + op_name(n.op) + ": expected " +
                      std::to_string(n.operands.size()) + " operand gradients, got " +
                      std::to_string(og.size()),
                  n.loc);
    }
    for (size_t i = 0; i < og.size(); ++i) {
      if (!og[i] || !paths.reaches(n.operands[i])) continue;
      check_grad_type(b, n, i, og[i]);
      grads.add(b, n.operands[i], og[i]);
    }
  }

  std::vector<Value> result;
  result.reserve(wrt.size());
  for (Value w : wrt) {
    const Value g = grads.get(w);
    result.push_back(g ? g : b.zeros_like(w));
  }
  return result;
}

Graph autodiff(const Graph& g, std::span<const Value> wrt, const CustomVjp& custom) {
  Graph result = g;
  Builder b(result);
  int64_t next_index = 0;
  for (NodeId id : g.args()) {
    next_index = std::max(next_index, g[id].attrs.i(AttrKey::index) + 1);
  }
  std::vector<Value> seeds;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    seeds.push_back(b.arg(next_index + static_cast<int64_t>(i), g.type(g.outputs[i])));
  }
  const std::vector<Value> grads = build_gradients(b, g.outputs, seeds, wrt, custom);
  result.outputs.insert(result.outputs.end(), grads.begin(), grads.end());
  return result;
}

}  // namespace kiln
