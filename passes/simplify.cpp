// Local algebraic rewrites: a table of patterns and one driver that applies
// them to a fixed point.
//
// The driver copies the graph node by node into a new one. For each node, with
// its operands already mapped (so already simplified), the patterns for its op
// are tried in table order; the first that applies gives the value that replaces
// the node. Replacements have exactly the node's type: a rewrite that would
// change the result's shape (broadcasting) or dtype (promotion) does not apply.
// Sweeps repeat until one changes nothing. Nodes left unused by a rewrite stay
// in the graph for dce to remove.
//
// x * 0 -> 0 is done only for integral types: for floats it is unsound
// (inf * 0 and nan * 0 are nan, and -1 * 0 is -0). sub(x, x) -> 0 likewise.
#include "passes/simplify.h"

#include <span>

#include "ir/builder.h"
#include "passes/graph_copy.h"

namespace kiln {

namespace {

// A node being rewritten: the source node, and its operands in the new graph.
struct Match {
  Builder& b;  // builds into the new graph; b.loc is the node's location
  const Node& node;
  std::vector<Value> operands;
  const std::vector<uint32_t>& source_uses;  // use counts in the graph being rewritten

  const Graph& graph() const { return b.graph(); }
  const TensorType& type() const { return node.type(); }
  const Node& producer(size_t i) const { return graph()[operands[i].node]; }
  const TensorType& operand_type(size_t i) const { return graph().type(operands[i]); }
  /// True when operand i is a `constant` node holding `value`.
  bool is_constant(size_t i, double value) const {
    const Node& p = producer(i);
    return p.op == OpKind::constant && p.attrs.f(AttrKey::value) == value;
  }
  /// v if it has the node's exact type (so replacing the node by it changes no
  /// shape or dtype), else no value.
  Value if_same_type(Value v) const { return graph().type(v) == type() ? v : Value(); }
  Value zeros() { return b.constant(0.0, type().dtype, type().shape, type().device); }
  /// True when the node's operand i has no other user (rewriting it does not duplicate work).
  bool operand_used_once(size_t i) const { return source_uses[node.operands[i].node] == 1; }
};

// A rewrite returns the replacement value, or an invalid Value when it does not apply.
using Rewrite = Value (*)(Match&);

struct Pattern {
  const char* name;
  OpKind op;
  Rewrite rewrite;
};

// x op c -> x, and (when commutes) c op x -> x, where c is a constant `identity`.
Value drop_identity_operand(Match& m, double identity, bool commutes) {
  if (m.is_constant(1, identity))
    if (Value v = m.if_same_type(m.operands[0])) return v;
  if (commutes && m.is_constant(0, identity)) return m.if_same_type(m.operands[1]);
  return {};
}

Value mul_one(Match& m) {
  return drop_identity_operand(m, 1.0, true);
}
Value add_zero(Match& m) {
  return drop_identity_operand(m, 0.0, true);
}
Value sub_zero(Match& m) {
  return drop_identity_operand(m, 0.0, false);
}
Value div_one(Match& m) {
  return drop_identity_operand(m, 1.0, false);
}

Value mul_zero_integral(Match& m) {
  if (!is_integral(m.type().dtype)) return {};
  if (m.is_constant(0, 0.0) || m.is_constant(1, 0.0)) return m.zeros();
  return {};
}

Value sub_self_integral(Match& m) {
  if (!is_integral(m.type().dtype) || m.operands[0] != m.operands[1]) return {};
  return m.zeros();
}

Value neg_neg(Match& m) {
  const Node& p = m.producer(0);
  if (p.op != OpKind::neg) return {};
  return m.if_same_type(p.operands[0]);
}

Value pow_one(Match& m) {
  if (!m.is_constant(1, 1.0)) return {};
  return m.if_same_type(m.operands[0]);
}

Value pow_two(Match& m) {
  if (!m.is_constant(1, 2.0)) return {};
  const TensorType& x = m.operand_type(0);
  // mul(x, x) has x's type; pow's may differ (an integer x to a float 2.0 is a float).
  if (x != m.type()) return {};
  return m.b.mul(m.operands[0], m.operands[0]);
}

Value where_same(Match& m) {
  if (m.operands[1] != m.operands[2]) return {};
  return m.if_same_type(m.operands[1]);
}

Value cast_same(Match& m) {
  return m.if_same_type(m.operands[0]);
}

// reshape, expand and permute to the operand's own shape (and order) are the operand.
Value reshape_same(Match& m) {
  return m.if_same_type(m.operands[0]);
}
Value expand_same(Match& m) {
  return m.if_same_type(m.operands[0]);
}

Value permute_identity(Match& m) {
  const std::vector<int64_t>& perm = m.node.attrs.ints(AttrKey::perm);
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return {};
  return m.operands[0];
}

// A slice from 0 that keeps the dim's size (step 1 over the whole dim, or any
// step over a dim of size 1) reads every element in order.
Value slice_whole(Match& m) {
  if (m.node.attrs.i(AttrKey::start) != 0) return {};
  return m.if_same_type(m.operands[0]);
}

Value pad_nothing(Match& m) {
  const Attrs& a = m.node.attrs;
  if (a.i(AttrKey::low) != 0 || a.i(AttrKey::high) != 0 || a.i(AttrKey::interior) != 0) return {};
  return m.operands[0];
}

Value reshape_reshape(Match& m) {
  const Node& p = m.producer(0);
  if (p.op != OpKind::reshape) return {};
  return m.b.reshape(p.operands[0], m.type().shape);
}

Value permute_permute(Match& m) {
  const Node& p = m.producer(0);
  if (p.op != OpKind::permute) return {};
  const std::vector<int64_t>& outer = m.node.attrs.ints(AttrKey::perm);
  const std::vector<int64_t>& inner = p.attrs.ints(AttrKey::perm);
  // result[i] = inner_result[outer[i]] = x[inner[outer[i]]].
  std::vector<int64_t> composed(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) composed[i] = inner.at(outer[i]);
  return m.b.permute(p.operands[0], std::move(composed));
}

// (a @ b)^T -> b^T @ a^T for a transpose of the last two dims: a gradient of a
// weight used as w.t() becomes one matmul whose transposes BLAS reads directly,
// instead of a matmul and then a strided copy.
Value permute_matmul(Match& m) {
  const Node& p = m.producer(0);
  if (p.op != OpKind::matmul || !m.operand_used_once(0)) return {};
  const std::vector<int64_t>& perm = m.node.attrs.ints(AttrKey::perm);
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2 || perm[r - 1] != r - 2 || perm[r - 2] != r - 1) return {};
  for (int64_t d = 0; d + 2 < r; ++d)
    if (perm[d] != d) return {};
  // Copied first: building the transposes may grow the graph and move `p`.
  const Value a = p.operands[0], b = p.operands[1];
  Value bt = m.b.transpose_last(b);
  Value at = m.b.transpose_last(a);
  return m.b.matmul(bt, at);
}

// detach only stops gradients, and they were built while tracing: its value is x.
Value detach_identity(Match& m) { return m.operands[0]; }
// rebind(new, old) routes gradients only: its value is new.
Value rebind_identity(Match& m) { return m.operands[0]; }

// Moving a `constant` (one value everywhere) gives the same value in the new shape.
Value move_constant(Match& m) {
  const Node& p = m.producer(0);
  if (p.op != OpKind::constant) return {};
  return m.b.op_typed(OpKind::constant, {}, p.attrs, m.type());
}

// x + scatter_add(0, i, s) -> scatter_add(x, i, s) (either order): a gradient
// accumulated into .grad (an embedding's) adds its few rows in place of a
// whole zero table plus a whole-table add. The sum order of an element's
// contributions stays x first, then the sources in index order.
Value add_scatter(Match& m) {
  for (size_t k = 0; k < 2; ++k) {
    const Node& s = m.producer(1 - k);
    if (s.op != OpKind::scatter_add || !m.operand_used_once(1 - k)) continue;
    const Node& base = m.graph()[s.operands[0].node];
    if (base.op != OpKind::constant || base.attrs.f(AttrKey::value) != 0.0) continue;
    if (m.operand_type(k) != m.type() || m.graph().type(Value(s.operands[0].node)) != m.type()) continue;
    const Value x = m.operands[k], index = s.operands[1], src = s.operands[2];
    const Attrs attrs = s.attrs;  // copied: building may grow the graph and move `s`
    return m.b.op(OpKind::scatter_add, {x, index, src}, attrs);
  }
  return {};
}

// sum(scatter_add(0, i, s), {d}) -> sum(s, {d}), also through a neg
// (sum(neg(scatter_add(0, i, s))) -> sum(neg(s))), where the scatter puts one
// source into each line along d (index and source of extent 1 along d and of the
// base's extent in every other dim): a line's sum is its one value, exactly (the
// zeros add nothing, and a zero value sums to +0 either way). A cross-entropy's
// backward sums its scattered one-hot gradient so; without the sum, the scatter
// has one use left and add_scatter writes it into the softmax term in place.
Value sum_scatter(Match& m) {
  const Node* p = &m.producer(0);
  const bool negate = p->op == OpKind::neg;
  if (negate) p = &m.graph()[p->operands[0].node];
  if (p->op != OpKind::scatter_add) return {};
  const Node& base = m.graph()[p->operands[0].node];
  if (base.op != OpKind::constant || base.attrs.f(AttrKey::value) != 0.0) return {};
  const Shape& out = base.type().shape;
  const int64_t rank = static_cast<int64_t>(out.size());
  const std::vector<int64_t> dims = normalize_dims(m.node.attrs.ints(AttrKey::dims), rank);
  const int64_t d = normalize_dim(p->attrs.i(AttrKey::dim), rank);
  if (dims != std::vector<int64_t>{d}) return {};
  const Value index = p->operands[1], src = p->operands[2];
  const Shape& shape = m.graph().type(src).shape;
  if (m.graph().type(index).shape != shape) return {};
  for (int64_t k = 0; k < rank; ++k)
    if (shape[size_t(k)] != (k == d ? 1 : out[size_t(k)])) return {};
  const Attrs attrs = m.node.attrs;  // copied: building may grow the graph and move the node
  return m.if_same_type(m.b.op(OpKind::sum, {negate ? m.b.neg(src) : src}, attrs));
}

// The table. Within one op, earlier patterns win.
constexpr Pattern kPatterns[] = {
    {"mul_one", OpKind::mul, mul_one},
    {"mul_zero_integral", OpKind::mul, mul_zero_integral},
    {"add_zero", OpKind::add, add_zero},
    {"add_scatter", OpKind::add, add_scatter},
    {"sub_zero", OpKind::sub, sub_zero},
    {"sub_self_integral", OpKind::sub, sub_self_integral},
    {"div_one", OpKind::div, div_one},
    {"neg_neg", OpKind::neg, neg_neg},
    {"pow_one", OpKind::pow, pow_one},
    {"pow_two", OpKind::pow, pow_two},
    {"where_same", OpKind::where, where_same},
    {"cast_same", OpKind::cast, cast_same},
    {"reshape_same", OpKind::reshape, reshape_same},
    {"reshape_constant", OpKind::reshape, move_constant},
    {"reshape_reshape", OpKind::reshape, reshape_reshape},
    {"expand_same", OpKind::expand, expand_same},
    {"expand_constant", OpKind::expand, move_constant},
    {"permute_identity", OpKind::permute, permute_identity},
    {"permute_constant", OpKind::permute, move_constant},
    {"permute_permute", OpKind::permute, permute_permute},
    {"permute_matmul", OpKind::permute, permute_matmul},
    {"slice_whole", OpKind::slice, slice_whole},
    {"slice_constant", OpKind::slice, move_constant},
    {"pad_nothing", OpKind::pad, pad_nothing},
    {"detach_identity", OpKind::detach, detach_identity},
    {"rebind_identity", OpKind::rebind, rebind_identity},
    {"sum_scatter", OpKind::sum, sum_scatter},
};

// Each node's uses by live nodes, outputs and updates (a node a rewrite left
// unused does not count: dce removes it later).
std::vector<uint32_t> live_use_counts(const Graph& g) {
  const std::vector<bool> live = live_nodes(g);
  std::vector<uint32_t> uses(g.size(), 0);
  for (Value v : g.outputs) ++uses[v.node];
  for (const ParamUpdate& u : g.updates) ++uses[u.value.node];
  for (NodeId id = 0; id < g.size(); ++id)
    if (live[id])
      for (Value v : g[id].operands) ++uses[v.node];
  return uses;
}

// One sweep over g into `out`; returns the number of rewrites applied.
int sweep(const Graph& g, Graph& out) {
  Builder b(out);
  ValueMap map(g);
  int rewrites = 0;
  const std::vector<uint32_t> uses = live_use_counts(g);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    Value replacement;
    if (n.results.size() == 1) {
      Match m{b, n, {}, uses};
      for (Value v : n.operands) m.operands.push_back(map(v));
      b.loc = n.loc;
      for (const Pattern& p : kPatterns) {
        if (p.op != n.op) continue;
        replacement = p.rewrite(m);
        if (!replacement) continue;
        KILN_CHECK(out.type(replacement) == n.type(), "internal error: simplify pattern ", p.name,
                   " replaced a value of type ", n.type().str(), " by one of type ",
                   out.type(replacement).str());
        break;
      }
    }
    if (replacement) {
      map.set(Value(id), replacement);
      ++rewrites;
    } else {
      copy_node(g, id, out, map);
    }
  }
  copy_outputs(g, out, map);
  return rewrites;
}

}  // namespace

Graph simplify(const Graph& g) {
  Graph current = g;
  // Every rewrite removes a node from the live graph or replaces it by a cheaper
  // one, so this terminates; the bound only guards against a faulty pattern.
  for (int round = 0; round < 100; ++round) {
    Graph next;
    if (sweep(current, next) == 0) return next;
    current = std::move(next);
  }
  KILN_CHECK(false, "internal error: simplify did not reach a fixed point in 100 sweeps");
  return current;
}

}  // namespace kiln
