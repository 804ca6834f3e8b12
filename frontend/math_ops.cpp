// More elementwise math and reductions: log1p, expm1 and rounding (table ops),
// and the composites built from table ops, so autodiff, tracing and fusion see
// ordinary nodes: reciprocal, square, fmod/remainder, isnan/isinf, all/any,
// logsumexp, norm, prod, and var/std over one dim; and the scan ops (cumsum,
// cumprod, logcumsumexp), cummax and cummin (composites: a doubling scan of
// maximum or minimum and a gather), and the binary math ops (logaddexp,
// atan2, hypot).
#include <algorithm>
#include <cmath>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"

namespace kiln {

using detail::apply;
using detail::here;

namespace {

Tensor table_unary(OpKind k, const Tensor& x, Loc l) { return apply(k, {x}, {}, here(l)); }

// floor, ceil, round, trunc: integers and bools are integral already (a copy,
// as in PyTorch); floats go through the table op.
Tensor rounding(OpKind k, const Tensor& x, Loc l) {
  if (!is_floating(x.dtype())) return x.clone(l);
  return table_unary(k, x, l);
}

// fmod or remainder (table ops). An integer divisor is checked for zeros first,
// eagerly at once and traced when the plan runs: PyTorch raises there too.
Tensor modulo(OpKind k, const Tensor& a, const Tensor& b, Loc l) {
  const DType out = promote_types(a.dtype(), b.dtype());
  if (out == DType::b8)
    throw Error(std::string(op_name(k)) + ": expected numeric tensors, got bool", here(l));
  if (is_floating(out)) return apply(k, {a, b}, {}, here(l));
  const Tensor divisor =
      detail::checked_values(OpKind::check_nonzero, b, {{AttrKey::name, std::string(op_name(k))}}, l);
  return apply(k, {a, divisor}, {}, here(l));
}

Tensor scalar_like(const Tensor& like, Scalar s, Loc l) {
  return detail::scalar_operand(like, s, here(l));
}

}  // namespace

Tensor Tensor::log1p(Loc l) const { return table_unary(OpKind::log1p, *this, l); }
Tensor Tensor::log2(Loc l) const { return table_unary(OpKind::log2, *this, l); }
Tensor Tensor::log10(Loc l) const { return table_unary(OpKind::log10, *this, l); }
Tensor Tensor::expm1(Loc l) const { return table_unary(OpKind::expm1, *this, l); }
Tensor Tensor::floor(Loc l) const { return rounding(OpKind::floor, *this, l); }
Tensor Tensor::ceil(Loc l) const { return rounding(OpKind::ceil, *this, l); }
Tensor Tensor::round(Loc l) const { return rounding(OpKind::round, *this, l); }
Tensor Tensor::trunc(Loc l) const { return rounding(OpKind::trunc, *this, l); }

Tensor Tensor::reciprocal(Loc l) const { return scalar_like(*this, 1.0, l).div(*this, l); }
Tensor Tensor::square(Loc l) const { return mul(*this, l); }

Tensor Tensor::fmod(const Tensor& other, Loc l) const { return modulo(OpKind::fmod, *this, other, l); }
Tensor Tensor::fmod(Scalar other, Loc l) const {
  return modulo(OpKind::fmod, *this, scalar_like(*this, other, l), l);
}
Tensor Tensor::remainder(const Tensor& other, Loc l) const {
  return modulo(OpKind::remainder, *this, other, l);
}
Tensor Tensor::remainder(Scalar other, Loc l) const {
  return modulo(OpKind::remainder, *this, scalar_like(*this, other, l), l);
}

Tensor Tensor::isnan(Loc l) const {
  if (!is_floating(dtype())) return zeros(sizes(), TensorOptions(kBool).device(device()), l);
  return ne(*this, l);
}
Tensor Tensor::isinf(Loc l) const {
  if (!is_floating(dtype())) return zeros(sizes(), TensorOptions(kBool).device(device()), l);
  return abs(l).eq(Scalar(INFINITY), l);
}
Tensor Tensor::isfinite(Loc l) const {
  if (!is_floating(dtype())) return ones(sizes(), TensorOptions(kBool).device(device()), l);
  return sub(*this, 1, l).eq(Scalar(0.0), l);  // NaN and +-inf give NaN here
}

// all: no element is zero (true for an empty tensor); any: some element is not.
// Counted in int64 so that empty reductions are defined.
Tensor Tensor::all(Loc l) const { return eq(Scalar(0), l).sum(l).eq(Scalar(0), l); }
Tensor Tensor::any(Loc l) const { return ne(Scalar(0), l).sum(l).gt(Scalar(0), l); }
Tensor Tensor::all(int64_t dim, bool keepdim, Loc l) const {
  return eq(Scalar(0), l).sum(dim, keepdim, l).eq(Scalar(0), l);
}
Tensor Tensor::any(int64_t dim, bool keepdim, Loc l) const {
  return ne(Scalar(0), l).sum(dim, keepdim, l).gt(Scalar(0), l);
}

// log(sum(exp(x))) shifted by the (detached) maximum, so large values do not
// overflow; a slice that is all -inf gives -inf, as in PyTorch. With no elements
// there is no maximum (amax raises) and nothing to overflow: the sum of nothing
// is 0, and every result -inf, as PyTorch returns.
Tensor Tensor::logsumexp(std::vector<int64_t> dims, bool keepdim, Loc l) const {
  Tensor x = is_floating(dtype()) ? *this : to(kFloat32, l);
  if (x.numel() == 0) return x.exp(l).sum(dims, keepdim, l).log(l);
  Tensor m = x.amax(dims, true, l).detach();
  m = where(m.isinf(l), zeros_like(m, l), m, l);
  Tensor s = x.sub(m, 1, l).exp(l).sum(dims, keepdim, l).log(l);
  return s.add(keepdim ? m : m.reshape(s.sizes(), l), 1, l);
}
Tensor Tensor::logsumexp(int64_t d, bool keepdim, Loc l) const {
  return logsumexp(std::vector<int64_t>{d}, keepdim, l);
}

// The p-norm over `dims`: p = 2 (sqrt of the sum of squares), 1, inf (largest
// magnitude), -inf (smallest), 0 (count of non-zeros) or any other p.
Tensor Tensor::norm(double p, std::vector<int64_t> dims, bool keepdim, Loc l) const {
  if (!is_floating(dtype()))
    throw Error("norm: expected a floating tensor, got " + std::string(dtype_name(dtype())),
                here(l));
  if (std::isnan(p)) throw Error("norm: expected a number for p, got NaN", here(l));
  if (dims.empty()) {
    dims.resize(size_t(dim()));
    for (int64_t d = 0; d < dim(); ++d) dims[size_t(d)] = d;
  }
  Tensor a = abs(l);
  if (std::isinf(p)) return p > 0 ? a.amax(dims, keepdim, l) : a.amin(dims, keepdim, l);
  if (p == 0) return ne(Scalar(0), l).to(dtype(), l).sum(dims, keepdim, l);
  if (p == 1) return a.sum(dims, keepdim, l);
  const Tensor sum = p == 2 ? mul(*this, l).sum(dims, keepdim, l) : a.pow(p, l).sum(dims, keepdim, l);
  auto root = [&](const Tensor& s) { return p == 2 ? s.sqrt(l) : s.pow(1.0 / p, l); };
  if (!(grad_mode_enabled() && sum.requires_grad())) return root(sum);
  // PyTorch's gradient where the norm is 0 is 0; the root's own is infinite
  // there, and times the powers' 0 it would be NaN. So the root is taken of 1
  // there and multiplied by 0: the same values (+ 0 and * 1 elsewhere are exact).
  const Tensor zero = sum.eq(Scalar(0), l).to(sum.dtype(), l);
  return root(sum.add(zero, 1, l)).mul(sum.ne(Scalar(0), l).to(sum.dtype(), l), l);
}
Tensor Tensor::norm(double p, Loc l) const { return norm(p, std::vector<int64_t>{}, false, l); }

namespace {

// cumsum, cumprod, logcumsumexp: the table's scan ops (O(n), one pass per line).
Tensor scan(OpKind k, const Tensor& x, int64_t d, Loc l) {
  const int64_t nd = detail::checked_dim(d, std::max<int64_t>(x.dim(), 1), op_name(k), l);
  return apply(k, {x}, {{AttrKey::dim, nd}, {AttrKey::reverse, int64_t(0)}}, here(l));
}

}  // namespace

namespace {

// The running maximum (minimum) along d by doubling: after the step with
// shift s each element holds the extremum of the 2s elements up to it (the
// first s take themselves again). ceil(log2 n) steps of table ops.
Tensor running_extremum(const Tensor& x, int64_t d, bool largest, Loc l) {
  const int64_t n = x.size(d);
  Tensor v = x;
  for (int64_t s = 1; s < n; s *= 2) {
    const Tensor before = cat({v.narrow(d, 0, s, l), v.narrow(d, 0, n - s, l)}, d, l);
    v = largest ? v.maximum(before, l) : v.minimum(before, l);
  }
  return v;
}

// cummax / cummin: the index of each running extremum is the last position up
// to it where the element equals the running extremum there (or is NaN, which
// stays the extremum once seen), as PyTorch's >= (<=) rule; the values are x
// gathered at the indices, so the gradient goes to the elements they came from.
std::tuple<Tensor, Tensor> cumulative_extremum(const Tensor& x, int64_t dim, bool largest, Loc l) {
  const char* op = largest ? "cummax" : "cummin";
  const int64_t d = detail::checked_dim(dim, std::max<int64_t>(x.dim(), 1), op, l);
  if (x.dim() == 0) {
    auto [v, i] = cumulative_extremum(x.reshape({1}, l), 0, largest, l);
    return {v.reshape({}, l), i.reshape({}, l)};
  }
  const Tensor key = x.dtype() == kBool ? x.detach().to(kInt64, l) : x.detach();
  Tensor fresh = key.eq(running_extremum(key, d, largest, l), l);
  if (is_floating(key.dtype())) fresh = fresh.logical_or(key.isnan(l), l);
  Shape along(static_cast<size_t>(x.dim()), 1);
  along[static_cast<size_t>(d)] = x.size(d);
  const Tensor pos = arange(x.size(d), TensorOptions(kInt64).device(x.device()), l)
                         .reshape(along, l)
                         .expand(x.sizes(), l);
  const Tensor index = running_extremum(where(fresh, pos, zeros_like(pos, l), l), d, true, l);
  return {x.gather(d, index, l), index};
}

}  // namespace

std::tuple<Tensor, Tensor> Tensor::cummax(int64_t d, Loc l) const {
  return cumulative_extremum(*this, d, true, l);
}
std::tuple<Tensor, Tensor> Tensor::cummin(int64_t d, Loc l) const {
  return cumulative_extremum(*this, d, false, l);
}
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t d, Loc l) { return x.cummax(d, l); }
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t d, Loc l) { return x.cummin(d, l); }

Tensor Tensor::cumsum(int64_t d, Loc l) const { return scan(OpKind::cumsum, *this, d, l); }
Tensor Tensor::cumprod(int64_t d, Loc l) const { return scan(OpKind::cumprod, *this, d, l); }
Tensor Tensor::logcumsumexp(int64_t d, Loc l) const { return scan(OpKind::logcumsumexp, *this, d, l); }
Tensor Tensor::logaddexp(const Tensor& other, Loc l) const {
  return apply(OpKind::logaddexp, {*this, other}, {}, here(l));
}
Tensor Tensor::atan2(const Tensor& other, Loc l) const {
  return apply(OpKind::atan2, {*this, other}, {}, here(l));
}
Tensor Tensor::hypot(const Tensor& other, Loc l) const {
  return apply(OpKind::hypot, {*this, other}, {}, here(l));
}

// The product along `dim` as a pairwise tree of multiplications: the dim moved
// last and padded with ones to a power of two m, then log2(m) levels of
// even-position elements times odd-position ones (slices with step 2). No
// log/exp, so it is exact where the products are; eager and traced multiply in
// the same order; the gradient is mul's, right at zeros (unlike prod / x).
// Bools and integers multiply in int64 (wrapping on overflow, as in PyTorch).
Tensor Tensor::prod(int64_t d, bool keepdim, Loc l) const {
  const int64_t nd = detail::checked_dim(d, std::max<int64_t>(dim(), 1), "prod", l);
  const DType out = is_floating(dtype()) ? dtype() : DType::i64;
  Tensor x = to(out, l);
  if (dim() == 0) return x.clone(l);
  Tensor t = x.transpose(nd, -1, l);
  const int64_t n = size(nd), last = t.dim() - 1;
  int64_t m = 1;
  while (m < n) m *= 2;
  if (m > n) {  // an empty dim pads to one 1
    const Attrs pad{{AttrKey::dim, last},
                    {AttrKey::low, int64_t(0)},
                    {AttrKey::high, m - n},
                    {AttrKey::interior, int64_t(0)}};
    const TensorOptions o = TensorOptions(out).device(device());
    Tensor padding = arange(m, TensorOptions(kInt64).device(device()), l).ge(Scalar(n), l);
    t = where(padding, ones({}, o, l), apply(OpKind::pad, {t}, pad, here(l)), l);
  }
  for (; m > 1; m /= 2)
    t = t.slice(last, 0, std::nullopt, 2, l).mul(t.slice(last, 1, std::nullopt, 2, l), l);
  t = t.transpose(nd, -1, l);  // dim nd now has size 1
  return keepdim ? t : t.squeeze(nd, l);
}
Tensor Tensor::prod(Loc l) const {
  return dim() == 0 ? prod(0, false, l) : flatten(0, -1, l).prod(0, false, l);
}

Tensor Tensor::var(int64_t d, bool unbiased, bool keepdim, Loc l) const {
  return var(std::vector<int64_t>{d}, unbiased, keepdim, l);
}
Tensor Tensor::std(int64_t d, bool unbiased, bool keepdim, Loc l) const {
  return std(std::vector<int64_t>{d}, unbiased, keepdim, l);
}

Tensor log1p(const Tensor& x, Loc l) { return x.log1p(l); }
Tensor log2(const Tensor& x, Loc l) { return x.log2(l); }
Tensor log10(const Tensor& x, Loc l) { return x.log10(l); }
Tensor expm1(const Tensor& x, Loc l) { return x.expm1(l); }
Tensor floor(const Tensor& x, Loc l) { return x.floor(l); }
Tensor ceil(const Tensor& x, Loc l) { return x.ceil(l); }
Tensor round(const Tensor& x, Loc l) { return x.round(l); }
Tensor trunc(const Tensor& x, Loc l) { return x.trunc(l); }
Tensor isnan(const Tensor& x, Loc l) { return x.isnan(l); }
Tensor isinf(const Tensor& x, Loc l) { return x.isinf(l); }
Tensor logsumexp(const Tensor& x, std::vector<int64_t> dims, bool keepdim, Loc l) {
  return x.logsumexp(std::move(dims), keepdim, l);
}
Tensor cumsum(const Tensor& x, int64_t dim, Loc l) { return x.cumsum(dim, l); }
Tensor cumprod(const Tensor& x, int64_t dim, Loc l) { return x.cumprod(dim, l); }
Tensor logcumsumexp(const Tensor& x, int64_t dim, Loc l) { return x.logcumsumexp(dim, l); }
Tensor logaddexp(const Tensor& a, const Tensor& b, Loc l) { return a.logaddexp(b, l); }
Tensor atan2(const Tensor& a, const Tensor& b, Loc l) { return a.atan2(b, l); }
Tensor hypot(const Tensor& a, const Tensor& b, Loc l) { return a.hypot(b, l); }
Tensor prod(const Tensor& x, Loc l) { return x.prod(l); }
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, Loc l) { return x.prod(dim, keepdim, l); }

}  // namespace kiln
