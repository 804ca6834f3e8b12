// The verifier: every node against the op table, then outputs and updates.
#include "ir/verifier.h"

#include <map>
#include <set>

#include "ir/printer.h"

namespace kiln {

namespace {

bool defined(const Graph& g, Value v, NodeId before) {
  return v.node < before && v.node < g.size() && v.index < g[v.node].results.size();
}

void check_operands(const Graph& g, NodeId id) {
  const Node& n = g[id];
  int arity = op_info(n.op).arity;
  KILN_CHECK(arity < 0 || static_cast<size_t>(arity) == n.operands.size(), "expected ", arity,
             " operands, got ", n.operands.size());
  for (size_t i = 0; i < n.operands.size(); ++i) {
    Value v = n.operands[i];
    KILN_CHECK(defined(g, v, id), "operand ", i, " (node ", v.node, " result ", v.index,
               ") is not a value defined by an earlier node");
  }
}

void check_numeric(const Attrs& a, AttrKey k) {
  (void)a.f(k);
}

// Input, Creation and Custom nodes: their type is given, so check the attributes.
void check_given(const Node& n, std::set<int64_t>& arg_indices, std::set<int64_t>& param_indices) {
  OpCategory c = op_info(n.op).category;
  if (c != OpCategory::Custom)
    KILN_CHECK(n.results.size() == 1, "expected 1 result, got ", n.results.size());
  // A given type is one a buffer can have: a known dtype, and an element count,
  // byte size and strides that fit in 64 bits.
  for (const TensorType& t : n.results) {
    check_dtype(t.dtype, "result type");
    (void)t.bytes();
    (void)contiguous_strides(t.shape);
  }
  switch (n.op) {
    case OpKind::arg:
    case OpKind::param: {
      int64_t index = n.attrs.i(AttrKey::index);
      KILN_CHECK(index >= 0, "expected index >= 0, got ", index);
      auto& seen = n.op == OpKind::arg ? arg_indices : param_indices;
      KILN_CHECK(seen.insert(index).second, "a second ", op_name(n.op), " with index ", index);
      if (n.op == OpKind::param && n.attrs.has(AttrKey::name)) (void)n.attrs.str(AttrKey::name);
      break;
    }
    case OpKind::constant:
      check_numeric(n.attrs, AttrKey::value);
      break;
    case OpKind::literal: {
      size_t len = n.attrs.floats(AttrKey::data).size();
      KILN_CHECK(static_cast<int64_t>(len) == n.results[0].numel(), "expected ",
                 n.results[0].numel(), " data elements for ", n.results[0].str(), ", got ", len);
      break;
    }
    case OpKind::arange:
      check_numeric(n.attrs, AttrKey::start);
      check_numeric(n.attrs, AttrKey::step);
      KILN_CHECK(n.results[0].rank() == 1, "expected a result of rank 1, got ", n.results[0].str());
      break;
    case OpKind::custom:
      (void)n.attrs.i(AttrKey::fn);
      break;
    default:
      break;
  }
}

void check_inferred(const Graph& g, const Node& n) {
  KILN_CHECK(n.results.size() == 1, "expected 1 result, got ", n.results.size());
  std::vector<TensorType> in;
  for (Value v : n.operands) in.push_back(g.type(v));
  TensorType t = infer_type(n.op, in, n.attrs);
  KILN_CHECK(t == n.results[0], "expected result type ", t.str(), " (from the op's rules), got ",
             n.results[0].str());
}

}  // namespace

void verify(const Graph& g) {
  std::set<int64_t> arg_indices, param_indices;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    try {
      check_operands(g, id);
      KILN_CHECK(!is_composite(n.op), "expected no composite op (ops.def's decomp: the Builder "
                 "expands it into its ops)");
      OpCategory c = op_info(n.op).category;
      if (c == OpCategory::Input || c == OpCategory::Creation || c == OpCategory::Custom)
        check_given(n, arg_indices, param_indices);
      else
        check_inferred(g, n);
    } catch (const Error& e) {
      Error err("invalid node `" + print_node(g, id) + "`: " + e.message());
      err.attach(n.loc);
      throw err;
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    Value v = g.outputs[i];
    KILN_CHECK(defined(g, v, g.size()), "invalid graph: output ", i, " (node ", v.node, " result ",
               v.index, ") is not a value of the graph");
  }
  std::map<int64_t, NodeId> params;
  for (NodeId id : g.params()) params[g[id].attrs.i(AttrKey::index)] = id;
  std::set<int64_t> updated;
  for (const ParamUpdate& u : g.updates) {
    auto it = params.find(u.param);
    KILN_CHECK(it != params.end(), "invalid update of param ", u.param,
               ": the graph has no param with that index");
    KILN_CHECK(defined(g, u.value, g.size()), "invalid update of param ", u.param, ": node ",
               u.value.node, " result ", u.value.index, " is not a value of the graph");
    KILN_CHECK(updated.insert(u.param).second, "invalid update of param ", u.param,
               ": it is updated twice");
    const TensorType& want = g[it->second].type();
    KILN_CHECK(g.type(u.value) == want, "invalid update of param ", u.param,
               ": expected a value of type ", want.str(), ", got ", g.type(u.value).str());
  }
}

}  // namespace kiln
