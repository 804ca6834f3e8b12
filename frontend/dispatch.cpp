// The dispatcher: eager execution (views, reference kernels, tape recording)
// and trace recording, behind one apply().
#include "frontend/dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "frontend/alias.h"
#include "frontend/autograd.h"
#include "frontend/device_ops.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "ir/decompose.h"
#include "runtime/reference.h"
#include "runtime/scope_exit.h"

namespace kiln {

std::shared_ptr<TensorImpl> make_dense(const TensorType& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = t;
  impl->strides = contiguous_strides(t.shape);
  impl->buffer = std::make_shared<Buffer>();
  size_t bytes = static_cast<size_t>(t.bytes());
  impl->buffer->storage = Storage::allocate(bytes == 0 ? 1 : bytes, t.device);
  return impl;
}

std::shared_ptr<TensorImpl> make_view(const TensorImpl& base, Shape shape, Strides strides,
                                      int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->buffer = base.buffer;
  impl->offset = offset;
  impl->type = TensorType{base.type.dtype, std::move(shape), base.type.device};
  impl->strides = std::move(strides);
  return impl;
}

namespace detail {
namespace {

void check_operand(OpKind k, const Tensor& t, size_t i, SourceLoc loc) {
  if (!t.defined())
    throw Error(std::string(op_name(k)) + ": operand " + std::to_string(i) +
                    " is an undefined tensor (expected a tensor with data)",
                loc);
}

[[noreturn]] void symbolic_outside_trace(OpKind k, SourceLoc loc) {
  throw Error(std::string(op_name(k)) +
                  ": a symbolic tensor from a trace was used outside it (expected a tensor "
                  "with data; return values from the traced function instead of keeping "
                  "tensors created inside it)",
              loc);
}

Tensor trace_apply(TraceState& tr, OpKind k, const std::vector<Tensor>& operands, Attrs attrs,
                   SourceLoc loc) {
  std::vector<Value> vals;
  vals.reserve(operands.size());
  bool requires_grad = false;
  for (size_t i = 0; i < operands.size(); ++i) {
    check_operand(k, operands[i], i, loc);
    vals.push_back(tr.value_of(operands[i], loc));
    requires_grad = requires_grad || tr.requires_grad(*operands[i].impl());
  }
  const bool movement = op_info(k).category == OpCategory::Movement;
  Attrs view_attrs = movement ? attrs : Attrs();
  // Each recorded op is a node of its own, as each eager op is a tape node of
  // its own (Builder::hash_cons).
  Value v;
  LocScope at(tr.builder, loc);
  {
    tr.builder.hash_cons = false;
    const ScopeExit restore([&] { tr.builder.hash_cons = true; });
    v = tr.builder.op(k, std::move(vals), std::move(attrs));
  }
  const bool floating = is_floating(tr.graph.type(v).dtype);
  const bool recorded = grad_mode_enabled() && op_info(k).differentiable && floating;
  // Eager mode records no tape for an op under NoGradGuard: gradients must not
  // flow through it here either, so its result is cut off as detach() would.
  if (requires_grad && !recorded && floating) v = tr.builder.op(OpKind::detach, {v}, {});
  Tensor result = tr.wrap(v, requires_grad && recorded);
  if (requires_grad && recorded) tr.record_saved(v.node, operands, result);
  if (movement) {
    // Where eager mode would make a view, the result aliases its operand: it
    // gets the strides eager mode would give it, and a write into either
    // reaches the other (alias.h).
    const TensorImpl& in = *operands[0].impl();
    ViewGeometry g;
    if (k == OpKind::detach) {
      result.impl()->strides = in.strides;
      link_view(operands[0], k, view_attrs, result);
    } else if (view_geometry(k, view_attrs, in.type.shape, in.strides, &g)) {
      result.impl()->strides = std::move(g.strides);
      link_view(operands[0], k, view_attrs, result);
    }
  }
  return result;
}

// A composite's ops (ops.def's decomp), each applied as the user's own call
// would be: eagerly run and taped, or recorded in the trace.
class TensorExpander final : public Expander<Tensor> {
 public:
  explicit TensorExpander(SourceLoc loc) : loc_(loc) {}
  Tensor op(OpKind k, std::vector<Tensor> operands) override {
    return apply(k, operands, {}, loc_);
  }
  Tensor number(const Tensor& like, double c) override { return scalar_operand(like, Scalar(c), loc_); }

 private:
  SourceLoc loc_;
};

// Composite k on the operands, after its type check (errors name it).
Tensor apply_composite(OpKind k, const std::vector<Tensor>& operands, SourceLoc loc) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    check_operand(k, operands[i], i, loc);
    types.push_back(operands[i].impl()->type);
  }
  try {
    (void)infer_type(k, types, {});
  } catch (Error& e) {
    e.attach(loc, op_name(k));
    throw;
  }
  TensorExpander e(loc);
  return expand_composite<Tensor>(k, e, operands);
}

}  // namespace

const TensorType& type_of(const Tensor& t) { return t.impl()->type; }

void check_size_static(const char* op, const char* what, Loc l) {
  if (current_trace())
    throw Error(std::string(op) + ": " + what +
                    " decides the result's size, which a traced function cannot have (its plan has "
                    "static shapes, as jax.jit's): call " + op + " outside the traced function",
                here(l));
}

int64_t checked_dim(int64_t dim, int64_t rank, const char* op, Loc l) {
  try {
    return normalize_dim(dim, rank);
  } catch (Error& e) {
    e.attach(here(l), op);
    throw;
  }
}

std::vector<int64_t> checked_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op,
                                  Loc l) {
  try {
    return normalize_dims(dims, rank);
  } catch (Error& e) {
    e.attach(here(l), op);
    throw;
  }
}

namespace {

// PyTorch's rule for mixed devices: a 0-dim CPU tensor joins an elementwise op
// whose other operands are on one other device, as a number would. It is
// copied there first (a differentiable copy: its gradient comes back to the
// CPU). Returns false, leaving `moved` alone, when no operand needs it.
bool scalars_to_device(OpKind k, const std::vector<Tensor>& operands, std::vector<Tensor>* moved,
                       SourceLoc loc) {
  if (!is_elementwise(k) || operands.size() < 2) return false;
  std::optional<Device> other;
  bool any_scalar = false;
  for (const Tensor& t : operands) {
    if (!t.defined()) return false;
    const TensorType& ty = t.impl()->type;
    if (ty.device.is_cpu() && ty.shape.empty())
      any_scalar = true;
    else if (!other)
      other = ty.device;
    else if (*other != ty.device)
      return false;  // the type rule names the mismatch
  }
  if (!any_scalar || !other || other->is_cpu()) return false;
  *moved = operands;
  for (Tensor& t : *moved)
    if (t.impl()->type.device.is_cpu() && t.impl()->type.shape.empty())
      t = device_transfer(t, *other, loc);
  return true;
}

}  // namespace

Tensor apply(OpKind k, const std::vector<Tensor>& operands, Attrs attrs, SourceLoc loc) {
  // The same expansion eagerly and in a trace, so both run the same ops.
  if (is_composite(k)) return apply_composite(k, operands, loc);
  if (std::vector<Tensor> moved; scalars_to_device(k, operands, &moved, loc))
    return apply(k, moved, std::move(attrs), loc);
  if (TraceState* tr = current_trace()) return trace_apply(*tr, k, operands, std::move(attrs), loc);

  std::vector<TensorType> types;
  types.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    check_operand(k, operands[i], i, loc);
    if (operands[i].impl()->symbolic()) symbolic_outside_trace(k, loc);
    types.push_back(operands[i].impl()->type);
  }
  TensorType out;
  try {
    out = infer_type(k, types, attrs);
  } catch (Error& e) {
    e.attach(loc, op_name(k));
    throw;
  }

  Tensor result;
  try {
    if (op_info(k).category == OpCategory::Movement) {
      const TensorImpl& in = *operands[0].impl();
      ViewGeometry g;
      if (view_geometry(k, attrs, in.type.shape, in.strides, &g)) {
        result = Tensor(make_view(in, std::move(g.shape), std::move(g.strides), in.offset + g.offset));
        link_view(operands[0], k, attrs, result);
      }
    }
    if (!result.defined()) result = device_run(k, attrs, operands, out);
  } catch (Error& e) {
    e.attach(loc, op_name(k));
    throw;
  }
  record_op(k, attrs, loc, operands, {result});
  return result;
}

Tensor create(OpKind k, Attrs attrs, const TensorType& type, SourceLoc loc) {
  if (TraceState* tr = current_trace()) {
    LocScope at(tr->builder, loc);
    return tr->wrap(tr->builder.op_typed(k, {}, std::move(attrs), type));
  }
  try {
    return device_run(k, attrs, {}, type);
  } catch (Error& e) {
    e.attach(loc);  // no op name: the user called zeros/full/arange, never `constant`
    throw;
  }
}

AttrValue scalar_attr(Scalar s, DType dt) {
  if (!is_floating(dt) && s.kind != ScalarKind::floating) return s.integer;
  return s.value;
}

void check_fits(Scalar s, DType dt, const char* who, SourceLoc loc) {
  if (is_floating(dt) || dt == DType::b8) return;
  const int bits = static_cast<int>(dtype_size(dt)) * 8;
  const bool u8 = dt == DType::u8;
  const int64_t hi = u8 ? 255 : bits == 64 ? INT64_MAX : (int64_t(1) << (bits - 1)) - 1;
  const int64_t lo = u8 ? 0 : bits == 64 ? INT64_MIN : -hi - 1;
  bool fits;
  std::string value;
  if (s.kind == ScalarKind::floating) {
    // [lo, hi] as doubles (int64's bounds round to +-2^63, as libtorch compares them).
    fits = !std::isnan(s.value) && s.value >= static_cast<double>(lo) &&
           s.value <= static_cast<double>(hi);
    std::ostringstream os;
    os << s.value;
    value = os.str();
  } else {
    fits = s.integer <= hi && (s.integer >= lo || (u8 && s.integer >= -hi));
    value = std::to_string(s.integer);
  }
  if (fits) return;
  std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  if (u8) range += ", or an integer from -255 to -1, which wraps";
  throw Error(std::string(who) + ": the value " + value + " does not fit dtype " +
                  dtype_long_name(dt) + " (expected a value from " + range + ")",
              loc);
}

Tensor scalar_operand(const Tensor& like, Scalar s, SourceLoc loc) {
  if (!like.defined()) throw Error("an undefined tensor was used with a number", loc);
  const TensorType& t = like.impl()->type;
  DType dt = promote_with_scalar(t.dtype, s.kind);
  return create(OpKind::constant, Attrs{{AttrKey::value, scalar_attr(s, dt)}}, TensorType{dt, {}, t.device},
                loc);
}

void assign(const Tensor& self, const Tensor& value_in, SourceLoc loc) {
  if (!self.defined() || !value_in.defined())
    throw Error("in-place operation on an undefined tensor", loc);
  const TensorType& st = self.impl()->type;
  const TensorType& vt = value_in.impl()->type;
  if (!broadcastable(vt.shape, st.shape))
    throw Error("in-place operation: the result of shape " + shape_str(vt.shape) +
                    " cannot be written into a tensor of shape " + shape_str(st.shape) +
                    " (expected a shape that broadcasts to it)",
                loc);
  if (is_floating(vt.dtype) && !is_floating(st.dtype))
    throw Error(std::string("in-place operation: a result of type ") + dtype_name(vt.dtype) +
                    " cannot be written into a tensor of type " + dtype_name(st.dtype),
                loc);
  if (vt.device != st.device)
    throw Error("in-place operation: the value is on " + vt.device.str() +
                    " but the tensor is on " + st.device.str(),
                loc);

  Tensor value = value_in;
  if (vt.shape != st.shape) value = apply(OpKind::expand, {value}, {{AttrKey::shape, st.shape}}, loc);
  if (vt.dtype != st.dtype) value = apply(OpKind::cast, {value}, {{AttrKey::dtype, st.dtype}}, loc);
  sync_view(*self.impl());
  check_writable(*self.impl(), loc);

  if (TraceState* tr = current_trace()) {
    TensorImpl& s = *self.impl();
    bool taping = grad_mode_enabled() && (value.requires_grad() || tr->requires_grad(s));
    if (taping && tr->is_grad_leaf(s))
      throw Error(
          "a leaf tensor that requires grad was modified in place (expected the update inside "
          "NoGradGuard, as optimizers do, or an out-of-place op)",
          loc);
    if (taping) tr->keep_overwritten(value, s, loc);
    if (s.symbolic() && s.alias) return write_view(self, value, taping, loc);
    Value v = tr->value_of(value, loc);
    if (!taping && tr->requires_grad(s)) {
      // Written under NoGradGuard: as in eager mode the tensor keeps its place
      // in the graph, so gradients of later uses still reach it.
      v = tr->op_at(loc, OpKind::rebind, {v, tr->value_of(self, loc)});
    } else if (!taping && value.requires_grad()) {
      // Written under NoGradGuard into a tensor without history: it takes the
      // data only, as eagerly.
      v = tr->op_at(loc, OpKind::detach, {v});
    }
    if (taping) tr->taped_writes[&s] = value.requires_grad();
    if (s.symbolic()) {
      s.value = v;
      if (taping) s.requires_grad = value.requires_grad();
    } else {
      tr->value_of(self, loc);  // registers the parameter
      tr->param_current[tr->param_index.at(&s)] = v;
    }
    tr->saved.wrote(&s);  // its views are derived again, its saved values are stale
    return;
  }

  TensorImpl& s = *self.impl();
  if (s.symbolic() || value.impl()->symbolic()) symbolic_outside_trace(OpKind::expand, loc);
  bool taping = grad_mode_enabled() && (value.requires_grad() || s.requires_grad);
  if (taping && s.requires_grad && !s.grad_fn)
    throw Error(
        "a leaf tensor that requires grad was modified in place (expected the update inside "
        "NoGradGuard, as optimizers do, or an out-of-place op)",
        loc);
  // A value that shares the storage is read whole before the write, as a trace would.
  if (value.impl()->buffer == s.buffer) value = value.clone();
  if (taping) keep_overwritten(*value.impl(), s);
  // A write into a view changes its base's history: the base takes it. Otherwise
  // the buffer's new data is all (and a detach()ed view's history is its own).
  if (s.alias && taping && s.alias->differentiable) return write_view(self, value, taping, loc);
  device_copy(value.impl()->view(), s, loc);
  s.buffer->version++;
  if (taping) {
    // The tensor now holds the value's history.
    s.requires_grad = value.requires_grad();
    s.grad_fn = value.impl()->grad_fn;
    s.output_nr = value.impl()->output_nr;
  }
}

}  // namespace detail
}  // namespace kiln
