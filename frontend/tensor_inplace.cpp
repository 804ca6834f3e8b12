// libtorch's spellings on Tensor that Kiln's own names did not cover: item()
// as a Scalar, the in-place forms of elementwise ops and comparisons (each the
// op, then one in-place write of its result: detail::assign, as add_ does),
// in-place random fills, norm along one dim, outer, accessor checks, and the
// in-place view changes (unsqueeze_, squeeze_, t_, transpose_).
#include <algorithm>
#include <iostream>
#include <ostream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln {

using detail::here;

Tensor detail::own_storage(const Tensor& r, const Tensor& x, Loc l) {
  return r.is_symbolic() || r.impl()->buffer == x.impl()->buffer ? r.clone(l) : r;
}

namespace {

Tensor& write(Tensor& self, const Tensor& value, Loc l) {
  detail::assign(self, value, here(l));
  return self;
}

TensorOptions like(const Tensor& t) {
  return TensorOptions(t.dtype()).device(t.device());
}

// x.unsqueeze_(d) and the like: x takes the geometry of `view` (the view op's
// result on x) on the same storage, with its value and autograd history, as
// PyTorch rebases a view. A view stays a view of its base, one op further.
Tensor& take_view(Tensor& self, const Tensor& view, const char* op, Loc l) {
  TensorImpl& t = *self.impl();
  TraceState* tr = current_trace();
  if (tr && (!t.symbolic() || tr->arg_position(&t) >= 0))
    throw Error(std::string(op) +
                    ": changes the shape of a tensor given to the traced function (an argument "
                    "or a captured tensor), which its plan cannot do (expected the out-of-place "
                    "form, x = x." +
                    std::string(op).substr(0, std::string(op).size() - 1) + "(...))",
                here(l));
  if (grad_mode_enabled() && (tr ? tr->is_grad_leaf(t) : autograd_state(t) == 1))
    throw Error(std::string(op) +
                    ": a leaf tensor that requires grad was changed in place (expected the "
                    "out-of-place form, or the change under NoGradGuard)",
                here(l));
  TensorImpl& v = *view.impl();
  if (&v == &t) return self;
  if (t.alias) {
    std::shared_ptr<TensorImpl> grad = t.grad;
    t = v;
    t.grad = std::move(grad);
  } else {
    t.type = v.type;
    t.strides = v.strides;
    t.offset = v.offset;
    t.value = v.value;
    take_history(t, v);
  }
  return self;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind) {
    case ScalarKind::boolean:
      return os << (s.integer ? "true" : "false");
    case ScalarKind::integer:
      return os << s.integer;
    case ScalarKind::floating:
      return os << s.value;
  }
  return os;
}

std::ostream& operator<<(std::ostream& os, DType t) {
  switch (t) {
    case DType::f32:
      return os << "float";
    case DType::f64:
      return os << "double";
    case DType::i32:
      return os << "int";
    case DType::i64:
      return os << "long int";
    case DType::b8:
      return os << "bool";
    case DType::u8:
      return os << "unsigned char";
    case DType::i8:
      return os << "signed char";
    case DType::i16:
      return os << "short int";
  }
  return os << dtype_name(t);
}

Scalar Tensor::item(Loc l) const {
  if (defined() && is_floating(dtype())) return Scalar(item<double>(l));
  if (defined() && dtype() == kBool) return Scalar(item<bool>(l));
  return Scalar(static_cast<long long>(item<int64_t>(l)));
}

void* Tensor::data_ptr() const {
  if (!defined()) throw Error("data_ptr() on an undefined tensor");
  if (impl()->symbolic())
    throw Error("data_ptr() reads a tensor's data, but inside a trace tensors are symbolic");
  return impl()->view().data;
}

std::shared_ptr<GradFn> Tensor::grad_fn() const {
  std::string name = grad_fn_name();
  if (name.empty()) return nullptr;
  return std::make_shared<GradFn>(GradFn{std::move(name)});
}

Tensor Tensor::norm(double p, int64_t d, bool keepdim, Loc l) const {
  return norm(p, std::vector<int64_t>{d}, keepdim, l);
}

Tensor Tensor::outer(const Tensor& other, Loc l) const {
  if (dim() != 1 || other.dim() != 1)
    throw Error("outer: expected two 1-D tensors, got " + shape_str(sizes()) + " and " +
                    shape_str(other.sizes()),
                here(l));
  return unsqueeze(1, l).mul(other.unsqueeze(0, l), l);
}
Tensor outer(const Tensor& a, const Tensor& b, Loc l) {
  return a.outer(b, l);
}

bool Tensor::allclose(const Tensor& other, double rtol, double atol) const {
  return kiln::allclose(*this, other, rtol, atol);
}
bool Tensor::equal(const Tensor& other) const {
  return kiln::equal(*this, other);
}

void Tensor::print() const {
  std::cout << str() << "\n";
}

Tensor& Tensor::unsqueeze_(int64_t d, Loc l) {
  return take_view(*this, unsqueeze(d, l), "unsqueeze_", l);
}
Tensor& Tensor::squeeze_(Loc l) {
  return take_view(*this, squeeze(l), "squeeze_", l);
}
Tensor& Tensor::squeeze_(int64_t d, Loc l) {
  return take_view(*this, squeeze(d, l), "squeeze_", l);
}
Tensor& Tensor::t_(Loc l) {
  return take_view(*this, t(l), "t_", l);
}
Tensor& Tensor::transpose_(int64_t d0, int64_t d1, Loc l) {
  return take_view(*this, transpose(d0, d1, l), "transpose_", l);
}

Tensor Tensor::repeat(Dims repeats, Loc l) const {
  if (repeats.size() < static_cast<size_t>(dim()))
    throw Error("repeat: " + std::to_string(repeats.size()) + " repeats for a tensor of rank " +
                    std::to_string(dim()) + " (expected at least one per dim)",
                here(l));
  Shape s = sizes();
  s.insert(s.begin(), repeats.size() - s.size(), 1);
  // [s0, s1, ...] viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...].
  Shape spread, expanded, out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (repeats[d] < 0)
      throw Error("repeat: expected repeats >= 0, got " + std::to_string(repeats[d]), here(l));
    spread.insert(spread.end(), {1, s[d]});
    expanded.insert(expanded.end(), {repeats[d], s[d]});
    out.push_back(repeats[d] * s[d]);
  }
  return detail::own_storage(reshape(spread, l).expand(expanded, l).reshape(out, l), *this, l);
}

Tensor Tensor::flip(Dims dims, Loc l) const {
  const std::vector<int64_t> d = detail::checked_dims(dims, dim(), "flip", l);
  Tensor r = *this;
  for (int64_t k : d) {
    const int64_t n = size(k);
    if (n > 1)  // the positions n-1, ..., 0 (index_select, a gather)
      r = r.index_select(k, arange(n - 1, -1, -1, TensorOptions(kInt64).device(device()), l), l);
  }
  return r;
}

Tensor Tensor::roll(std::vector<int64_t> shifts, std::vector<int64_t> dims, Loc l) const {
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw Error("roll: without dims, expected one shift, got " + std::to_string(shifts.size()),
                  here(l));
    return flatten(0, -1, l).roll(shifts, {0}, l).reshape(sizes(), l);
  }
  if (shifts.size() != dims.size())
    throw Error("roll: " + std::to_string(shifts.size()) + " shifts for " +
                    std::to_string(dims.size()) + " dims (expected one shift per dim)",
                here(l));
  const std::vector<int64_t> d = detail::checked_dims(dims, dim(), "roll", l);
  Tensor r = *this;
  for (size_t i = 0; i < d.size(); ++i) {
    const int64_t n = size(d[i]);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;  // the last s elements come first
    if (s != 0) r = cat({r.narrow(d[i], n - s, s, l), r.narrow(d[i], 0, n - s, l)}, d[i], l);
  }
  return r;
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value,
                           Loc l) {
  // One tensor index: a bool mask (of the tensor's shape, or its leading dims)
  // assigns a single value where it is true, as masked_fill; integer indices are
  // index_put_(indices, value, accumulate = false)'s.
  if (indices.size() == 1)
    if (const Tensor* t = std::get_if<Tensor>(&indices[0].what)) {
      if (t->dtype() != kBool) return index_put_(std::vector<Tensor>{*t}, value, false, l);
      const Shape& m = t->sizes();
      if (m.size() > sizes().size() || !std::equal(m.begin(), m.end(), sizes().begin()))
        throw Error("index_put_: a mask of shape " + shape_str(m) + " for a tensor of shape " +
                        shape_str(sizes()) + " (expected the tensor's shape or its leading dims)",
                    here(l));
      if (value.numel() != 1)
        throw Error("index_put_: through a mask, expected one value (a scalar or one element), got " +
                        shape_str(value.sizes()) +
                        " (a value per selected element is not supported)",
                    here(l));
      Shape trailing = m;
      trailing.resize(sizes().size(), 1);
      return copy_(masked_fill(t->reshape(trailing, l), value.reshape({}, l), l), l);
    }
  // Tensors alone: advanced assignment, x[rows, cols] = v.
  std::vector<Tensor> tensors;
  for (const indexing::TensorIndex& i : indices)
    if (const Tensor* t = std::get_if<Tensor>(&i.what)) tensors.push_back(*t);
  if (!tensors.empty() && tensors.size() == indices.size()) return index_put_(tensors, value, false, l);
  if (!tensors.empty())
    throw Error(
        "index_put_: tensor indices mixed with other indices are not supported (expected integers, "
        "slices, None or Ellipsis, or tensors alone)",
        here(l));
  Tensor view = index(indices, l);
  // Leading dims of size 1 beyond the target's rank are dropped, as libtorch's
  // indexing assignment does (x[0][0] = tensor({5.f})).
  Tensor v = value;
  while (v.dim() > view.dim() && v.size(0) == 1) v = v.squeeze(0, l);
  view.copy_(v, l);
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value, Loc l) {
  return index_put_(indices, full({}, value, TensorOptions(dtype()).device(device()), l), l);
}

Tensor& Tensor::lerp_(const Tensor& end, Scalar weight, Loc l) {
  return write(*this, lerp(end, weight, l), l);
}
Tensor& Tensor::lerp_(const Tensor& end, const Tensor& weight, Loc l) {
  return write(*this, lerp(end, weight, l), l);
}
Tensor& Tensor::addcmul_(const Tensor& t1, const Tensor& t2, Scalar value, Loc l) {
  return write(*this, addcmul(t1, t2, value, l), l);
}
Tensor& Tensor::addcdiv_(const Tensor& t1, const Tensor& t2, Scalar value, Loc l) {
  return write(*this, addcdiv(t1, t2, value, l), l);
}
Tensor& Tensor::index_fill_(int64_t dim, const Tensor& index, Scalar value, Loc l) {
  return write(*this, index_fill(dim, index, value, l), l);
}
Tensor& Tensor::index_copy_(int64_t dim, const Tensor& index, const Tensor& source, Loc l) {
  return write(*this, index_copy(dim, index, source, l), l);
}
Tensor& Tensor::fill_diagonal_(Scalar value, bool wrap, Loc l) {
  if (dim() < 2)
    throw Error("fill_diagonal_: expected a tensor of at least 2 dims, got shape " + shape_str(sizes()), here(l));
  for (int64_t d = 1; d < dim() && dim() > 2; ++d)
    if (size(d) != size(0))
      throw Error("fill_diagonal_: a tensor of more than 2 dims needs all dims equal, got shape " +
                      shape_str(sizes()),
                  here(l));
  // Row-major positions of the diagonal: a step of the strides' sum. A tall
  // matrix stops after its columns unless wrap; with wrap the same step goes
  // on, which leaves one row blank after each square.
  int64_t step = 0, stride = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    step += stride;
    stride *= size(d);
  }
  const int64_t count = dim() == 2 && !wrap ? std::min(size(0), size(1)) : numel();
  std::vector<double> mask(static_cast<size_t>(numel()), 0.0);
  for (int64_t k = 0; k < count && k * step < numel(); ++k) mask[size_t(k * step)] = 1.0;
  const Tensor m = from_vector(mask, sizes(), TensorOptions(kBool).device(device()), l);
  return write(*this, where(m, full({}, value, like(*this), l), *this, l), l);
}

Tensor& Tensor::uniform_(double from, double to, Loc l) {
  return write(*this, rand(sizes(), like(*this), l).mul(Scalar(to - from), l).add(Scalar(from), l),
               l);
}
Tensor& Tensor::normal_(double mean, double std, Loc l) {
  return write(*this, randn(sizes(), like(*this), l).mul(Scalar(std), l).add(Scalar(mean), l), l);
}
Tensor& Tensor::bernoulli_(double p, Loc l) {
  return write(*this, rand(sizes(), TensorOptions(kFloat32).device(device()), l).lt(Scalar(p), l),
               l);
}

Tensor& Tensor::random_(int64_t from, int64_t to, Loc l) {
  return write(*this, randint(from, to, sizes(), like(*this), l), l);
}
Tensor& Tensor::random_(int64_t to, Loc l) { return random_(0, to, l); }

Tensor& Tensor::neg_(Loc l) {
  return write(*this, neg(l), l);
}
Tensor& Tensor::abs_(Loc l) {
  return write(*this, abs(l), l);
}
Tensor& Tensor::exp_(Loc l) {
  return write(*this, exp(l), l);
}
Tensor& Tensor::log_(Loc l) {
  return write(*this, log(l), l);
}
Tensor& Tensor::sqrt_(Loc l) {
  return write(*this, sqrt(l), l);
}
Tensor& Tensor::sigmoid_(Loc l) {
  return write(*this, sigmoid(l), l);
}
Tensor& Tensor::tanh_(Loc l) {
  return write(*this, tanh(l), l);
}
Tensor& Tensor::floor_(Loc l) {
  return write(*this, floor(l), l);
}
Tensor& Tensor::ceil_(Loc l) {
  return write(*this, ceil(l), l);
}
Tensor& Tensor::round_(Loc l) {
  return write(*this, round(l), l);
}
Tensor& Tensor::trunc_(Loc l) {
  return write(*this, trunc(l), l);
}
Tensor& Tensor::sign_(Loc l) {
  return write(*this, sign(l), l);
}
Tensor& Tensor::reciprocal_(Loc l) {
  return write(*this, reciprocal(l), l);
}
Tensor& Tensor::square_(Loc l) {
  return write(*this, square(l), l);
}
Tensor& Tensor::pow_(Scalar e, Loc l) {
  return write(*this, pow(e, l), l);
}
Tensor& Tensor::pow_(const Tensor& e, Loc l) {
  return write(*this, pow(e, l), l);
}
Tensor& Tensor::clamp_min_(Scalar m, Loc l) {
  return write(*this, clamp_min(m, l), l);
}
Tensor& Tensor::clamp_max_(Scalar m, Loc l) {
  return write(*this, clamp_max(m, l), l);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar v, Loc l) {
  return write(*this, masked_fill(mask, v, l), l);
}
Tensor& Tensor::eq_(const Tensor& o, Loc l) {
  return write(*this, eq(o, l), l);
}
Tensor& Tensor::ne_(const Tensor& o, Loc l) {
  return write(*this, ne(o, l), l);
}
Tensor& Tensor::lt_(const Tensor& o, Loc l) {
  return write(*this, lt(o, l), l);
}
Tensor& Tensor::le_(const Tensor& o, Loc l) {
  return write(*this, le(o, l), l);
}
Tensor& Tensor::gt_(const Tensor& o, Loc l) {
  return write(*this, gt(o, l), l);
}
Tensor& Tensor::ge_(const Tensor& o, Loc l) {
  return write(*this, ge(o, l), l);
}
Tensor& Tensor::eq_(Scalar o, Loc l) {
  return write(*this, eq(o, l), l);
}
Tensor& Tensor::ne_(Scalar o, Loc l) {
  return write(*this, ne(o, l), l);
}
Tensor& Tensor::lt_(Scalar o, Loc l) {
  return write(*this, lt(o, l), l);
}
Tensor& Tensor::le_(Scalar o, Loc l) {
  return write(*this, le(o, l), l);
}
Tensor& Tensor::gt_(Scalar o, Loc l) {
  return write(*this, gt(o, l), l);
}
Tensor& Tensor::ge_(Scalar o, Loc l) {
  return write(*this, ge(o, l), l);
}

Tensor abs(const Tensor& x, Loc l) {
  return x.abs(l);
}
Tensor sqrt(const Tensor& x, Loc l) {
  return x.sqrt(l);
}
Tensor sin(const Tensor& x, Loc l) {
  return x.sin(l);
}
Tensor cos(const Tensor& x, Loc l) {
  return x.cos(l);
}
Tensor isfinite(const Tensor& x, Loc l) {
  return x.isfinite(l);
}
Tensor pow(const Tensor& x, Scalar e, Loc l) {
  return x.pow(e, l);
}
Tensor pow(const Tensor& x, const Tensor& e, Loc l) {
  return x.pow(e, l);
}
Tensor fmod(const Tensor& x, Scalar o, Loc l) {
  return x.fmod(o, l);
}
Tensor fmod(const Tensor& x, const Tensor& o, Loc l) {
  return x.fmod(o, l);
}
Tensor remainder(const Tensor& x, Scalar o, Loc l) {
  return x.remainder(o, l);
}
Tensor remainder(const Tensor& x, const Tensor& o, Loc l) {
  return x.remainder(o, l);
}
Tensor max(const Tensor& x, Loc l) {
  return x.max(l);
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t d, bool keepdim, Loc l) {
  return x.max(d, keepdim, l);
}
Tensor max(const Tensor& a, const Tensor& b, Loc l) {
  return a.maximum(b, l);
}
Tensor min(const Tensor& x, Loc l) {
  return x.min(l);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t d, bool keepdim, Loc l) {
  return x.min(d, keepdim, l);
}
Tensor min(const Tensor& a, const Tensor& b, Loc l) {
  return a.minimum(b, l);
}
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi, Loc l) {
  return x.clamp(lo, hi, l);
}
Tensor norm(const Tensor& x, double p, Loc l) {
  return x.norm(p, l);
}
Tensor norm(const Tensor& x, double p, int64_t d, bool keepdim, Loc l) {
  return x.norm(p, d, keepdim, l);
}
Tensor norm(const Tensor& x, double p, std::vector<int64_t> dims, bool keepdim, Loc l) {
  return x.norm(p, std::move(dims), keepdim, l);
}

namespace detail {
void check_accessor(const Tensor& t, DType want, size_t n) {
  if (!t.defined()) throw Error("accessor() on an undefined tensor");
  if (t.is_symbolic())
    throw Error("accessor() reads a tensor's data, but inside a trace tensors are symbolic");
  if (!t.device().is_cpu())
    throw Error("accessor() on a tensor on " + t.device().str() + " (expected a CPU tensor)");
  if (t.dtype() != want)
    throw Error(std::string("accessor<") + dtype_name(want) + ", " + std::to_string(n) +
                ">() on a tensor of dtype " + dtype_name(t.dtype()));
  if (static_cast<size_t>(t.dim()) != n)
    throw Error("accessor<T, " + std::to_string(n) + ">() on a tensor of rank " +
                std::to_string(t.dim()) + " " + shape_str(t.sizes()));
}
}  // namespace detail

}  // namespace kiln
