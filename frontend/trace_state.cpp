// The per-thread current trace and how operands enter it.
#include "frontend/trace_state.h"

#include <algorithm>

#include "frontend/alias.h"
#include "frontend/autograd.h"
#include "frontend/tensor_impl.h"
#include "passes/autodiff.h"
#include "passes/grad_analysis.h"
#include "passes/rebuild_on_device.h"

namespace kiln {
namespace {
thread_local TraceState* t_current = nullptr;
}

TraceState* current_trace() { return t_current; }

TraceScope::TraceScope(TraceState* t) : prev_(t_current) { t_current = t; }
TraceScope::~TraceScope() { t_current = prev_; }

Value TraceState::value_of(const Tensor& t, SourceLoc loc) {
  const TensorImpl& impl = *t.impl();
  if (impl.symbolic()) {
    if (impl.trace != this)
      throw Error("a symbolic tensor from another trace was used here (expected a tensor of this "
                  "trace or a tensor with data)",
                  loc);
    detail::sync_view(*t.impl());
    return impl.value;
  }
  auto it = param_index.find(&impl);
  if (it != param_index.end()) {
    auto cur = param_current.find(it->second);
    if (cur != param_current.end()) return cur->second;
    if (Value v = graph.param_value(it->second)) return v;
  }
  // A tensor captured from outside: a parameter, read by reference at every call.
  int64_t index = static_cast<int64_t>(params.size());
  params.push_back(t.impl_ptr());
  param_index[&impl] = index;
  LocScope at(builder, loc);
  return builder.param(index, impl.type);
}

Tensor TraceState::moved_to(const Tensor& t, Device device, SourceLoc loc) {
  const TensorImpl& impl = *t.impl();
  const std::string what = "to(" + device.str() + ") inside a traced function";
  if (!impl.symbolic())
    throw Error(what + " of a tensor with data on " + impl.type.device.str() +
                    ": every call would read the copy made while tracing, not the tensor (expected "
                    "it on " + device.str() + " already: move it with .to() before the call)",
                loc);
  const Value v = value_of(t, loc);
  LocScope at(builder, loc);
  const Value moved = rebuild_on_device(builder, v, device);
  if (!moved)
    throw Error(what + ": a compiled graph runs on one device, and this value is computed on " +
                    impl.type.device.str() + " from the function's arguments or captured tensors " +
                    "(expected them on " + device.str() + ": move them with .to() before the call)",
                loc);
  return wrap(moved, impl.requires_grad);
}

bool TraceState::requires_grad(const TensorImpl& t) const {
  if (t.symbolic()) return t.requires_grad;
  auto it = taped_writes.find(&t);
  return it == taped_writes.end() ? t.requires_grad : it->second;
}

Value TraceState::op_at(SourceLoc loc, OpKind k, std::vector<Value> operands) {
  LocScope at(builder, loc);
  return builder.op(k, std::move(operands), {});
}

Tensor TraceState::wrap(Value v, bool requires_grad) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = graph.type(v);
  impl->strides = contiguous_strides(impl->type.shape);
  impl->trace = this;
  impl->value = v;
  impl->requires_grad = requires_grad;
  return Tensor(std::move(impl));
}

Tensor TraceState::add_arg(int64_t index, const TensorType& t, bool requires_grad, bool computed) {
  Tensor a = wrap(builder.arg(index, t), requires_grad);
  args.push_back(a.impl_ptr());
  arg_leaf.push_back(requires_grad);
  arg_computed.push_back(requires_grad && computed);
  return a;
}

bool TraceState::is_grad_leaf(const TensorImpl& t) const {
  if (!t.symbolic()) return t.requires_grad && !t.grad_fn;
  const int64_t a = arg_position(&t);
  return a >= 0 && arg_leaf[static_cast<size_t>(a)] && !arg_computed[static_cast<size_t>(a)];
}

int64_t TraceState::arg_position(const TensorImpl* t) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].get() == t) return static_cast<int64_t>(i);
  return -1;
}

Tensor TraceState::grad_of(const Tensor& t, SourceLoc loc, bool user_read) {
  const TensorImpl* key = t.impl();
  auto it = grads.find(key);
  // An argument's gradient inside the trace starts from none; the call adds it
  // to the argument's .grad afterwards. A read before the user assigned it
  // would miss a gradient from before the call, so the call checks there is none.
  if (user_read && !key->symbolic()) captured_grads_read.insert(key);
  const int64_t arg = user_read ? arg_position(key) : -1;
  if (arg >= 0 && (it == grads.end() || !it->second.assigned) &&
      std::find(arg_grads_read.begin(), arg_grads_read.end(), arg) == arg_grads_read.end())
    arg_grads_read.push_back(arg);
  if (it != grads.end()) return it->second.current;
  if (key->symbolic() || !key->grad) return Tensor();
  // A gradient accumulated before the call: read it as a parameter.
  GradSlot slot{.owner = t.impl_ptr(), .initial = key->grad};
  if (known_zero(*key->grad)) {
    // Zeros a compiled plan left (zero_() at the end of a traced step): a constant,
    // under a guard that nothing has written the buffer since.
    slot.initial_zero = true;
    const TensorType& gt = key->grad->type;
    LocScope at(builder, loc);
    slot.current = wrap(builder.constant(0.0, gt.dtype, gt.shape, gt.device));
  } else {
    slot.initial_value = value_of(Tensor(key->grad), loc);
    slot.current = wrap(slot.initial_value);
  }
  grads[key] = slot;
  return slot.current;
}

void TraceState::set_grad(const Tensor& t, const Tensor& g, bool assigned) {
  const TensorImpl* key = t.impl();
  GradSlot fresh{.owner = t.impl_ptr(), .initial = key->symbolic() ? nullptr : key->grad};
  GradSlot& slot = grads.try_emplace(key, std::move(fresh)).first->second;
  slot.current = g;
  slot.assigned = slot.assigned || assigned;
}

namespace {

// Every leaf that requires grad: the arguments called so, then the captured tensors.
std::vector<Tensor> grad_leaves(const TraceState& st) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < st.args.size(); ++i)
    if (st.arg_leaf[i]) leaves.emplace_back(st.args[i]);
  for (auto& p : st.params)
    if (p->requires_grad) leaves.emplace_back(p);
  return leaves;
}

}  // namespace

std::vector<Tensor> TraceState::backward(const std::vector<Tensor>& roots,
                                         const std::vector<Tensor>& seeds,
                                         const std::vector<Tensor>& wrt, bool accumulate,
                                         bool retain_graph, bool create_graph, SourceLoc loc,
                                         std::vector<Tensor>* accumulated) {
  std::vector<Value> root_vals, seed_vals;
  for (const Tensor& r : roots) root_vals.push_back(value_of(r, loc));
  for (const Tensor& s : seeds) seed_vals.push_back(value_of(s, loc));
  std::vector<char> param_requires;
  for (const auto& p : params) param_requires.push_back(p->requires_grad);
  const std::vector<char> rg = requiring_grad(graph, arg_leaf, param_requires);
  if (const NodeId n = freed_read(graph, root_vals, rg, &freed); n != kNoNode)
    throw detail::freed_graph_error(graph[n].op, graph[n].loc);
  if (const SavedValues::Stale s = saved.first_stale(graph, root_vals); s.node != kNoNode)
    throw detail::modified_saved_error(graph[s.node].op, s.expected, s.found, graph[s.node].loc);
  std::vector<char> reach = gradient_reach(graph, root_vals);
  if (!retain_graph) {
    freed.resize(graph.size(), 0);
    for (NodeId id = 0; id < reach.size(); ++id) freed[id] = freed[id] || (reach[id] && rg[id]);
  }

  // The tensors to differentiate with respect to, and their current values.
  const std::vector<Tensor> targets = wrt.empty() ? grad_leaves(*this) : wrt;
  std::vector<Tensor> used;
  std::vector<Value> wrt_vals;
  for (const Tensor& t : targets) {
    // An argument's or captured tensor's gradient is taken at the value the
    // body first read (a write under NoGradGuard passes the gradients of later
    // uses back to it through rebind), except that autograd::grad with respect
    // to a tensor given a new history by a write with grad on differentiates
    // its new value, as eagerly.
    const bool new_history = !wrt.empty() && taped_writes.count(t.impl());
    const int64_t a = arg_position(t.impl());
    Value v;
    if (!new_history && a >= 0)
      v = Value(graph.args()[static_cast<size_t>(a)]);
    else if (auto p = param_index.find(t.impl()); !new_history && p != param_index.end())
      v = graph.param_value(p->second);
    if (!v.valid()) v = value_of(t, loc);
    // A tensor no gradient of the roots reaches gets none (an undefined tensor).
    used.push_back(reach[v.node] ? t : Tensor());
    if (reach[v.node]) wrt_vals.push_back(v);
  }
  LocScope at(builder, loc);  // the gradients, and what the rest adds, are recorded at `loc`
  const std::vector<Value> grads_v =
      build_gradients(builder, root_vals, seed_vals, wrt_vals, detail::custom_function_vjp());

  std::vector<Tensor> result(used.size());
  size_t k = 0;
  for (size_t i = 0; i < used.size(); ++i) {
    const Tensor& t = used[i];
    if (!t.defined()) continue;
    // Without create_graph a gradient is data, as eagerly: x.grad() read in the
    // body, or a result of autograd::grad, passes no gradient on itself.
    Value gv = grads_v[k++];
    if (!create_graph) gv = op_at(loc, OpKind::detach, {gv});
    Tensor g = wrap(gv, create_graph);
    if (accumulate) {
      Tensor cur = grad_of(t, loc, /*user_read=*/false);
      if (cur.defined()) g = wrap(op_at(loc, OpKind::add, {value_of(cur, loc), value_of(g, loc)}), create_graph);
      set_grad(t, g, /*assigned=*/false);
      if (accumulated) accumulated->push_back(t);
    }
    result[i] = g;
  }
  return result;
}

std::shared_ptr<TensorImpl> TraceState::storage_of(const std::shared_ptr<TensorImpl>& t) {
  return t->symbolic() && t->alias ? t->alias->base : t;
}

void TraceState::record_saved(NodeId id, const std::vector<Tensor>& operands, const Tensor& result) {
  std::vector<SavedValues::Storage> storages;
  std::vector<bool> needs;
  for (const Tensor& o : operands) {
    storages.push_back(storage_of(o.impl_ptr()));
    needs.push_back(requires_grad(*o.impl()));
  }
  saved.record(id, storages, storage_of(result.impl_ptr()), std::move(needs));
}

void TraceState::keep_overwritten(const Tensor& value, const TensorImpl& target, SourceLoc loc) {
  if (!value.impl()->symbolic()) return;
  const TensorImpl* s = target.symbolic() && target.alias ? target.alias->base.get() : &target;
  saved.keep_overwritten(value_of(value, loc).node, s);
}

void guard_constants(std::weak_ptr<const void> alive, std::function<std::vector<double>()> read,
                     std::string what, std::vector<std::string> names) {
  TraceState* st = current_trace();
  if (!st) return;
  std::vector<double> now = read();
  st->constant_guards.push_back(
      ConstantGuard{std::move(alive), std::move(read), std::move(now), std::move(what), std::move(names)});
}

void sync_before_call(std::weak_ptr<const void> alive, std::function<void()> sync) {
  if (TraceState* st = current_trace())
    st->host_syncs.push_back(HostSync{std::move(alive), std::move(sync)});
}

}  // namespace kiln
