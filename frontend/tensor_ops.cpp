// Tensor ops: views, elementwise math, reductions, softmax, matmul, in-place
// updates and operators. Each is one or a few table ops through detail::apply;
// composites (mean, var, softmax, clamp) are built from table ops so autodiff,
// tracing and fusion see ordinary nodes.
#include <numeric>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"

namespace kiln {

using detail::apply;
using detail::checked_dim;
using detail::checked_dims;
using detail::here;
using detail::scalar_operand;

namespace {

Tensor unary(OpKind k, const Tensor& x, Loc l) { return apply(k, {x}, {}, here(l)); }
// bool < integers < floating types, the categories of PyTorch's result_type.
int category(DType t) {
  return t == DType::b8 ? 0 : is_floating(t) ? 2 : 1;
}

// PyTorch's result_type for two tensor operands: a 0-d tensor beside one with
// dims sets the dtype only when its category is higher (f32[3] + f64[] is f32,
// u8[3] + i64[] is u8, i32[3] + f64[] is f64); otherwise it is cast to the other
// operand's dtype, so the op's own promotion (ops.def) gives that dtype.
std::pair<Tensor, Tensor> zero_dim_rule(const Tensor& a, const Tensor& b, Loc l) {
  if (!a.defined() || !b.defined() || (a.dim() == 0) == (b.dim() == 0)) return {a, b};
  const bool a_zero = a.dim() == 0;
  const Tensor& dims = a_zero ? b : a;
  const Tensor& zero = a_zero ? a : b;
  if (zero.dtype() == dims.dtype() || category(zero.dtype()) > category(dims.dtype())) return {a, b};
  const Tensor z = zero.to(dims.dtype(), l);
  return a_zero ? std::pair{z, b} : std::pair{a, z};
}

Tensor binary(OpKind k, const Tensor& a, const Tensor& b, Loc l) {
  const auto [x, y] = zero_dim_rule(a, b, l);
  return apply(k, {x, y}, {}, here(l));
}
Tensor binary_scalar(OpKind k, const Tensor& a, Scalar s, Loc l) {
  return apply(k, {a, scalar_operand(a, s, here(l))}, {}, here(l));
}
Tensor scalar_binary(OpKind k, Scalar s, const Tensor& b, Loc l) {
  return apply(k, {scalar_operand(b, s, here(l)), b}, {}, here(l));
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> d(static_cast<size_t>(rank));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

Tensor reduce(OpKind k, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc l) {
  const std::vector<int64_t> d = checked_dims(dims, x.dim(), op_name(k), l);
  return apply(k, {x}, {{AttrKey::dims, d}, {AttrKey::keepdim, int64_t(keepdim)}}, here(l));
}

Tensor arg_reduce(OpKind k, const Tensor& x, int64_t dim, bool keepdim, Loc l) {
  const int64_t d = checked_dim(dim, x.dim(), op_name(k), l);
  return apply(k, {x}, {{AttrKey::dim, d}, {AttrKey::keepdim, int64_t(keepdim)}}, here(l));
}

int64_t count_of(const Tensor& x, const std::vector<int64_t>& dims, const char* op, Loc l) {
  int64_t n = 1;
  for (int64_t d : checked_dims(dims, x.dim(), op, l)) n *= x.sizes()[static_cast<size_t>(d)];
  return n;
}

}  // namespace

// ---- views ----

namespace {
// A view op that changes nothing still makes a new tensor, as in PyTorch: an
// alias of the storage with its own autograd state (under NoGradGuard it does
// not require grad).
Tensor identity_view(const Tensor& t, SourceLoc loc) {
  return apply(OpKind::reshape, {t}, {{AttrKey::shape, t.sizes()}}, loc);
}
}  // namespace

Tensor Tensor::reshape(Shape shape, Loc l) const {
  SourceLoc loc = here(l);
  Shape resolved;
  try {
    resolved = infer_reshape(shape, numel());
  } catch (Error& e) {
    e.attach(loc, "reshape");
    throw;
  }
  return apply(OpKind::reshape, {*this}, {{AttrKey::shape, resolved}}, loc);
}

Tensor Tensor::view(Shape shape, Loc l) const {
  Tensor r = reshape(std::move(shape), l);
  const bool shared = r.is_symbolic() ? r.impl() == impl() || r.impl()->alias != nullptr
                                      : r.impl()->buffer == impl()->buffer;
  if (!shared)
    throw Error("view(): the tensor's layout " + shape_str(sizes()) +
                    " cannot be viewed with this shape without a copy (expected a contiguous "
                    "tensor; use reshape() or contiguous())",
                here(l));
  return r;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim, Loc l) const {
  if (dim() == 0) return reshape({1}, l);
  const int64_t s = checked_dim(start_dim, dim(), "flatten", l), e = checked_dim(end_dim, dim(), "flatten", l);
  if (s > e) throw Error("flatten(): start_dim must not come after end_dim", here(l));
  Shape out(sizes().begin(), sizes().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= sizes()[i];
  out.push_back(n);
  out.insert(out.end(), sizes().begin() + e + 1, sizes().end());
  return reshape(out, l);
}

Tensor Tensor::squeeze(Loc l) const {
  Shape out;
  for (int64_t s : sizes())
    if (s != 1) out.push_back(s);
  return reshape(out, l);
}

Tensor Tensor::squeeze(int64_t d, Loc l) const {
  const int64_t nd = checked_dim(d, dim(), "squeeze", l);
  if (sizes()[static_cast<size_t>(nd)] != 1) return identity_view(*this, here(l));
  Shape out = sizes();
  out.erase(out.begin() + nd);
  return reshape(out, l);
}

Tensor Tensor::unsqueeze(int64_t d, Loc l) const {
  const int64_t nd = checked_dim(d, dim() + 1, "unsqueeze", l);
  Shape out = sizes();
  out.insert(out.begin() + nd, 1);
  return reshape(out, l);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1, Loc l) const {
  std::vector<int64_t> perm = all_dims(dim());
  std::swap(perm[static_cast<size_t>(checked_dim(d0, dim(), "transpose", l))],
            perm[static_cast<size_t>(checked_dim(d1, dim(), "transpose", l))]);
  return permute(perm, l);
}

Tensor Tensor::t(Loc l) const {
  if (dim() > 2)
    throw Error("t() expects a tensor of at most 2 dims, got " + shape_str(sizes()) +
                    " (use transpose(dim0, dim1))",
                here(l));
  if (dim() < 2) return identity_view(*this, here(l));
  return transpose(0, 1, l);
}

Tensor Tensor::permute(Dims dims, Loc l) const {
  for (auto& d : dims) d = checked_dim(d, dim(), "permute", l);
  if (dims == all_dims(dim())) return identity_view(*this, here(l));
  return apply(OpKind::permute, {*this}, {{AttrKey::perm, dims}}, here(l));
}

Tensor Tensor::expand(Shape shape, Loc l) const {
  // -1 keeps the existing size (aligned from the right).
  int64_t lead = static_cast<int64_t>(shape.size()) - dim();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == -1 && static_cast<int64_t>(i) >= lead) shape[i] = sizes()[i - lead];
  if (shape == sizes()) return identity_view(*this, here(l));
  return apply(OpKind::expand, {*this}, {{AttrKey::shape, shape}}, here(l));
}

Tensor Tensor::expand_as(const Tensor& other, Loc l) const { return expand(other.sizes(), l); }

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step, Loc l) const {
  const SourceLoc loc = here(l);
  const int64_t nd = checked_dim(d, dim(), "slice", l);
  if (step < 1) throw Error("slice(): step must be positive, got " + std::to_string(step), loc);
  const int64_t size = sizes()[static_cast<size_t>(nd)];
  // Python's rule: a negative bound counts from the end, then both are clamped
  // to [0, size] (in this order, so no sum can wrap).
  auto clampi = [&](int64_t v) {
    if (v < 0) v = v < -size ? 0 : v + size;
    return std::min(v, size);
  };
  int64_t s = clampi(start.value_or(0)), e = clampi(end.value_or(size));
  if (e < s) e = s;
  // A slice of at most one element takes no step: the same slice with step 1.
  if (e - s <= step) step = 1, e = std::min(e, s + 1);
  if (s == 0 && e == size && step == 1) return identity_view(*this, loc);
  return apply(OpKind::slice, {*this},
               {{AttrKey::dim, nd}, {AttrKey::start, s}, {AttrKey::end, e}, {AttrKey::step, step}},
               loc);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length, Loc l) const {
  const int64_t nd = checked_dim(d, dim(), "narrow", l);
  const int64_t size = sizes()[static_cast<size_t>(nd)];
  // As in PyTorch: a negative start counts from the end. Compared without
  // forming start + length, which could wrap.
  const int64_t from = start < 0 && start >= -size ? start + size : start;
  if (from < 0 || from > size || length < 0 || length > size - from)
    throw Error("narrow(): start " + std::to_string(start) + " and length " + std::to_string(length) +
                    " do not fit dim " + std::to_string(d) + " of size " + std::to_string(size) +
                    " (expected -size <= start <= size and 0 <= length <= size - start)",
                here(l));
  return slice(nd, from, from + length, 1, l);
}

Tensor Tensor::select(int64_t d, int64_t index, Loc l) const {
  const SourceLoc loc = here(l);
  const int64_t nd = checked_dim(d, dim(), "select", l);
  const int64_t size = sizes()[static_cast<size_t>(nd)];
  if (index < -size || index >= size)
    throw Error("select(): index " + std::to_string(index) + " is out of range for dim " +
                    std::to_string(d) + " of size " + std::to_string(size) + " (expected " +
                    std::to_string(-size) + " <= index < " + std::to_string(size) + ")",
                loc);
  if (index < 0) index += size;
  Tensor s = slice(nd, index, index + 1, 1, l);
  Shape out = sizes();
  out.erase(out.begin() + nd);
  return s.reshape(out, l);
}

// ---- elementwise ----

Tensor Tensor::neg(Loc l) const { return unary(OpKind::neg, *this, l); }
Tensor Tensor::abs(Loc l) const { return unary(OpKind::abs, *this, l); }
Tensor Tensor::sign(Loc l) const { return unary(OpKind::sign, *this, l); }
Tensor Tensor::exp(Loc l) const { return unary(OpKind::exp, *this, l); }
Tensor Tensor::log(Loc l) const { return unary(OpKind::log, *this, l); }
Tensor Tensor::sqrt(Loc l) const { return unary(OpKind::sqrt, *this, l); }
Tensor Tensor::rsqrt(Loc l) const { return unary(OpKind::rsqrt, *this, l); }
Tensor Tensor::sin(Loc l) const { return unary(OpKind::sin, *this, l); }
Tensor Tensor::cos(Loc l) const { return unary(OpKind::cos, *this, l); }
Tensor Tensor::tanh(Loc l) const { return unary(OpKind::tanh, *this, l); }
Tensor Tensor::sigmoid(Loc l) const { return unary(OpKind::sigmoid, *this, l); }
Tensor Tensor::relu(Loc l) const { return unary(OpKind::relu, *this, l); }
Tensor Tensor::gelu(Loc l) const { return unary(OpKind::gelu, *this, l); }
Tensor Tensor::erf(Loc l) const { return unary(OpKind::erf, *this, l); }
Tensor Tensor::logical_not(Loc l) const { return unary(OpKind::logical_not, *this, l); }
Tensor Tensor::logical_and(const Tensor& o, Loc l) const { return binary(OpKind::logical_and, *this, o, l); }
Tensor Tensor::logical_or(const Tensor& o, Loc l) const { return binary(OpKind::logical_or, *this, o, l); }
Tensor Tensor::pow(const Tensor& e, Loc l) const { return binary(OpKind::pow, *this, e, l); }
Tensor Tensor::pow(Scalar e, Loc l) const { return binary_scalar(OpKind::pow, *this, e, l); }
Tensor Tensor::maximum(const Tensor& o, Loc l) const { return binary(OpKind::maximum, *this, o, l); }
Tensor Tensor::minimum(const Tensor& o, Loc l) const { return binary(OpKind::minimum, *this, o, l); }

Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max, Loc l) const {
  // A bound converts to the result's dtype as fill_'s value does (checked).
  for (const std::optional<Scalar>& bound : {min, max})
    if (bound && defined())
      detail::check_fits(*bound, promote_with_scalar(dtype(), bound->kind), "clamp()", here(l));
  return detail::clamp_bounds(*this, min, max, /*grad_at_bounds=*/true, l);
}

Tensor detail::clamp_bounds(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
                            bool grad_at_bounds, Loc l) {
  Tensor r = x;
  if (!(grad_mode_enabled() && x.requires_grad())) {
    if (lo) r = binary_scalar(OpKind::maximum, r, *lo, l);
    if (hi) r = binary_scalar(OpKind::minimum, r, *hi, l);
    return r;
  }
  // A NaN fails both comparisons and stays, as with maximum and minimum.
  if (lo) {
    const Tensor bound = scalar_operand(r, *lo, here(l));
    r = where(grad_at_bounds ? r.lt(bound, l) : r.le(bound, l), bound, r, l);
  }
  if (hi) {
    const Tensor bound = scalar_operand(r, *hi, here(l));
    r = where(grad_at_bounds ? r.gt(bound, l) : r.ge(bound, l), bound, r, l);
  }
  return r;
}

Tensor Tensor::add(const Tensor& o, Scalar alpha, Loc l) const {
  if (alpha.value == 1) return binary(OpKind::add, *this, o, l);
  return binary(OpKind::add, *this, binary_scalar(OpKind::mul, o, alpha, l), l);
}
Tensor Tensor::sub(const Tensor& o, Scalar alpha, Loc l) const {
  if (alpha.value == 1) return binary(OpKind::sub, *this, o, l);
  return binary(OpKind::sub, *this, binary_scalar(OpKind::mul, o, alpha, l), l);
}
Tensor Tensor::mul(const Tensor& o, Loc l) const { return binary(OpKind::mul, *this, o, l); }
Tensor Tensor::div(const Tensor& o, Loc l) const { return binary(OpKind::div, *this, o, l); }
Tensor Tensor::add(Scalar o, Loc l) const { return binary_scalar(OpKind::add, *this, o, l); }
Tensor Tensor::sub(Scalar o, Loc l) const { return binary_scalar(OpKind::sub, *this, o, l); }
Tensor Tensor::mul(Scalar o, Loc l) const { return binary_scalar(OpKind::mul, *this, o, l); }
Tensor Tensor::div(Scalar o, Loc l) const { return binary_scalar(OpKind::div, *this, o, l); }

#define KILN_COMPARE(name)                                                                        \
  Tensor Tensor::name(const Tensor& o, Loc l) const { return binary(OpKind::name, *this, o, l); } \
  Tensor Tensor::name(Scalar o, Loc l) const { return binary_scalar(OpKind::name, *this, o, l); }
KILN_COMPARE(eq)
KILN_COMPARE(ne)
KILN_COMPARE(lt)
KILN_COMPARE(le)
KILN_COMPARE(gt)
KILN_COMPARE(ge)
#undef KILN_COMPARE

// ---- reductions ----

Tensor Tensor::sum(Loc l) const { return reduce(OpKind::sum, *this, all_dims(dim()), false, l); }
Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim, Loc l) const {
  return reduce(OpKind::sum, *this, std::move(dims), keepdim, l);
}
Tensor Tensor::sum(int64_t d, bool keepdim, Loc l) const { return sum(std::vector<int64_t>{d}, keepdim, l); }

Tensor Tensor::mean(Loc l) const { return mean(all_dims(dim()), false, l); }
Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim, Loc l) const {
  if (!is_floating(dtype()))
    throw Error(std::string("mean() needs a floating-point tensor, got ") + dtype_name(dtype()) +
                    " (use .to(kFloat32) first)",
                here(l));
  int64_t n = count_of(*this, dims, "mean", l);
  Tensor s = reduce(OpKind::sum, *this, std::move(dims), keepdim, l);
  return binary_scalar(OpKind::div, s, Scalar(static_cast<double>(n)), l);
}
Tensor Tensor::mean(int64_t d, bool keepdim, Loc l) const { return mean(std::vector<int64_t>{d}, keepdim, l); }

Tensor Tensor::max(Loc l) const { return reduce(OpKind::max, *this, all_dims(dim()), false, l); }
Tensor Tensor::min(Loc l) const { return reduce(OpKind::min, *this, all_dims(dim()), false, l); }
namespace {

// max(dim)/min(dim): the values and their indices. As in PyTorch, the values'
// gradient goes to the returned index only (amax/amin split it among ties), so
// when a gradient may flow the values are the elements at the indices.
std::tuple<Tensor, Tensor> extremum_along(OpKind value_op, OpKind index_op, const Tensor& x, int64_t d,
                                          bool keepdim, Loc l) {
  Tensor index = arg_reduce(index_op, x, d, keepdim, l);
  if (!(x.requires_grad() && grad_mode_enabled())) return {reduce(value_op, x, {d}, keepdim, l), index};
  const int64_t dim = checked_dim(d, x.dim(), op_name(value_op), l);
  Shape along(static_cast<size_t>(x.dim()), 1);
  along[static_cast<size_t>(dim)] = x.size(dim);
  Tensor position = arange(x.size(dim), TensorOptions(kInt64).device(x.device()), l).reshape(along, l);
  Tensor chosen = position.eq(keepdim ? index : index.unsqueeze(dim, l), l);
  Tensor zero = zeros({}, TensorOptions(x.dtype()).device(x.device()), l);
  return {where(chosen, x, zero, l).sum(std::vector<int64_t>{dim}, keepdim, l), index};
}

}  // namespace

std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool keepdim, Loc l) const {
  return extremum_along(OpKind::max, OpKind::argmax, *this, d, keepdim, l);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool keepdim, Loc l) const {
  return extremum_along(OpKind::min, OpKind::argmin, *this, d, keepdim, l);
}
// No dims: all of them, as libtorch's amax(x).
Tensor Tensor::amax(Dims dims, bool keepdim, Loc l) const {
  return reduce(OpKind::max, *this,
                dims.empty() ? all_dims(dim()) : std::vector<int64_t>(std::move(dims)), keepdim, l);
}
Tensor Tensor::amin(Dims dims, bool keepdim, Loc l) const {
  return reduce(OpKind::min, *this,
                dims.empty() ? all_dims(dim()) : std::vector<int64_t>(std::move(dims)), keepdim, l);
}
Tensor Tensor::argmax(Loc l) const { return arg_reduce(OpKind::argmax, flatten(0, -1, l), 0, false, l); }
Tensor Tensor::argmax(int64_t d, bool keepdim, Loc l) const { return arg_reduce(OpKind::argmax, *this, d, keepdim, l); }
Tensor Tensor::argmin(Loc l) const { return arg_reduce(OpKind::argmin, flatten(0, -1, l), 0, false, l); }
Tensor Tensor::argmin(int64_t d, bool keepdim, Loc l) const { return arg_reduce(OpKind::argmin, *this, d, keepdim, l); }

Tensor Tensor::var(Loc l) const { return var(all_dims(dim()), true, false, l); }
Tensor Tensor::var(std::vector<int64_t> dims, bool unbiased, bool keepdim, Loc l) const {
  int64_t n = count_of(*this, dims, "var", l);
  Tensor mu = mean(dims, true, l);
  Tensor d = binary(OpKind::sub, *this, mu, l);
  Tensor ss = reduce(OpKind::sum, binary(OpKind::mul, d, d, l), dims, keepdim, l);
  double denom = static_cast<double>(unbiased ? n - 1 : n);
  return binary_scalar(OpKind::div, ss, Scalar(denom), l);
}
Tensor Tensor::std(Loc l) const { return var(l).sqrt(l); }
Tensor Tensor::std(std::vector<int64_t> dims, bool unbiased, bool keepdim, Loc l) const {
  return var(std::move(dims), unbiased, keepdim, l).sqrt(l);
}

namespace {

// The floating input of softmax/log_softmax `op` minus its max along dim d (so exp
// cannot overflow). The max is detached, as in logsumexp: both results are the
// same for any shift, so no gradient flows through it (PyTorch's and JAX's
// kernels treat it so too), and the backward neither marks where the max was nor
// sums a gradient for it (a full-size mask and two passes over the input). A dim
// of size 0 has no max and needs no shift: the result is empty, as in PyTorch.
// Dim errors name `op`.
Tensor shifted_by_max(const Tensor& self, int64_t& d, const char* op, Loc l) {
  d = checked_dim(d, self.dim(), op, l);
  Tensor x = is_floating(self.dtype()) ? self : self.to(kFloat32, l);
  if (x.size(d) == 0) return x;
  return binary(OpKind::sub, x, reduce(OpKind::max, x, {d}, true, l).detach(), l);
}

}  // namespace

Tensor Tensor::softmax(int64_t d, Loc l) const {
  Tensor e = unary(OpKind::exp, shifted_by_max(*this, d, "softmax", l), l);
  return binary(OpKind::div, e, reduce(OpKind::sum, e, {d}, true, l), l);
}

Tensor Tensor::log_softmax(int64_t d, Loc l) const {
  Tensor shifted = shifted_by_max(*this, d, "log_softmax", l);
  Tensor lse = unary(OpKind::log, reduce(OpKind::sum, unary(OpKind::exp, shifted, l), {d}, true, l), l);
  return binary(OpKind::sub, shifted, lse, l);
}

// ---- linear algebra ----

Tensor Tensor::matmul(const Tensor& o, Loc l) const {
  SourceLoc loc = here(l);
  if (dim() == 0 || o.dim() == 0)
    throw Error("matmul: both operands need at least 1 dim, got " + shape_str(sizes()) + " and " +
                    shape_str(o.sizes()),
                loc);
  // 1-D operands: as in torch.matmul, a vector is a row (left) or column (right).
  Tensor a = dim() == 1 ? unsqueeze(0, l) : *this;
  Tensor b = o.dim() == 1 ? o.unsqueeze(1, l) : o;
  Tensor r = apply(OpKind::matmul, {a, b}, {}, loc);
  if (dim() == 1) r = r.squeeze(-2, l);
  if (o.dim() == 1) r = r.squeeze(-1, l);
  return r;
}

Tensor Tensor::mm(const Tensor& o, Loc l) const {
  if (dim() != 2 || o.dim() != 2)
    throw Error("mm: expected two 2-D tensors, got " + shape_str(sizes()) + " and " +
                    shape_str(o.sizes()),
                here(l));
  return matmul(o, l);
}

Tensor Tensor::bmm(const Tensor& o, Loc l) const {
  if (dim() != 3 || o.dim() != 3)
    throw Error("bmm: expected two 3-D tensors, got " + shape_str(sizes()) + " and " +
                    shape_str(o.sizes()),
                here(l));
  if (sizes()[0] != o.sizes()[0])
    throw Error("bmm: batch sizes differ: " + shape_str(sizes()) + " and " + shape_str(o.sizes()),
                here(l));
  return matmul(o, l);
}

// ---- in place ----

namespace {
Tensor& assign_to(Tensor& self, const Tensor& value, Loc l) {
  detail::assign(self, value, here(l));
  return self;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o, Scalar alpha, Loc l) { return assign_to(*this, add(o, alpha, l), l); }
Tensor& Tensor::add_(Scalar o, Loc l) { return assign_to(*this, binary_scalar(OpKind::add, *this, o, l), l); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha, Loc l) { return assign_to(*this, sub(o, alpha, l), l); }
Tensor& Tensor::sub_(Scalar o, Loc l) { return assign_to(*this, binary_scalar(OpKind::sub, *this, o, l), l); }
Tensor& Tensor::mul_(const Tensor& o, Loc l) { return assign_to(*this, mul(o, l), l); }
Tensor& Tensor::mul_(Scalar o, Loc l) { return assign_to(*this, binary_scalar(OpKind::mul, *this, o, l), l); }
Tensor& Tensor::div_(const Tensor& o, Loc l) { return assign_to(*this, div(o, l), l); }
Tensor& Tensor::div_(Scalar o, Loc l) { return assign_to(*this, binary_scalar(OpKind::div, *this, o, l), l); }
Tensor& Tensor::zero_(Loc l) { return fill_(0, l); }
Tensor& Tensor::fill_(Scalar v, Loc l) {
  const TensorType& t = detail::type_of(*this);
  detail::check_fits(v, t.dtype, "fill_()", here(l));
  Tensor c = detail::create(OpKind::constant, {{AttrKey::value, detail::scalar_attr(v, t.dtype)}},
                            TensorType{t.dtype, {}, t.device}, here(l));
  return assign_to(*this, c, l);
}
Tensor& Tensor::copy_(const Tensor& src, Loc l) { return assign_to(*this, src, l); }
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max, Loc l) {
  return assign_to(*this, clamp(min, max, l), l);
}
Tensor& Tensor::relu_(Loc l) { return assign_to(*this, relu(l), l); }
Tensor& Tensor::operator+=(TensorAt o) { return add_(o.t, 1, o.loc); }
Tensor& Tensor::operator-=(TensorAt o) { return sub_(o.t, 1, o.loc); }
Tensor& Tensor::operator*=(TensorAt o) { return mul_(o.t, o.loc); }
Tensor& Tensor::operator/=(TensorAt o) { return div_(o.t, o.loc); }
Tensor& Tensor::operator+=(ScalarAt o) {
  return add_(o.s, o.loc);
}
Tensor& Tensor::operator-=(ScalarAt o) {
  return sub_(o.s, o.loc);
}
Tensor& Tensor::operator*=(ScalarAt o) {
  return mul_(o.s, o.loc);
}
Tensor& Tensor::operator/=(ScalarAt o) {
  return div_(o.s, o.loc);
}

// ---- operators and free functions ----

Tensor operator+(TensorAt a, const Tensor& b) { return binary(OpKind::add, a.t, b, a.loc); }
Tensor operator-(TensorAt a, const Tensor& b) { return binary(OpKind::sub, a.t, b, a.loc); }
Tensor operator*(TensorAt a, const Tensor& b) { return binary(OpKind::mul, a.t, b, a.loc); }
Tensor operator/(TensorAt a, const Tensor& b) { return binary(OpKind::div, a.t, b, a.loc); }
Tensor operator+(TensorAt a, Scalar b) { return binary_scalar(OpKind::add, a.t, b, a.loc); }
Tensor operator-(TensorAt a, Scalar b) { return binary_scalar(OpKind::sub, a.t, b, a.loc); }
Tensor operator*(TensorAt a, Scalar b) { return binary_scalar(OpKind::mul, a.t, b, a.loc); }
Tensor operator/(TensorAt a, Scalar b) { return binary_scalar(OpKind::div, a.t, b, a.loc); }
Tensor operator+(Scalar a, TensorAt b) { return scalar_binary(OpKind::add, a, b.t, b.loc); }
Tensor operator-(Scalar a, TensorAt b) { return scalar_binary(OpKind::sub, a, b.t, b.loc); }
Tensor operator*(Scalar a, TensorAt b) { return scalar_binary(OpKind::mul, a, b.t, b.loc); }
Tensor operator/(Scalar a, TensorAt b) { return scalar_binary(OpKind::div, a, b.t, b.loc); }
Tensor operator-(TensorAt a) { return unary(OpKind::neg, a.t, a.loc); }
Tensor operator==(TensorAt a, const Tensor& b) { return binary(OpKind::eq, a.t, b, a.loc); }
Tensor operator!=(TensorAt a, const Tensor& b) { return binary(OpKind::ne, a.t, b, a.loc); }

namespace {

// The bool operands of &, |, ^ or ~ (`op`), or an error naming what came.
void require_bool(const char* op, const Tensor& a, const Tensor* b, Loc loc) {
  for (const Tensor* t : {&a, b})
    if (t && t->dtype() != DType::b8)
      throw Error(std::string("operator") + op + ": expected bool tensors (masks), got " +
                      dtype_name(t->dtype()) +
                      " (bitwise operations on integer tensors are not in the op table yet)",
                  here(loc));
}

}  // namespace

Tensor operator&(TensorAt a, const Tensor& b) {
  require_bool("&", a.t, &b, a.loc);
  return binary(OpKind::logical_and, a.t, b, a.loc);
}
Tensor operator|(TensorAt a, const Tensor& b) {
  require_bool("|", a.t, &b, a.loc);
  return binary(OpKind::logical_or, a.t, b, a.loc);
}
Tensor operator^(TensorAt a, const Tensor& b) {
  require_bool("^", a.t, &b, a.loc);
  return binary(OpKind::ne, a.t, b, a.loc);
}
Tensor operator~(TensorAt a) {
  require_bool("~", a.t, nullptr, a.loc);
  return a.t.logical_not(a.loc);
}
Tensor operator<(TensorAt a, const Tensor& b) { return binary(OpKind::lt, a.t, b, a.loc); }
Tensor operator<=(TensorAt a, const Tensor& b) { return binary(OpKind::le, a.t, b, a.loc); }
Tensor operator>(TensorAt a, const Tensor& b) { return binary(OpKind::gt, a.t, b, a.loc); }
Tensor operator>=(TensorAt a, const Tensor& b) { return binary(OpKind::ge, a.t, b, a.loc); }
Tensor operator==(TensorAt a, Scalar b) { return binary_scalar(OpKind::eq, a.t, b, a.loc); }
Tensor operator!=(TensorAt a, Scalar b) { return binary_scalar(OpKind::ne, a.t, b, a.loc); }
Tensor operator<(TensorAt a, Scalar b) { return binary_scalar(OpKind::lt, a.t, b, a.loc); }
Tensor operator<=(TensorAt a, Scalar b) { return binary_scalar(OpKind::le, a.t, b, a.loc); }
Tensor operator>(TensorAt a, Scalar b) { return binary_scalar(OpKind::gt, a.t, b, a.loc); }
Tensor operator>=(TensorAt a, Scalar b) { return binary_scalar(OpKind::ge, a.t, b, a.loc); }

Tensor matmul(const Tensor& a, const Tensor& b, Loc l) { return a.matmul(b, l); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b, Loc l) {
  const auto [x, y] = zero_dim_rule(a, b, l);
  return apply(OpKind::where, {c, x, y}, {}, here(l));
}
Tensor maximum(const Tensor& a, const Tensor& b, Loc l) { return a.maximum(b, l); }
Tensor minimum(const Tensor& a, const Tensor& b, Loc l) { return a.minimum(b, l); }
Tensor logical_and(const Tensor& a, const Tensor& b, Loc l) { return a.logical_and(b, l); }
Tensor logical_or(const Tensor& a, const Tensor& b, Loc l) { return a.logical_or(b, l); }
Tensor exp(const Tensor& x, Loc l) { return x.exp(l); }
Tensor log(const Tensor& x, Loc l) { return x.log(l); }
Tensor tanh(const Tensor& x, Loc l) { return x.tanh(l); }
Tensor erf(const Tensor& x, Loc l) { return x.erf(l); }
Tensor sigmoid(const Tensor& x, Loc l) { return x.sigmoid(l); }
Tensor relu(const Tensor& x, Loc l) { return x.relu(l); }
Tensor softmax(const Tensor& x, int64_t d, Loc l) { return x.softmax(d, l); }
Tensor log_softmax(const Tensor& x, int64_t d, Loc l) { return x.log_softmax(d, l); }

}  // namespace kiln
