// What a traced call writes besides its outputs, collected when it is built:
// parameter updates, .grad write-backs, in-place writes to arguments, and the
// history that written tensors take (declared in jit_entry.h).
#include <algorithm>

#include "frontend/autograd.h"
#include "frontend/jit_entry.h"
#include "frontend/trace_state.h"

namespace kiln::detail {
namespace {

// Makes `v` the plan's next output; returns its index.
size_t add_output(TraceState& st, Value v) {
  st.graph.outputs.push_back(v);
  return st.graph.outputs.size() - 1;
}

// An argument's gradient from backward() inside the trace: a plan output that
// the call adds to (or, when the body assigned it, stores as) the argument's .grad.
void collect_arg_grad(TraceState& st, const TensorImpl* key, const GradSlot& slot,
                      TracedProgram& prog) {
  const int64_t arg = st.arg_position(key);
  if (arg < 0) return;  // an intermediate's .grad lives and dies inside the trace
  if (!slot.current.defined()) {
    if (slot.assigned) prog.grad_writebacks.push_back({{nullptr, arg}, GradWriteback::Clear});
    return;
  }
  const auto kind = slot.assigned ? GradWriteback::FromOutput : GradWriteback::AddOutput;
  const size_t output = add_output(st, st.value_of(slot.current, SourceLoc()));
  prog.grad_writebacks.push_back({{nullptr, arg}, kind, output});
}

// A captured tensor's gradient goes on through its eager history only after
// the call: the body must not read .grad() of a leaf that history reaches (an
// optimizer step would miss that part of the gradient, silently).
void check_history_grads_unread(const TraceState& st, const TensorImpl& t, SourceLoc where) {
  for (const auto& leaf : history_leaves({t.grad_fn.get()}))
    if (st.captured_grads_read.count(leaf.get()))
      throw Error("traced function: backward() inside it reaches a captured tensor computed by eager "
                  "ops before the call, whose history leads to a tensor whose .grad() the function "
                  "reads (an optimizer step reads it): the compiled call sends that gradient through "
                  "the eager history only after it returns, so the read would miss it (expected the "
                  "captured tensor detach()ed, or computed inside the traced function)",
                  where);
}

}  // namespace

void collect_grad_writebacks(TraceState& st, TracedProgram& prog, std::vector<GradGuard>& guards,
                             SourceLoc where) {
  for (auto& [p, v] : st.param_current) st.graph.updates.push_back(ParamUpdate{p, v});
  // Gradients of captured tensors are state: write them back after the call.
  for (auto& [key, slot] : st.grads) {
    if (key->symbolic()) {
      collect_arg_grad(st, key, slot, prog);
      continue;
    }
    if (!slot.owner) continue;
    if (slot.owner->grad_fn && !slot.assigned) {
      // A captured tensor computed by eager ops: as eager backward() would, the
      // call sends its gradient on through the ops that made it.
      if (!slot.current.defined()) continue;
      check_history_grads_unread(st, *slot.owner, where);
      const size_t output = add_output(st, st.value_of(slot.current, where));
      prog.grad_writebacks.push_back({{slot.owner}, GradWriteback::AddOutput, output});
      continue;
    }
    guards.push_back(GradGuard{slot.owner, slot.initial.get(), slot.initial_zero});
    if (!slot.current.defined()) {
      if (slot.initial) prog.grad_writebacks.push_back({{slot.owner}, GradWriteback::Clear});
      continue;
    }
    Value fv = st.value_of(slot.current, where);
    const bool final_zero = st.graph.is_zero_constant(fv);
    if (slot.initial && slot.initial_value.valid() && fv == slot.initial_value) continue;
    if (slot.initial && slot.initial_zero && final_zero) continue;  // zeros stay zeros: no write
    if (slot.initial) {
      st.value_of(Tensor(slot.initial), where);
      st.graph.updates.push_back(ParamUpdate{st.param_index.at(slot.initial.get()), fv});
      if (final_zero) prog.zero_after.push_back(slot.initial);
    } else {
      const size_t output = add_output(st, fv);
      if (final_zero) prog.zero_outputs.push_back(output);
      prog.grad_writebacks.push_back({{slot.owner}, GradWriteback::FromOutput, output});
    }
  }
  std::sort(st.graph.updates.begin(), st.graph.updates.end(),
            [](auto& a, auto& b) { return a.param < b.param; });
}

void collect_arg_writes(TraceState& st, TracedProgram& prog) {
  const std::vector<NodeId> called = st.graph.args();  // the values as called, in order
  for (size_t a = 0; a < st.args.size(); ++a)
    if (const Value now = st.args[a]->value; now != Value(called[a]))
      prog.arg_writes.push_back({static_cast<int64_t>(a), add_output(st, now)});
}

std::vector<Value> collect_histories(TraceState& st, TracedProgram& prog) {
  std::vector<Value> roots;
  auto add = [&](const TensorImpl* key, std::shared_ptr<TensorImpl> tensor, int64_t arg, Value now) {
    auto it = st.taped_writes.find(key);
    if (it == st.taped_writes.end()) return;
    prog.histories.push_back({{std::move(tensor), arg}, it->second});
    if (it->second) roots.push_back(now);
  };
  for (const auto& [a, o] : prog.arg_writes) {
    const auto& sym = st.args[static_cast<size_t>(a)];
    add(sym.get(), nullptr, a, sym->value);
  }
  for (size_t p = 0; p < st.params.size(); ++p) {
    auto it = st.param_current.find(static_cast<int64_t>(p));
    if (it != st.param_current.end()) add(st.params[p].get(), st.params[p], -1, it->second);
  }
  return roots;
}

}  // namespace kiln::detail
