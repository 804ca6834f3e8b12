// The per-thread current trace and how operands enter it.
#include "frontend/trace_state.h"

#include "frontend/tensor_impl.h"

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
    return impl.value;
  }
  auto it = param_index.find(&impl);
  if (it != param_index.end()) {
    auto cur = param_current.find(it->second);
    if (cur != param_current.end()) return cur->second;
    for (NodeId id : graph.params())
      if (graph[id].attrs.i(AttrKey::index) == it->second) return Value(id);
  }
  // A tensor captured from outside: a parameter, read by reference at every call.
  int64_t index = static_cast<int64_t>(params.size());
  params.push_back(t.impl_ptr());
  param_index[&impl] = index;
  SourceLoc saved = builder.loc;
  builder.loc = loc;
  Value v = builder.param(index, impl.type);
  builder.loc = saved;
  return v;
}

Tensor TraceState::wrap(Value v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = graph.type(v);
  impl->strides = contiguous_strides(impl->type.shape);
  impl->trace = this;
  impl->value = v;
  return Tensor(std::move(impl));
}

}  // namespace kiln
