// The graph interpreter: evaluates nodes in order with the reference kernels,
// frees each intermediate after its last use, and applies parameter updates
// only after every output and update value has been computed.
#include "runtime/interpreter.h"

#include "ir/error.h"
#include "runtime/reference.h"

namespace kiln {
namespace {

HostArray input_array(const Node& n, NodeId id, std::span<const HostArray> given,
                      const char* what) {
  const int64_t index = n.attrs.i(AttrKey::index);
  KILN_CHECK(index >= 0 && index < int64_t(given.size()), "interpret: ", what, " %", id,
             " has index ", index, " but ", given.size(), " ", what, "s were given");
  const HostArray& a = given[index];
  const TensorType& want = n.type();
  KILN_CHECK(a.type.dtype == want.dtype && a.type.shape == want.shape, "interpret: ", what, " ",
             index, " should be ", want.str(), ", got ", a.type.str());
  KILN_CHECK(a.storage || want.numel() == 0, "interpret: ", what, " ", index, " has no data");
  return a;
}

}  // namespace

HostArray HostArray::make(const TensorType& t) {
  HostArray a;
  a.type = t;
  a.storage = Storage::allocate(size_t(t.bytes()), Device{});
  return a;
}

std::vector<HostArray> interpret(const Graph& g, std::span<const HostArray> args,
                                 std::vector<HostArray>& params, const InterpretOptions& opts) {
  // Live nodes: those the outputs, updates or custom calls need. Uses are
  // counted from live readers only, so each value is freed after its last read.
  std::vector<char> live(g.size(), 0);
  std::vector<uint32_t> uses(g.size(), 0);
  for (Value v : g.outputs) live[v.node] = 1, uses[v.node]++;
  for (const ParamUpdate& u : g.updates) live[u.value.node] = 1, uses[u.value.node]++;
  for (NodeId id = NodeId(g.size()); id-- > 0;) {
    if (g[id].op == OpKind::custom) live[id] = 1;
    if (!live[id]) continue;
    for (Value v : g[id].operands) live[v.node] = 1, uses[v.node]++;
  }
  std::vector<std::vector<HostArray>> values(g.size());
  std::vector<View> in_views;
  std::vector<HostArray> in_arrays;

  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    if (!live[id]) continue;
    try {
      switch (n.op) {
        case OpKind::arg:
          values[id] = {input_array(n, id, args, "argument")};
          break;
        case OpKind::param:
          values[id] = {input_array(n, id, params, "parameter")};
          break;
        case OpKind::custom: {
          KILN_CHECK(static_cast<bool>(opts.custom),
                     "interpret: the graph has a custom op but no InterpretOptions::custom "
                     "handler was given to run it");
          in_arrays.clear();
          for (Value v : n.operands) in_arrays.push_back(values[v.node].at(v.index));
          std::vector<HostArray> res = opts.custom(n, in_arrays);
          KILN_CHECK(res.size() == n.results.size(), "interpret: custom op returned ", res.size(),
                     " results, expected ", n.results.size());
          for (size_t i = 0; i < res.size(); ++i)
            KILN_CHECK(
                res[i].type.dtype == n.results[i].dtype && res[i].type.shape == n.results[i].shape,
                "interpret: custom op result ", i, " should be ", n.results[i].str(), ", got ",
                res[i].type.str());
          values[id] = std::move(res);
          break;
        }
        default: {
          in_views.clear();
          for (Value v : n.operands) in_views.push_back(values[v.node].at(v.index).view());
          HostArray out = HostArray::make(n.type());
          reference_kernel(n.op, n.attrs, in_views, out.view());
          values[id] = {std::move(out)};
          break;
        }
      }
    } catch (Error& e) {
      e.attach(n.loc, op_name(n.op));
      throw;
    }
    for (Value v : n.operands) {
      if (--uses[v.node] == 0) values[v.node].clear();
    }
    if (uses[id] == 0) values[id].clear();
  }

  std::vector<HostArray> outputs;
  outputs.reserve(g.outputs.size());
  for (Value v : g.outputs) outputs.push_back(values[v.node].at(v.index));
  // Every update value is computed before any parameter is replaced.
  std::vector<HostArray> updated;
  for (const ParamUpdate& u : g.updates) {
    KILN_CHECK(u.param >= 0 && u.param < int64_t(params.size()), "interpret: update of parameter ",
               u.param, " but ", params.size(), " parameters were given");
    updated.push_back(values[u.value.node].at(u.value.index));
  }
  for (size_t i = 0; i < g.updates.size(); ++i) params[g.updates[i].param] = updated[i];
  return outputs;
}

std::vector<HostArray> interpret(const Graph& g, std::span<const HostArray> args) {
  std::vector<HostArray> params;
  return interpret(g, args, params);
}

}  // namespace kiln
