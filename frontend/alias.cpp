// Views and in-place writes through them (alias.h).
#include "frontend/alias.h"

#include <optional>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln::detail {
namespace {

// The inverse of one view op for a write: `parent` with the elements that
// `step` selects from it replaced by `child`.
Tensor unview(const ViewStep& step, const Tensor& parent, const Tensor& child, SourceLoc loc) {
  const TensorType& pt = parent.impl()->type;
  // A view of no elements selects none: the write leaves the parent as it is
  // (also through an expand, which has no inverse otherwise).
  if (child.impl()->type.numel() == 0) return parent;
  switch (step.op) {
    case OpKind::reshape:
      return apply(OpKind::reshape, {child}, {{AttrKey::shape, pt.shape}}, loc);
    case OpKind::permute: {
      const auto& perm = step.attrs.ints(AttrKey::perm);
      std::vector<int64_t> inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      return apply(OpKind::permute, {child}, {{AttrKey::perm, inverse}}, loc);
    }
    case OpKind::slice: {
      const int64_t dim = normalize_dim(step.attrs.i(AttrKey::dim), pt.rank());
      const int64_t count = child.impl()->type.shape[static_cast<size_t>(dim)];
      const int64_t start = step.attrs.i(AttrKey::start), stride = step.attrs.i(AttrKey::step);
      const Attrs pad{{AttrKey::dim, dim},
                      {AttrKey::low, start},
                      {AttrKey::high, pt.shape[static_cast<size_t>(dim)] - (start + (count - 1) * stride + 1)},
                      {AttrKey::interior, stride - 1}};
      // The selected positions: ones padded with zeros, compared with zero.
      const TensorType& ct = child.impl()->type;
      Tensor one = create(OpKind::constant, {{AttrKey::value, 1.0}}, TensorType{ct.dtype, {}, ct.device}, loc);
      Tensor zero = create(OpKind::constant, {{AttrKey::value, 0.0}}, TensorType{ct.dtype, {}, ct.device}, loc);
      Tensor ones = apply(OpKind::expand, {one}, {{AttrKey::shape, ct.shape}}, loc);
      Tensor mask = apply(OpKind::ne, {apply(OpKind::pad, {ones}, pad, loc), zero}, {}, loc);
      return apply(OpKind::where, {mask, apply(OpKind::pad, {child}, pad, loc), parent}, {}, loc);
    }
    case OpKind::detach:
      return child;  // data only: callers write through non-differentiable views without grad
    default:
      throw Error(std::string("internal: a write through view op ") + op_name(step.op) +
                      " has no inverse",
                  loc);
  }
}

// `base` with the elements that the view `chain` selects replaced by `value`.
Tensor scatter_into(const Tensor& base, const std::vector<ViewStep>& chain, const Tensor& value,
                    SourceLoc loc) {
  std::vector<Tensor> parents{base};
  for (size_t i = 0; i + 1 < chain.size(); ++i)
    parents.push_back(apply(chain[i].op, {parents.back()}, chain[i].attrs, loc));
  Tensor child = value;
  for (size_t i = chain.size(); i-- > 0;) child = unview(chain[i], parents[i], child, loc);
  return child;
}

bool is_leaf_that_requires_grad(const TensorImpl& t) {
  if (TraceState* tr = current_trace()) return tr->is_grad_leaf(t);
  return t.requires_grad && !t.grad_fn;
}

}  // namespace

uint64_t base_writes(const TensorImpl& base) {
  if (TraceState* tr = current_trace()) return tr->saved.writes(&base);
  return base.buffer ? base.buffer->version : 0;
}

void link_view(const Tensor& in, OpKind k, const Attrs& attrs, const Tensor& view) {
  const TensorImpl& i = *in.impl();
  auto link = std::make_shared<ViewLink>();
  // Inside a trace a tensor with data is a parameter of its own: its eager
  // views are not followed (aliasing between captured tensors is not modelled).
  if (i.alias && (i.symbolic() || current_trace() == nullptr)) {
    link->base = i.alias->base;
    link->chain = i.alias->chain;
    link->differentiable = i.alias->differentiable;
    link->base_shape = i.alias->base_shape;
    link->base_strides = i.alias->base_strides;
    link->base_offset = i.alias->base_offset;
  } else {
    link->base = in.impl_ptr();
    link->base_shape = i.type.shape;
    link->base_strides = i.strides;
    link->base_offset = i.offset;
  }
  link->chain.push_back({k, attrs});
  link->differentiable = link->differentiable && k != OpKind::detach && grad_mode_enabled();
  link->synced = base_writes(*link->base);
  view.impl()->alias = std::move(link);
}

namespace {

// Refuses to derive the view of `link` from its base again once the base's own
// geometry changed in place (x.t_() on a tensor that had views): its chain
// starts from the old geometry. PyTorch re-derives such a view by its raw
// strides; Kiln's views are chains of view ops, and applying one to the new
// geometry would give wrong values or gradients, silently.
void check_base_geometry(const ViewLink& link, SourceLoc loc) {
  const TensorImpl& b = *link.base;
  if (b.type.shape == link.base_shape && b.strides == link.base_strides &&
      b.offset == link.base_offset)
    return;
  throw Error("a view taken of a tensor of shape " + shape_str(link.base_shape) +
                  " is used after that tensor's shape was changed in place to " +
                  shape_str(b.type.shape) +
                  " (t_, transpose_, unsqueeze_ or squeeze_) and the tensor was then written, "
                  "and Kiln cannot derive the old view again (expected the view taken after "
                  "the change, or the out-of-place form, x = x.t())",
              loc);
}

}  // namespace

void sync_view(TensorImpl& t) {
  if (!t.alias) return;
  ViewLink& link = *t.alias;
  TensorImpl& base = *link.base;
  if (t.symbolic()) {
    TraceState& tr = *t.trace;
    const uint64_t writes = tr.saved.writes(&base);
    if (writes == link.synced) return;
    check_base_geometry(link, SourceLoc());
    link.synced = writes;
    Value v = tr.value_of(Tensor(link.base), SourceLoc());
    for (const ViewStep& s : link.chain) v = tr.builder.op(s.op, {v}, s.attrs);
    if (link.differentiable) {
      t.requires_grad = tr.requires_grad(base);
    } else {
      // Only the data follows the base: the view keeps its own history.
      if (is_floating(t.type.dtype)) v = tr.builder.op(OpKind::detach, {v}, {});
      if (t.requires_grad) v = tr.builder.op(OpKind::rebind, {v, t.value}, {});
    }
    t.value = v;
    return;
  }
  if (!link.differentiable || !t.buffer || t.buffer->version == link.synced) return;
  if (base.requires_grad || t.requires_grad) check_base_geometry(link, SourceLoc());
  link.synced = t.buffer->version;
  if (!base.requires_grad && !t.requires_grad) return;
  // The base was written since this view's history was recorded: derive it
  // again from the base's history, as PyTorch regenerates a view's grad_fn.
  TraceScope eager(nullptr);
  EnableGradGuard grad;
  Tensor r(link.base);
  for (const ViewStep& s : link.chain) r = apply(s.op, {r}, s.attrs, SourceLoc());
  take_history(t, *r.impl());
}

void check_writable(const TensorImpl& t, SourceLoc loc) {
  if (t.type.numel() == 0) return;  // no elements, none shared: PyTorch writes nothing too
  bool expanded = false;
  for (size_t d = 0; d < t.type.shape.size(); ++d)
    expanded = expanded || (t.strides[d] == 0 && t.type.shape[d] > 1);
  bool unfolded = false;
  if (t.alias)
    for (const ViewStep& s : t.alias->chain) {
      expanded = expanded || s.op == OpKind::expand;
      unfolded = unfolded || s.op == OpKind::unfold;
    }
  if (expanded)
    throw Error("in-place operation on a view of an expand(): several elements of the tensor "
                "share one memory location (expected a tensor with its own storage; clone() it "
                "first)",
                loc);
  if (unfolded)
    throw Error(
        "in-place operation on a view of unfold(): its windows may share memory "
        "locations, and Kiln does not write through them (expected a tensor with its "
        "own storage; clone() it first)",
        loc);
}

void write_view(const Tensor& t, const Tensor& value, bool taping, SourceLoc loc) {
  TensorImpl& s = *t.impl();
  const ViewLink& link = *s.alias;
  check_base_geometry(link, loc);
  Tensor base(link.base);
  if (taping && link.differentiable) {
    if (is_leaf_that_requires_grad(*link.base))
      throw Error("a view of a leaf tensor that requires grad was modified in place (expected "
                  "the update inside NoGradGuard, as optimizers do, or an out-of-place op)",
                  loc);
    // The base's new history: the written value scattered into it. The view
    // itself is derived from the base again when next used.
    assign(base, scatter_into(base, link.chain, value, loc), loc);
    return;
  }
  // Traced, and the base's history does not change: its data does.
  TraceState& tr = *s.trace;
  {
    NoGradGuard no_grad;
    assign(base, scatter_into(base, link.chain, value, loc), loc);
  }
  if (link.differentiable) return;  // derived again from the base when next used
  Value v = tr.value_of(value, loc);
  if (taping) {
    s.requires_grad = value.impl()->requires_grad;
  } else if (s.requires_grad) {
    v = tr.builder.op(OpKind::rebind, {v, s.value}, {});
  }
  s.value = v;
  s.alias->synced = base_writes(*link.base);
}

}  // namespace kiln::detail
