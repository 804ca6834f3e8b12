// Tensor: metadata, data access, conversions and autograd accessors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "frontend/alias.h"
#include "frontend/autograd.h"
#include "frontend/device_ops.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/reference.h"

namespace kiln {
namespace {

const TensorImpl& need(const Tensor& t) {
  if (!t.defined()) throw Error("the tensor is undefined (expected a tensor with data)");
  return *t.impl();
}

[[noreturn]] void data_in_trace(const char* what, SourceLoc loc) {
  throw Error(std::string(what) +
                  " reads a tensor's data, but inside a trace tensors are symbolic (they have "
                  "no values until the compiled plan runs). Return the tensor from the traced "
                  "function and read it outside, or run eagerly with KILN_JIT=0",
              loc);
}

// A dense CPU copy of the tensor's elements in row-major order.
std::shared_ptr<TensorImpl> dense_cpu(const Tensor& t, SourceLoc loc) {
  Tensor c = t;
  if (!c.device().is_cpu()) c = device_transfer(c, Device(kCPU), loc);
  if (c.is_contiguous()) return c.impl_ptr();
  auto out = make_dense(c.impl()->type);
  copy_to(c.impl()->view(), out->view());
  return out;
}

}  // namespace

const Shape& Tensor::sizes() const { return need(*this).type.shape; }
int64_t Tensor::size(int64_t dim) const {
  const Shape& s = sizes();
  return s[normalize_dim(dim, static_cast<int64_t>(s.size()))];
}
const Strides& Tensor::strides() const { return need(*this).strides; }
int64_t Tensor::stride(int64_t dim) const {
  const Strides& s = strides();
  return s[normalize_dim(dim, static_cast<int64_t>(s.size()))];
}
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::numel() const { return kiln::numel(sizes()); }
DType Tensor::dtype() const { return need(*this).type.dtype; }
Device Tensor::device() const { return need(*this).type.device; }
bool Tensor::is_contiguous() const {
  const TensorImpl& i = need(*this);
  return kiln::is_contiguous(i.type.shape, i.strides);  // symbolic: the layout eager would have
}
bool Tensor::is_symbolic() const { return need(*this).symbolic(); }

template <class T>
T Tensor::item(Loc l) const {
  SourceLoc loc = SourceLoc::from(l);
  if (!defined()) throw Error("item() on an undefined tensor", loc);
  if (impl()->symbolic()) data_in_trace("item()", loc);
  if (numel() != 1)
    throw Error("item() needs a tensor with one element, but got shape " + shape_str(sizes()) +
                    " (" + std::to_string(numel()) + " elements)",
                loc);
  auto d = dense_cpu(*this, loc);
  T out{};
  View dst = dense_view(&out, dtype_of<T>(), {});
  copy_to(View{d->view().data, d->type.dtype, {}, {}}, dst);
  return out;
}

template <class T>
T* Tensor::data_ptr(Loc l) const {
  const SourceLoc loc = SourceLoc::from(l);
  if (!defined()) throw Error("data_ptr() on an undefined tensor", loc);
  const TensorImpl& i = *impl();
  if (i.symbolic()) data_in_trace("data_ptr()", loc);
  if (i.type.dtype != dtype_of<T>())
    throw Error(std::string("data_ptr<") + dtype_name(dtype_of<T>()) + ">() on a tensor of type " +
                    dtype_name(i.type.dtype),
                loc);
  return static_cast<T*>(i.view().data);
}

template <class T>
std::vector<T> Tensor::to_vector(Loc l) const {
  SourceLoc loc = SourceLoc::from(l);
  if (!defined()) throw Error("to_vector() on an undefined tensor", loc);
  if (impl()->symbolic()) data_in_trace("to_vector()", loc);
  auto d = dense_cpu(*this, loc);
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<char> tmp(out.size());
    copy_to(d->view(), dense_view(tmp.data(), kBool, sizes()));
    for (size_t i = 0; i < tmp.size(); ++i) out[i] = tmp[i];
  } else {
    copy_to(d->view(), dense_view(out.data(), dtype_of<T>(), sizes()));
  }
  return out;
}

#define KILN_INSTANTIATE(T)                   \
  template T Tensor::item<T>(Loc) const;      \
  template T* Tensor::data_ptr<T>(Loc) const; \
  template std::vector<T> Tensor::to_vector<T>(Loc) const;
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
KILN_INSTANTIATE(int32_t)
KILN_INSTANTIATE(int64_t)
KILN_INSTANTIATE(bool)
KILN_INSTANTIATE(uint8_t)
KILN_INSTANTIATE(int8_t)
KILN_INSTANTIATE(int16_t)
#undef KILN_INSTANTIATE

Tensor Tensor::to(DType t, Loc l) const {
  check_dtype(t, "to()", detail::here(l));
  if (dtype() == t) return *this;
  return detail::apply(OpKind::cast, {*this}, {{AttrKey::dtype, t}}, detail::here(l));
}

Tensor Tensor::to(Device d, Loc l) const {
  if (device() == d) return *this;
  return device_transfer(*this, d, detail::here(l));
}

Tensor Tensor::clone(Loc l) const {
  SourceLoc loc = detail::here(l);
  if (TraceState* tr = current_trace()) {
    // Graph values are immutable: a new tensor for the same value, not a view.
    Value v = tr->value_of(*this, loc);
    const bool grad = requires_grad() && is_floating(dtype());
    if (grad && !grad_mode_enabled()) v = tr->builder.op(OpKind::detach, {v}, {});
    return tr->wrap(v, grad && grad_mode_enabled());
  }
  // A dense copy that keeps autograd history (cast to the same type is a copy).
  auto out = make_dense(impl()->type);
  device_copy(impl()->view(), *out, loc);
  Tensor result(out);
  detail::record_op(OpKind::reshape, {{AttrKey::shape, sizes()}}, loc, {*this}, {result});
  return result;
}

Tensor Tensor::contiguous(Loc l) const {
  if (is_contiguous()) return *this;
  return clone(l);
}

bool Tensor::requires_grad() const {
  need(*this);
  detail::sync_view(*impl());
  if (TraceState* tr = current_trace()) return tr->requires_grad(*impl());
  return impl()->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on, Loc l) {
  if (!defined()) throw Error("requires_grad_() on an undefined tensor", detail::here(l));
  TensorImpl& i = *impl();
  if (i.grad_fn && !on)
    throw Error("requires_grad_(false) on a tensor computed by an op (expected a leaf; use detach())",
                detail::here(l));
  if (on && !is_floating(i.type.dtype))
    throw Error(std::string("only floating-point tensors can require gradients (got ") +
                    dtype_name(i.type.dtype) + ")",
                detail::here(l));
  detail::sync_view(i);
  // A view with no history of its own (its base does not require grad) becomes
  // a leaf: from now on it shares only the data with its base, so an in-place
  // update does not derive its history from the base again (PyTorch keeps such
  // a view a leaf that requires grad).
  if (on && !i.grad_fn && i.alias) i.alias->differentiable = false;
  i.requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& i = need(*this);
  if (TraceState* tr = current_trace()) return tr->grad_of(*this, SourceLoc());
  return i.grad ? Tensor(i.grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  need(*this);
  if (TraceState* tr = current_trace()) return tr->set_grad(*this, g);
  impl()->grad = g.impl_ptr();
}

Tensor Tensor::detach() const {
  const TensorImpl& i = need(*this);
  // Inside a trace the cut is a node: gradients built while tracing stop there.
  if (i.symbolic() || current_trace()) return detail::apply(OpKind::detach, {*this}, {}, SourceLoc());
  Tensor view(make_view(i, i.type.shape, i.strides, i.offset));
  detail::link_view(*this, OpKind::detach, {}, view);
  return view;
}

bool Tensor::is_leaf() const {
  const TensorImpl& i = need(*this);
  if (i.symbolic()) return i.trace->is_grad_leaf(i) || !i.requires_grad;
  return i.grad_fn == nullptr;
}

std::string Tensor::grad_fn_name() const {
  const TensorImpl& i = need(*this);
  if (!i.grad_fn) return "";
  std::string n = op_name(i.grad_fn->op);
  if (!n.empty()) n[0] = static_cast<char>(std::toupper(n[0]));
  return n + "Backward";
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes()) return false;
  auto x = a.to_vector<double>();
  auto y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>();
}

}  // namespace kiln
