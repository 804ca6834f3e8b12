// The eager autograd engine: tape recording, and backward() as tape -> IR
// graph -> passes/autodiff -> evaluation with the eager ops (so gradients of
// gradients are taped too when create_graph is set).
#include "frontend/autograd.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "frontend/alias.h"
#include "frontend/device_ops.h"
#include "frontend/dispatch.h"
#include "frontend/function.h"
#include "frontend/grad_accumulate.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "ir/builder.h"
#include "passes/autodiff.h"
#include "passes/grad_analysis.h"

namespace kiln {
namespace {

thread_local bool t_grad_mode = true;
thread_local bool t_retain_graphs = false;  // RetainGraphsGuard

std::shared_ptr<TensorImpl> alias_of(const TensorImpl& t) {
  return make_view(t, t.type.shape, t.strides, t.offset);
}

SavedTensor save(const Tensor& t) {
  return SavedTensor{alias_of(*t.impl()), t.impl()->buffer->version, t.impl()->type};
}

// ---- custom function registry ----
// Graph nodes name a custom call by id. An entry lives exactly as long as its
// call: the call's deleter erases it, so a long run (a grad-mode traced call
// makes one per call) keeps no entry, and no control block, of a call that went.
// Never destroyed: a call may die during exit, after this file's statics.
struct CustomRegistry {
  std::mutex mu;
  std::unordered_map<int64_t, std::weak_ptr<autograd::CustomCall>> calls;
  int64_t next = 1;
};

CustomRegistry& custom_registry() {
  static auto* r = new CustomRegistry();
  return *r;
}

std::shared_ptr<autograd::CustomCall> find_custom(int64_t id) {
  CustomRegistry& r = custom_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.calls.find(id);
  auto call = it == r.calls.end() ? nullptr : it->second.lock();
  if (!call) throw Error("custom function call #" + std::to_string(id) + " is no longer alive");
  return call;
}

// The autodiff pass reaches custom nodes through this hook: their backward is
// a `custom` node whose evaluation calls the user's backward.
std::vector<Value> custom_backward_vjp(Builder& b, const Node& n, const std::vector<Value>& outs,
                                       const std::vector<Value>& grads) {
  auto call = find_custom(n.attrs.i(AttrKey::fn));
  if (n.attrs.has(AttrKey::name) && n.attrs.str(AttrKey::name) == "traced") {
    // Inside a trace: the user's backward runs on symbolic gradients and its ops
    // join the graph. Operands are the inputs followed by the forward's results,
    // which get no gradient (the user's backward replaces differentiating them).
    TraceState* tr = current_trace();
    if (!tr)
      throw Error("internal: a traced custom function differentiated outside its trace", n.loc);
    std::vector<Tensor> g;
    for (Value v : grads) g.push_back(tr->wrap(v));
    std::vector<Tensor> res = call->backward(&call->ctx, g);
    size_t n_in = n.operands.size() - n.results.size();
    if (res.size() != n_in)
      throw Error(
          "custom function backward returned " + std::to_string(res.size()) +
              " gradients (expected one per tensor input of forward: " + std::to_string(n_in) + ")",
          n.loc);
    std::vector<Value> out(n.operands.size());
    for (size_t i = 0; i < n_in; ++i)
      if (res[i].defined()) out[i] = tr->value_of(res[i], n.loc);
    return out;
  }
  std::vector<TensorType> in_types;
  for (Value v : n.operands) in_types.push_back(b.type(v));
  Attrs attrs{{AttrKey::fn, call->id}, {AttrKey::name, std::string("backward")}};
  NodeId id = b.op_multi(OpKind::custom, grads, attrs, in_types);
  std::vector<Value> result;
  for (uint32_t i = 0; i < in_types.size(); ++i) result.push_back(Value(id, i));
  return result;
}

// ---- backward ----

// Tape nodes reachable from the roots, in the order they were recorded (producers
// first): the order a trace of the same code records them in, so autodiff adds
// each value's gradient contributions in the same order eagerly and traced (a
// depth-first order from the roots added them differently: last bits differed).
std::vector<TapeNode*> topo_order(const std::vector<TapeNode*>& roots) {
  std::vector<TapeNode*> order;
  std::unordered_set<TapeNode*> seen;
  std::vector<std::pair<TapeNode*, size_t>> stack;
  for (TapeNode* r : roots) {
    if (!r || !seen.insert(r).second) continue;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->next.size()) {
        TapeNode* child = n->next[i++].fn.get();
        if (child && seen.insert(child).second) stack.push_back({child, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  std::sort(order.begin(), order.end(),
            [](const TapeNode* a, const TapeNode* b) { return a->seq < b->seq; });
  return order;
}

// A value of the forward that a gradient reads: what `n` saved of it must be
// there (not freed by an earlier backward) and unchanged since.
struct SavedUse {
  const TapeNode* node;
  const SavedTensor* saved;
  int64_t which;  // operand index, or -1 - result index
};

// Whether n's VJP reads its operand `which` (or, when negative, its result).
bool tape_vjp_reads(const TapeNode& n, int64_t which) {
  std::vector<TensorType> types;
  std::vector<bool> needs;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    types.push_back(n.inputs[i].type);
    needs.push_back(n.next[i].fn || n.next[i].leaf);
  }
  return vjp_reads(n.op, n.attrs, types, needs, which);
}

void check_saved(const SavedUse& u) {
  const TapeNode& n = *u.node;
  const SavedTensor& s = *u.saved;
  const bool intact = s.data && s.data->buffer->version == s.version;
  if (intact || !tape_vjp_reads(n, u.which)) return;
  if (!s.data)
    throw Error(std::string("backward through the graph a second time: the tensors saved by '") +
                    op_name(n.op) +
                    "' were freed by the first backward (expected backward(..., "
                    "retain_graph=true) the first time)",
                n.loc);
  if (s.data->buffer->version != s.version)
    throw detail::modified_saved_error(n.op, s.version, s.data->buffer->version, n.loc);
}

struct BackwardGraph {
  Graph graph;
  std::vector<Tensor> bound;  // per node id (forward part): the value's tensor
  size_t forward_size = 0;
};

// Evaluates the gradient nodes (after the forward part) with the eager ops.
// A gradient a traced call leaves undefined (no output it reads was reached)
// stays undefined through sums, and is zeros where another op reads it; a leaf
// whose gradient ends undefined is not written, as in PyTorch.
// A gradient value is dropped after its last reader (the peak is then what
// is live, not the whole backward's), unless it is wanted or in `keep`.
std::vector<Tensor> evaluate(const Graph& g, std::vector<std::vector<Tensor>>& values, size_t first,
                             const std::vector<Value>& wanted,
                             const std::vector<Value>& keep = {}) {
  std::vector<NodeId> last_use(g.size(), kNoNode);
  for (NodeId id = static_cast<NodeId>(first); id < g.size(); ++id)
    for (Value v : g[id].operands) last_use[v.node] = id;
  for (const auto* list : {&wanted, &keep})
    for (Value v : *list)
      if (v.valid()) last_use[v.node] = kNoNode;
  auto materialize = [&](std::vector<Tensor>& ops, const Node& n) {
    for (size_t i = 0; i < ops.size(); ++i)
      if (!ops[i].defined() && n.operands[i].node >= first) {
        const TensorType& t = g.type(n.operands[i]);
        ops[i] = zeros(t.shape, TensorOptions(t.dtype).device(t.device));
      }
  };
  for (NodeId id = static_cast<NodeId>(first); id < g.size(); ++id) {
    const Node& n = g[id];
    if (!values[id].empty()) continue;
    std::vector<Tensor> ops;
    ops.reserve(n.operands.size());
    for (Value v : n.operands) ops.push_back(values[v.node].at(v.index));
    const OpCategory cat = op_info(n.op).category;
    if (n.op == OpKind::custom) {
      auto call = find_custom(n.attrs.i(AttrKey::fn));
      if (call->undefined_if_unreached) {
        for (size_t i = 0; i < ops.size(); ++i) {
          const Node& o = g[n.operands[i].node];
          if (o.op == OpKind::constant && o.attrs.f(AttrKey::value) == 0.0) ops[i] = Tensor();
        }
      } else {
        materialize(ops, n);
      }
      std::vector<Tensor> grads = call->backward(&call->ctx, ops);
      if (grads.size() != n.results.size())
        throw Error("custom function backward returned " + std::to_string(grads.size()) +
                        " gradients (expected one per tensor input of forward: " +
                        std::to_string(n.results.size()) + ")",
                    n.loc);
      for (size_t i = 0; i < grads.size(); ++i)
        if (!grads[i].defined() && !call->undefined_if_unreached)
          grads[i] = zeros(n.results[i].shape, TensorOptions(n.results[i].dtype));
      values[id] = std::move(grads);
    } else if (cat == OpCategory::Creation) {
      values[id] = {detail::create(n.op, n.attrs, n.type(), n.loc)};
    } else if (cat == OpCategory::Input) {
      throw Error("internal: unbound input in a gradient graph", n.loc);
    } else if (n.op == OpKind::add && !ops[0].defined() && !ops[1].defined()) {
      values[id] = {Tensor()};  // a sum of no terms
    } else if (n.op == OpKind::add && (!ops[0].defined() || !ops[1].defined()) &&
               (ops[0].defined() ? ops[0] : ops[1]).impl()->type == n.type()) {
      values[id] = {ops[0].defined() ? ops[0] : ops[1]};  // a sum of one term
    } else {
      materialize(ops, n);
      values[id] = {detail::apply(n.op, ops, n.attrs, n.loc)};
    }
    for (Value v : n.operands)
      if (v.node >= first && last_use[v.node] == id)
        for (Tensor& t : values[v.node]) t = Tensor();
  }
  std::vector<Tensor> out;
  for (Value v : wanted) out.push_back(values[v.node].at(v.index));
  return out;
}

// The nodes of `order` (topological, inputs first) that a backward to the
// tensors `wrt` (not empty) runs, in that order: those from which a wrt tensor
// is reached through their operands. A non-leaf wrt's own producer runs only if
// it leads to another. (A backward to every leaf runs all of `order`.)
std::vector<TapeNode*> nodes_run(const std::vector<TapeNode*>& order,
                                 const std::vector<Tensor>& wrt) {
  std::set<std::pair<const TapeNode*, uint32_t>> outputs;  // non-leaf targets
  std::unordered_set<const TensorImpl*> leaves;            // leaf targets
  for (const Tensor& w : wrt) {
    if (w.impl()->grad_fn)
      outputs.insert({w.impl()->grad_fn.get(), w.impl()->output_nr});
    else
      leaves.insert(w.impl());
  }
  std::unordered_set<const TapeNode*> ran;
  std::vector<TapeNode*> in_order;
  for (TapeNode* n : order)
    for (const TapeEdge& e : n->next)
      if ((e.leaf && leaves.count(e.leaf.get())) ||
          (e.fn && (outputs.count({e.fn.get(), e.output_nr}) || ran.count(e.fn.get())))) {
        ran.insert(n);
        in_order.push_back(n);
        break;
      }
  return in_order;
}

// Runs a backward from `roots` with incoming gradients `seeds`. `wrt` lists the
// tensors to differentiate with respect to (empty: all leaves reached, whose
// .grad() is accumulated, and which are added to `accumulated` when given).
// Returns the gradients for `wrt` (undefined when unreachable).
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                                 const std::vector<Tensor>& wrt, bool retain_graph,
                                 bool create_graph, SourceLoc loc,
                                 std::vector<Tensor>* accumulated = nullptr) {
  std::vector<TapeNode*> root_fns;
  for (const Tensor& r : roots) {
    detail::sync_view(*r.impl());
    root_fns.push_back(r.impl()->grad_fn.get());
  }
  for (const Tensor& w : wrt) detail::sync_view(*w.impl());
  std::vector<TapeNode*> order = topo_order(root_fns);

  Graph g;
  Builder b(g);
  std::vector<std::vector<Tensor>> values;
  std::unordered_map<const TensorImpl*, Value> leaf_values;
  std::unordered_map<TapeNode*, NodeId> node_ids;
  std::unordered_map<Value, std::vector<SavedUse>, ValueHash>
      saved_at;                                     // forward value -> what holds it
  std::vector<std::shared_ptr<TensorImpl>> leaves;  // in discovery order
  int64_t next_arg = 0;

  auto bind = [&](Value v, Tensor t) {
    if (values.size() <= v.node) values.resize(v.node + 1);
    if (values[v.node].size() <= v.index) values[v.node].resize(v.index + 1);
    values[v.node][v.index] = std::move(t);
  };
  auto leaf_value = [&](const std::shared_ptr<TensorImpl>& leaf) {
    auto it = leaf_values.find(leaf.get());
    if (it != leaf_values.end()) return it->second;
    Value v = b.arg(next_arg++, leaf->type);
    leaf_values[leaf.get()] = v;
    leaves.push_back(leaf);
    bind(v, Tensor(leaf));
    return v;
  };

  for (TapeNode* n : order) {
    std::vector<Value> operands;
    for (size_t i = 0; i < n->next.size(); ++i) {
      const TapeEdge& e = n->next[i];
      const SavedTensor& in = n->inputs[i];
      if (e.fn) {
        operands.push_back(Value(node_ids.at(e.fn.get()), e.output_nr));
        saved_at[operands.back()].push_back({n, &in, static_cast<int64_t>(i)});
      } else if (e.leaf) {
        operands.push_back(leaf_value(e.leaf));
        saved_at[operands.back()].push_back({n, &in, static_cast<int64_t>(i)});
      } else {
        Value v = b.arg(next_arg++, in.type);
        bind(v, in.data ? Tensor(in.data) : Tensor());
        saved_at[v].push_back({n, &in, static_cast<int64_t>(i)});
        operands.push_back(v);
      }
    }
    b.loc = n->loc;
    NodeId id;
    if (n->op == OpKind::custom) {
      std::vector<TensorType> types;
      for (auto& s : n->outputs) types.push_back(s.type);
      id = b.op_multi(OpKind::custom, operands, n->attrs, types);
    } else {
      id = b.op(n->op, operands, n->attrs).node;
    }
    node_ids[n] = id;
    // Bind results: with create_graph they carry this node's history so the
    // gradient computation is itself recorded.
    std::shared_ptr<TapeNode> self_ptr;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const Value out(id, static_cast<uint32_t>(i));
      saved_at[out].push_back({n, &n->outputs[i], -1 - static_cast<int64_t>(i)});
      if (!n->outputs[i].data) {
        bind(out, Tensor());  // freed: an error if a gradient reads it (check_saved)
        continue;
      }
      auto alias = alias_of(*n->outputs[i].data);
      if (create_graph) {
        alias->requires_grad = true;
        alias->output_nr = static_cast<uint32_t>(i);
      }
      bind(out, Tensor(alias));
    }
  }
  // With create_graph, forward values must carry their grad_fn; patch them now
  // that every node has an id (grad_fn pointers come from the consumers' edges).
  if (create_graph) {
    for (TapeNode* n : order)
      for (const TapeEdge& e : n->next)
        if (e.fn) {
          Tensor& t = values[node_ids.at(e.fn.get())][e.output_nr];
          if (t.defined()) t.impl()->grad_fn = e.fn;
        }
    for (size_t r = 0; r < roots.size(); ++r)
      if (auto& fn = roots[r].impl()->grad_fn) {
        Tensor& t = values[node_ids.at(fn.get())][roots[r].impl()->output_nr];
        if (t.defined()) t.impl()->grad_fn = fn;
      }
  }

  std::vector<Value> outs, seed_vals;
  for (size_t r = 0; r < roots.size(); ++r) {
    const TensorImpl& ri = *roots[r].impl();
    Value out = ri.grad_fn ? Value(node_ids.at(ri.grad_fn.get()), ri.output_nr)
                           : leaf_value(roots[r].impl_ptr());
    outs.push_back(out);
    Value s = b.arg(next_arg++, seeds[r].impl()->type);
    bind(s, seeds[r]);
    seed_vals.push_back(s);
  }

  std::vector<Value> wrt_vals;
  std::vector<bool> reachable;
  if (wrt.empty()) {
    for (auto& l : leaves) wrt_vals.push_back(leaf_values.at(l.get()));
  } else {
    for (const Tensor& w : wrt) {
      const TensorImpl& wi = *w.impl();
      if (wi.grad_fn && node_ids.count(wi.grad_fn.get())) {
        wrt_vals.push_back(Value(node_ids.at(wi.grad_fn.get()), wi.output_nr));
      } else if (leaf_values.count(&wi)) {
        wrt_vals.push_back(leaf_values.at(&wi));
      } else {
        wrt_vals.push_back(Value());
      }
    }
  }
  std::vector<Value> present;
  for (Value v : wrt_vals)
    if (v.valid()) present.push_back(v);

  size_t forward_size = g.size();
  std::vector<Value> grads =
      build_gradients(b, outs, seed_vals, present, detail::custom_function_vjp());
  values.resize(g.size());
  // Only the forward values the gradient reads must be intact (as in PyTorch:
  // an op that saved nothing it needs can be differentiated again, or after
  // an in-place write to its operands).
  auto need = [&](Value v) {
    if (v.node >= forward_size) return;
    auto it = saved_at.find(v);
    if (it == saved_at.end()) return;
    // A copy kept before an in-place write (keep_overwritten) is what the op
    // that kept it reads; every other use saved of the overwritten value is
    // stale, an error if its gradient reads it (as in PyTorch, where only the
    // in-place op's original self survives the write).
    const SavedTensor* kept = nullptr;
    for (const SavedUse& u : it->second) {
      const SavedTensor& s = *u.saved;
      if (s.kept_from != UINT64_MAX && s.data && s.data->buffer->version == s.version) kept = &s;
    }
    for (const SavedUse& u : it->second) {
      const SavedTensor& s = *u.saved;
      if (s.data && s.data->buffer->version == s.version) continue;
      check_saved(u);
    }
    Tensor& cur = values[v.node][v.index];
    if (!kept && !cur.defined()) {
      // Its producer's copy was freed by an earlier backward that ran it, but
      // an op reading it saved its own (each PyTorch node saves its inputs).
      for (const SavedUse& u : it->second)
        if (u.which >= 0 && u.saved->data && u.saved->data->buffer->version == u.saved->version) {
          cur = Tensor(alias_of(*u.saved->data));
          break;
        }
    }
    if (!kept) return;
    auto copy = alias_of(*kept->data);
    if (cur.defined()) {  // keeps the history create_graph gave it
      copy->requires_grad = cur.impl()->requires_grad;
      copy->grad_fn = cur.impl()->grad_fn;
      copy->output_nr = cur.impl()->output_nr;
    }
    cur = Tensor(copy);
  };
  for (NodeId id = static_cast<NodeId>(forward_size); id < g.size(); ++id)
    for (Value v : g[id].operands) need(v);
  for (Value v : grads) need(v);

  // A leaf's gradient that is scatter_add(0, index, src) (a gather's or an
  // embedding's) is added into its .grad in place (zeros first when it has
  // none): no full-size temporary, sum or copy is made, as in the traced step
  // (simplify's add_scatter rule), with the same fold order per element.
  std::vector<detail::ScatterInto> into;
  if (wrt.empty() && !create_graph)
    into = detail::scatters_into_grads(g, forward_size, leaves, grads, values);

  std::vector<Tensor> results;
  {
    std::optional<NoGradGuard> no_grad;
    std::optional<EnableGradGuard> with_grad;
    if (create_graph)
      with_grad.emplace();
    else
      no_grad.emplace();
    std::vector<Value> keep;  // the scatters' operands, read after evaluate()
    for (const detail::ScatterInto& s : into)
      keep.insert(keep.end(), g[s.node].operands.begin(), g[s.node].operands.end());
    results = evaluate(g, values, forward_size, grads, keep);
  }

  if (!retain_graph && !t_retain_graphs) {
    auto release = [](TapeNode* n) {
      if (n->custom) n->custom->released = true;
      for (SavedTensor& s : n->inputs) s.data = nullptr;
      for (SavedTensor& s : n->outputs) s.data = nullptr;
    };
    if (wrt.empty()) {
      for (TapeNode* n : order) release(n);
    } else {
      for (TapeNode* n : nodes_run(order, wrt)) release(n);  // the others are kept, as PyTorch's
    }
  }

  std::vector<Tensor> per_wrt;
  size_t j = 0;
  for (Value v : wrt_vals) per_wrt.push_back(v.valid() ? results[j++] : Tensor());
  if (!wrt.empty()) return per_wrt;

  detail::accumulate_grads(g, values, into, leaves, per_wrt, create_graph, accumulated);
  return {};
}

}  // namespace

bool grad_mode_enabled() {
  return t_grad_mode;
}
void set_grad_mode(bool enabled) {
  t_grad_mode = enabled;
}

namespace detail {

RetainGraphsGuard::RetainGraphsGuard() : prev_(t_retain_graphs) {
  t_retain_graphs = true;
}
RetainGraphsGuard::~RetainGraphsGuard() {
  t_retain_graphs = prev_;
}

void record_op(OpKind op, const Attrs& attrs, SourceLoc loc, const std::vector<Tensor>& inputs,
               const std::vector<Tensor>& outputs, std::shared_ptr<autograd::CustomCall> custom) {
  if (!t_grad_mode) return;
  bool any = false;
  for (const Tensor& t : inputs) {
    // Every view brought up to date (not only until one requires grad): its
    // edge below must follow its base's latest history.
    detail::sync_view(*t.impl());
    any = any || t.impl()->requires_grad;
  }
  if (!any) return;
  if (op != OpKind::custom && !op_info(op).differentiable) return;
  static std::atomic<uint64_t> next_seq{0};
  auto node = std::make_shared<TapeNode>();
  node->seq = next_seq.fetch_add(1, std::memory_order_relaxed);
  node->op = op;
  node->attrs = attrs;
  node->loc = loc;
  node->custom = std::move(custom);
  for (const Tensor& t : inputs) {
    const auto& impl = t.impl_ptr();
    TapeEdge e;
    if (impl->grad_fn) {
      e.fn = impl->grad_fn;
      e.output_nr = impl->output_nr;
    } else if (impl->requires_grad) {
      e.leaf = impl;
    }
    node->next.push_back(std::move(e));
    node->inputs.push_back(save(t));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl& o = *outputs[i].impl();
    node->outputs.push_back(save(outputs[i]));
    if (!is_floating(o.type.dtype)) continue;
    o.requires_grad = true;
    o.grad_fn = node;
    o.output_nr = static_cast<uint32_t>(i);
  }
}

const CustomVjp& custom_function_vjp() {
  static const CustomVjp vjp = custom_backward_vjp;
  return vjp;
}

std::vector<std::shared_ptr<TensorImpl>> history_leaves(std::vector<const TapeNode*> roots) {
  std::vector<std::shared_ptr<TensorImpl>> leaves;
  std::unordered_set<const TapeNode*> seen;
  std::unordered_set<const TensorImpl*> seen_leaves;
  while (!roots.empty()) {
    const TapeNode* n = roots.back();
    roots.pop_back();
    if (!n || !seen.insert(n).second) continue;
    for (const TapeEdge& e : n->next) {
      if (e.leaf && seen_leaves.insert(e.leaf.get()).second) leaves.push_back(e.leaf);
      roots.push_back(e.fn.get());
    }
  }
  return leaves;
}

Error modified_saved_error(OpKind op, uint64_t expected, uint64_t found, SourceLoc loc) {
  return Error(std::string("a tensor needed for the gradient of '") + op_name(op) +
                   "' was modified by an in-place operation after it was used (expected version " +
                   std::to_string(expected) + ", found version " + std::to_string(found) + ")",
               loc);
}

Error freed_graph_error(OpKind op, SourceLoc loc) {
  return Error(std::string("backward through the graph a second time: the tensors saved by '") +
                   op_name(op) +
                   "' were freed by the first backward (expected backward(..., "
                   "retain_graph=true) the first time)",
               loc);
}

void keep_overwritten(const TensorImpl& value, const TensorImpl& target) {
  TapeNode* n = value.grad_fn.get();
  if (!n || !target.buffer || n->inputs.empty()) return;
  // Only the operand the write replaces, `self` (operand 0 of the op an in-place
  // method computes): x.mul_(y) reads x for y's gradient, and keeps its old
  // value as PyTorch keeps original self. Another operand sharing the storage
  // (x.mul_(x)'s second x) is saved as it is, and goes stale, as in PyTorch.
  SavedTensor& s = n->inputs[0];
  if (!s.data || s.data->buffer != target.buffer || s.data->buffer->version != s.version ||
      !tape_vjp_reads(*n, 0))
    return;
  auto copy = make_dense(s.data->type);
  device_copy(s.data->view(), *copy, n->loc);
  s.data = copy;
  s.kept_from = s.version;
  s.version = copy->buffer->version;
}

}  // namespace detail

namespace autograd::detail {

std::shared_ptr<CustomCall> new_custom_call(std::string name) {
  // Not make_shared: the registry's weak_ptr would keep the call's memory too.
  std::shared_ptr<CustomCall> call(new CustomCall(), [](CustomCall* c) {
    {
      CustomRegistry& r = custom_registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.calls.erase(c->id);
    }
    delete c;  // unlocked: what the call holds may end other calls
  });
  call->name = std::move(name);
  CustomRegistry& r = custom_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  call->id = r.next++;
  r.calls[call->id] = call;
  return call;
}

size_t live_custom_calls() {
  CustomRegistry& r = custom_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.calls.size();
}

std::vector<Tensor> finish_custom(const std::shared_ptr<CustomCall>& call,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& outputs, SourceLoc loc) {
  for (const Tensor& t : inputs) call->input_types.push_back(t.impl()->type);
  if (TraceState* tr = current_trace()) {
    // One node whose operands are the inputs and the forward's results; its
    // backward is the user's, traced when autodiff reaches it.
    std::vector<Value> operands;
    bool requires_grad = false;
    for (const Tensor& t : inputs) {
      operands.push_back(tr->value_of(t, loc));
      requires_grad = requires_grad || t.requires_grad();
    }
    std::vector<TensorType> types;
    for (const Tensor& o : outputs) {
      operands.push_back(tr->value_of(o, loc));
      types.push_back(o.impl()->type);
    }
    Attrs attrs{{AttrKey::fn, call->id}, {AttrKey::name, std::string("traced")}};
    NodeId id;
    {
      LocScope at(tr->builder, loc);
      id = tr->builder.op_multi(OpKind::custom, operands, attrs, types);
    }
    tr->custom_calls.push_back(call);
    std::vector<Tensor> outs;
    for (uint32_t i = 0; i < types.size(); ++i)
      outs.push_back(tr->wrap(Value(id, i), requires_grad && grad_mode_enabled()));
    return outs;
  }
  // Outputs must be fresh tensors with no history of their own.
  std::vector<Tensor> outs;
  for (const Tensor& o : outputs) outs.push_back(o.detach());
  ::kiln::detail::record_op(OpKind::custom, Attrs{{AttrKey::fn, call->id}}, loc, inputs, outs,
                            call);
  return outs;
}

std::vector<Tensor> per_tensor_gradients(std::vector<Tensor> grads,
                                         const std::vector<bool>& is_tensor) {
  const size_t tensors = static_cast<size_t>(std::count(is_tensor.begin(), is_tensor.end(), true));
  if (grads.size() == tensors || grads.size() < is_tensor.size()) return grads;
  for (size_t i = is_tensor.size(); i < grads.size(); ++i)
    if (grads[i].defined()) return grads;  // not libtorch's form either: the count check reports it
  std::vector<Tensor> out;
  for (size_t i = 0; i < is_tensor.size(); ++i)
    if (is_tensor[i]) out.push_back(grads[i]);
  return out;
}

}  // namespace autograd::detail

namespace {
std::mutex g_hooks_mu;
std::vector<std::pair<int, autograd::PostBackwardHook>> g_post_backward_hooks;
int g_next_hook = 1;

void run_post_backward_hooks(SourceLoc loc, const std::vector<Tensor>& accumulated) {
  std::vector<autograd::PostBackwardHook> hooks;
  {
    std::lock_guard<std::mutex> lock(g_hooks_mu);
    for (auto& h : g_post_backward_hooks) hooks.push_back(h.second);
  }
  for (auto& h : hooks) h(loc, accumulated);
}
}  // namespace

int autograd::add_post_backward_hook(PostBackwardHook fn) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  g_post_backward_hooks.emplace_back(g_next_hook, std::move(fn));
  return g_next_hook++;
}

void autograd::remove_post_backward_hook(int id) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  std::erase_if(g_post_backward_hooks, [&](const auto& h) { return h.first == id; });
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph, Loc l) const {
  SourceLoc loc = SourceLoc::from(l);
  if (!defined()) throw Error("backward() on an undefined tensor", loc);
  if (!requires_grad())
    throw Error(
        "backward() on a tensor that does not require grad and has no grad_fn "
        "(expected a result of ops on tensors created with requires_grad(true))",
        loc);
  Tensor seed = gradient;
  if (!seed.defined()) {
    if (numel() != 1)
      throw Error("backward() without a gradient needs a scalar (one element) but got shape " +
                      shape_str(sizes()) + " (expected backward(gradient) for non-scalar outputs)",
                  loc);
    seed = ones(sizes(), TensorOptions(dtype()).device(device()));
  } else if (seed.sizes() != sizes()) {
    throw Error("backward(): gradient of shape " + shape_str(seed.sizes()) +
                    " does not match the tensor's shape " + shape_str(sizes()),
                loc);
  }
  std::vector<Tensor> accumulated;
  if (TraceState* tr = current_trace()) {
    tr->backward({*this}, {seed}, {}, /*accumulate=*/true, retain_graph || create_graph,
                 create_graph, loc, &accumulated);
  } else {
    // As in PyTorch, create_graph implies retain_graph.
    run_backward({*this}, {seed}, {}, retain_graph || create_graph, create_graph, loc,
                 &accumulated);
  }
  run_post_backward_hooks(loc, accumulated);
}

std::vector<Tensor> autograd::grad(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& grad_outputs, bool retain_graph,
                                   bool create_graph, bool allow_unused, Loc l) {
  SourceLoc loc = SourceLoc::from(l);
  std::vector<Tensor> seeds = grad_outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].requires_grad())
      throw Error("autograd::grad: output " + std::to_string(i) + " does not require grad", loc);
    if (seeds.size() <= i) {
      if (outputs[i].numel() != 1)
        throw Error("autograd::grad: output " + std::to_string(i) + " has shape " +
                        shape_str(outputs[i].sizes()) +
                        " (expected a scalar, or pass grad_outputs)",
                    loc);
      seeds.push_back(ones(outputs[i].sizes(), TensorOptions(outputs[i].dtype())));
    }
  }
  std::vector<Tensor> result;
  if (TraceState* tr = current_trace())
    result = tr->backward(outputs, seeds, inputs, /*accumulate=*/false,
                          retain_graph || create_graph, create_graph, loc);
  else
    result = run_backward(outputs, seeds, inputs, retain_graph || create_graph, create_graph, loc);
  for (size_t i = 0; i < result.size(); ++i)
    if (!result[i].defined() && !allow_unused)
      throw Error("autograd::grad: input " + std::to_string(i) +
                      " was not used to compute the outputs (pass allow_unused=true)",
                  loc);
  return result;
}

}  // namespace kiln
