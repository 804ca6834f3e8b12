// More of libtorch's tensor functions, each a composite of table ops (so each
// runs eagerly, traces and differentiates like the ops it is made of):
//   diag, diagonal, trace      index_select of the flattened last two dims
//   lerp                       PyTorch's two-sided form, by `where` for a tensor weight
//   addmm, baddbmm, addbmm,    beta * input + alpha * product; beta = 0 drops the
//   addmv, addr                input (its NaN too), as PyTorch
//   median                     kthvalue at (n + 1) / 2, NaN where a NaN is
//   repeat_interleave(int)     unsqueeze, expand, reshape
//   nan_to_num, isclose        comparisons and `where`
//   movedim, unflatten, diff   permute, reshape, narrow
//   heaviside, logical_xor,    comparisons; floor_divide is PyTorch's div_floor
//   floor_divide               (fmod-corrected, so that it agrees where a / b rounds)
//   cross, kron, rot90         narrow and cat; an interleaving reshape; flip and transpose
//   histc                      scatter_add of in-range elements into their bins
//   meshgrid, cartesian_prod,  expand; stack
//   cdist, searchsorted,       broadcast differences and norms; counts of comparisons
//   bucketize
//   tensordot                  permute, reshape, one matmul
//   block_diag, combinations   cat of zero-padded rows; index_select of host-built indices
//   linalg norms               Tensor::norm and sums of |x|
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor.h"

namespace kiln {

using detail::here;

namespace {

TensorOptions like(const Tensor& t, DType dt) {
  return TensorOptions(dt).device(t.device());
}

/// An int64 tensor of `values` on t's device.
Tensor indices_like(const Tensor& t, const std::vector<int64_t>& values, Shape shape, Loc l) {
  std::vector<double> v(values.begin(), values.end());
  return from_vector(v, std::move(shape), like(t, kInt64), l);
}

void check_floating(const Tensor& x, const char* who, Loc l) {
  if (!is_floating(x.dtype()))
    throw Error(std::string(who) + ": expected a floating tensor, got " + dtype_name(x.dtype()),
                here(l));
}

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> d(static_cast<size_t>(x.dim()));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

/// beta * input + alpha * product (input broadcast to the product's shape);
/// beta = 0 leaves the input out, NaN and all, as PyTorch's addmm family.
Tensor scaled_sum(const Tensor& input, const Tensor& product, Scalar beta, Scalar alpha,
                  const char* who, Loc l) {
  bool fits = input.dim() <= product.dim();
  for (int64_t i = 1; fits && i <= input.dim(); ++i) {
    const int64_t s = input.size(-i);
    fits = s == 1 || s == product.size(-i);
  }
  if (!fits)
    throw Error(std::string(who) + ": the input of shape " + shape_str(input.sizes()) +
                    " does not broadcast to the product's shape " + shape_str(product.sizes()),
                here(l));
  Tensor p = alpha.toDouble() == 1 ? product : product.mul(alpha, l);
  if (beta.toDouble() == 0) return p;
  return (beta.toDouble() == 1 ? input : input.mul(beta, l)).add(p, 1, l);
}

/// Each of `dims` in [0, rank), in the order given (checked_dims sorts and
/// merges repeats, which suits a reduction, not a mapping of dims).
std::vector<int64_t> each_dim(const std::vector<int64_t>& dims, int64_t rank, const char* op, Loc l) {
  std::vector<int64_t> r;
  for (int64_t d : dims) r.push_back(detail::checked_dim(d, rank, op, l));
  return r;
}

void check_rank(const Tensor& t, int64_t rank, const char* who, const char* name, Loc l) {
  if (t.dim() != rank)
    throw Error(std::string(who) + ": expected " + name + " to have " + std::to_string(rank) +
                    " dims, got shape " + shape_str(t.sizes()),
                here(l));
}

}  // namespace

// ---- diagonals ----

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2, Loc l) const {
  const int64_t d1 = detail::checked_dim(dim1, dim(), "diagonal", l);
  const int64_t d2 = detail::checked_dim(dim2, dim(), "diagonal", l);
  if (d1 == d2)
    throw Error("diagonal: expected two different dims, got " + std::to_string(dim1) + " and " +
                    std::to_string(dim2),
                here(l));
  std::vector<int64_t> perm;
  Shape out;
  for (int64_t d = 0; d < dim(); ++d)
    if (d != d1 && d != d2) {
      perm.push_back(d);
      out.push_back(size(d));
    }
  perm.push_back(d1);
  perm.push_back(d2);
  const int64_t m = size(d1), n = size(d2);
  const int64_t row0 = offset >= 0 ? 0 : -offset, col0 = offset >= 0 ? offset : 0;
  const int64_t len = std::max<int64_t>(0, std::min(m - row0, n - col0));
  std::vector<int64_t> at(static_cast<size_t>(len));
  for (int64_t k = 0; k < len; ++k) at[size_t(k)] = (row0 + k) * n + col0 + k;
  Shape flat = out;
  flat.push_back(m * n);
  out.push_back(len);
  if (len == 0) return zeros(out, like(*this, dtype()), l);
  return permute(perm, l).reshape(flat, l).index_select(static_cast<int64_t>(flat.size()) - 1,
                                                        indices_like(*this, at, {len}, l), l);
}

Tensor Tensor::diag(int64_t k, Loc l) const {
  if (dim() == 2) return diagonal(k, 0, 1, l);
  if (dim() != 1)
    throw Error("diag: expected a 1-D or 2-D tensor, got shape " + shape_str(sizes()), here(l));
  const int64_t n = size(0), m = n + (k < 0 ? -k : k);
  std::vector<double> mask(static_cast<size_t>(m * m), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j) mask[size_t(i * m + j)] = j - i == k ? 1.0 : 0.0;
  // Row i holds x[i] on the diagonal above the main one; column j holds x[j]
  // below it. x is padded with zeros to m, so either reads in range.
  Tensor v = m == n ? *this : cat({*this, zeros({m - n}, like(*this, dtype()), l)}, 0, l);
  v = k >= 0 ? v.unsqueeze(1, l) : v.unsqueeze(0, l);
  return where(from_vector(mask, {m, m}, like(*this, kBool), l), v,
               zeros({}, like(*this, dtype()), l), l);
}

Tensor Tensor::trace(Loc l) const {
  check_rank(*this, 2, "trace", "the input", l);
  return diagonal(0, 0, 1, l).sum(l);
}

// ---- arithmetic ----

Tensor Tensor::lerp(const Tensor& end, Scalar weight, Loc l) const {
  check_floating(*this, "lerp", l);
  const double w = weight.toDouble();
  const Tensor d = end.sub(*this, 1, l);
  if (std::abs(w) < 0.5) return add(d.mul(weight, l), 1, l);
  return end.sub(d.mul(Scalar(1.0 - w), l), 1, l);
}

Tensor Tensor::lerp(const Tensor& end, const Tensor& weight, Loc l) const {
  check_floating(*this, "lerp", l);
  const Tensor d = end.sub(*this, 1, l);
  const Tensor w = weight.to(dtype(), l);
  const Tensor from_start = add(w.mul(d, l), 1, l);
  const Tensor from_end = end.sub(d.mul(w.neg(l).add(Scalar(1.0), l), l), 1, l);
  return where(w.abs(l).lt(Scalar(0.5), l), from_start, from_end, l);
}

Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha, Loc l) const {
  return scaled_sum(*this, mat1.mm(mat2, l), beta, alpha, "addmm", l);
}
Tensor Tensor::baddbmm(const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha, Loc l) const {
  check_rank(b1, 3, "baddbmm", "batch1", l);
  check_rank(b2, 3, "baddbmm", "batch2", l);
  return scaled_sum(*this, b1.bmm(b2, l), beta, alpha, "baddbmm", l);
}
Tensor Tensor::addbmm(const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha, Loc l) const {
  check_rank(b1, 3, "addbmm", "batch1", l);
  check_rank(b2, 3, "addbmm", "batch2", l);
  return scaled_sum(*this, b1.bmm(b2, l).sum(0, false, l), beta, alpha, "addbmm", l);
}
Tensor Tensor::addmv(const Tensor& mat, const Tensor& vec, Scalar beta, Scalar alpha, Loc l) const {
  check_rank(mat, 2, "addmv", "mat", l);
  check_rank(vec, 1, "addmv", "vec", l);
  return scaled_sum(*this, mat.matmul(vec, l), beta, alpha, "addmv", l);
}
Tensor Tensor::addr(const Tensor& v1, const Tensor& v2, Scalar beta, Scalar alpha, Loc l) const {
  check_rank(v1, 1, "addr", "vec1", l);
  check_rank(v2, 1, "addr", "vec2", l);
  return scaled_sum(*this, v1.outer(v2, l), beta, alpha, "addr", l);
}

Tensor Tensor::floor_divide(const Tensor& other, Loc l) const {
  const DType dt = promote_types(dtype(), other.dtype());
  const Tensor a = to(dt, l), b = other.to(dt, l);
  if (!is_floating(dt)) {
    // a - remainder(a, b) is a multiple of b, so the quotient is exact in f64
    // for the integers f64 holds exactly (|a| < 2^53).
    const Tensor q = a.sub(a.remainder(b, l), 1, l).to(kFloat64, l).div(b.to(kFloat64, l), l);
    return q.round(l).to(dt, l);
  }
  // PyTorch's div_floor: from fmod, so that a / b rounding up to an integer
  // does not lift the quotient a step.
  const Tensor mod = a.fmod(b, l);
  Tensor div = a.sub(mod, 1, l).div(b, l);
  const Tensor step = mod.ne(Scalar(0), l).logical_and(b.lt(Scalar(0), l).ne(mod.lt(Scalar(0), l), l), l);
  div = where(step, div.sub(Scalar(1), l), div, l);
  Tensor fl = div.floor(l);
  fl = where(div.sub(fl, 1, l).gt(Scalar(0.5), l), fl.add(Scalar(1), l), fl, l);
  return where(b.eq(Scalar(0), l), a.div(b, l), fl, l);
}
Tensor Tensor::floor_divide(Scalar other, Loc l) const {
  const DType dt = promote_with_scalar(dtype(), other.kind);
  return floor_divide(full({}, other, like(*this, dt), l), l);
}

Tensor Tensor::heaviside(const Tensor& values, Loc l) const {
  const DType dt = promote_types(dtype(), values.dtype());
  NoGradGuard no_grad;
  const Tensor x = detach();
  return where(x.eq(Scalar(0), l), values.detach().to(dt, l), x.gt(Scalar(0), l).to(dt, l), l);
}

Tensor Tensor::logical_xor(const Tensor& other, Loc l) const {
  auto truth = [&](const Tensor& t) { return t.dtype() == kBool ? t : t.ne(Scalar(0), l); };
  return truth(*this).ne(truth(other), l);
}

// ---- reductions and comparisons ----

Tensor Tensor::median(Loc l) const {
  const Tensor flat = reshape({-1}, l);
  const int64_t n = flat.numel();
  if (n == 0) return full({}, std::numeric_limits<double>::quiet_NaN(), like(*this, dtype()), l);
  const Tensor v = std::get<0>(flat.kthvalue((n - 1) / 2 + 1, 0, false, l));
  if (!is_floating(dtype())) return v;
  return where(flat.isnan(l).any(l), full({}, std::numeric_limits<double>::quiet_NaN(), like(*this, dtype()), l),
               v, l);
}

std::tuple<Tensor, Tensor> Tensor::median(int64_t dim_, bool keepdim, Loc l) const {
  const int64_t d = dim() == 0 ? 0 : detail::checked_dim(dim_, dim(), "median", l);
  const int64_t n = dim() == 0 ? 1 : size(d);
  auto [v, i] = kthvalue((n - 1) / 2 + 1, d, keepdim, l);
  if (!is_floating(dtype()) || dim() == 0) return {v, i};
  // A row with a NaN has the NaN as its median, at its first NaN (PyTorch).
  const Tensor nan = isnan(l);
  const Tensor has = nan.any(d, keepdim, l);
  const Tensor first = nan.to(kInt32, l).argmax(d, keepdim, l);
  return {where(has, full({}, std::numeric_limits<double>::quiet_NaN(), like(*this, dtype()), l), v, l),
          where(has, first, i, l)};
}

Tensor Tensor::nan_to_num(std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf, Loc l) const {
  if (!is_floating(dtype())) return clone(l);
  const bool f64 = dtype() == kFloat64;
  const double big = f64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
  const double inf = std::numeric_limits<double>::infinity();
  const TensorOptions o = like(*this, dtype());
  Tensor r = where(eq(Scalar(inf), l), full({}, posinf.value_or(big), o, l), *this, l);
  r = where(eq(Scalar(-inf), l), full({}, neginf.value_or(-big), o, l), r, l);
  return where(isnan(l), full({}, nan.value_or(0.0), o, l), r, l);
}

Tensor Tensor::isclose(const Tensor& other, double rtol, double atol, bool equal_nan, Loc l) const {
  if (dtype() != other.dtype())
    throw Error(std::string("isclose: expected tensors of one dtype, got ") + dtype_name(dtype()) +
                    " and " + dtype_name(other.dtype()),
                here(l));
  if (rtol < 0 || atol < 0)
    throw Error("isclose: expected non-negative rtol and atol, got " + std::to_string(rtol) + " and " +
                    std::to_string(atol),
                here(l));
  NoGradGuard no_grad;
  const Tensor a = detach(), b = other.detach();
  Tensor close = a.eq(b, l);
  if (equal_nan && is_floating(dtype())) close = close.logical_or(a.isnan(l).logical_and(b.isnan(l), l), l);
  if (rtol == 0 && atol == 0) return close;
  const Tensor fa = is_floating(dtype()) ? a : a.to(kFloat32, l);
  const Tensor fb = is_floating(dtype()) ? b : b.to(kFloat32, l);
  const Tensor allowed = fb.mul(Scalar(rtol), l).abs(l).add(Scalar(atol), l);
  const Tensor actual = fa.sub(fb, 1, l).abs(l);
  return close.logical_or(actual.isfinite(l).logical_and(actual.le(allowed, l), l), l);
}

std::tuple<Tensor, Tensor> Tensor::aminmax(std::optional<int64_t> d, bool keepdim, Loc l) const {
  // The min and max of no elements have no identity: an error, of all elements
  // or along an empty dim, as PyTorch (other dims may be empty).
  if (!d) {
    if (numel() == 0)
      throw Error("aminmax: expected a tensor with elements, got shape " + shape_str(sizes()), here(l));
    if (dim() == 0) return {clone(l), clone(l)};
    std::vector<int64_t> dims = all_dims(*this);
    return {amin(dims, keepdim, l), amax(dims, keepdim, l)};
  }
  const int64_t dd = detail::checked_dim(*d, std::max<int64_t>(dim(), 1), "aminmax", l);
  if (dim() == 0) return {clone(l), clone(l)};
  if (size(dd) == 0)
    throw Error("aminmax: expected reduction dim " + std::to_string(dd) +
                    " to have a non-zero size, got input shape " + shape_str(sizes()),
                here(l));
  return {amin({dd}, keepdim, l), amax({dd}, keepdim, l)};
}

Tensor Tensor::histc(int64_t bins, Scalar min, Scalar max, Loc l) const {
  check_floating(*this, "histc", l);
  if (bins <= 0) throw Error("histc: expected bins > 0, got " + std::to_string(bins), here(l));
  if (min.toDouble() > max.toDouble())
    throw Error("histc: expected min <= max, got " + std::to_string(min.toDouble()) + " > " +
                    std::to_string(max.toDouble()),
                here(l));
  NoGradGuard no_grad;
  const Tensor x = detach().reshape({-1}, l).to(kFloat64, l);
  const TensorOptions o = like(*this, kFloat64);
  Tensor lo = full({}, min, o, l), hi = full({}, max, o, l);
  if (min.toDouble() == max.toDouble() && x.numel() > 0) {
    // The data's range; one that is a single value widens by 1 each way.
    lo = x.min(l);
    hi = x.max(l);
    const Tensor same = lo.eq(hi, l);
    lo = where(same, lo.sub(Scalar(1), l), lo, l);
    hi = where(same, hi.add(Scalar(1), l), hi, l);
  } else if (min.toDouble() == max.toDouble()) {
    lo = lo.sub(Scalar(1), l);
    hi = hi.add(Scalar(1), l);
  }
  const Tensor inside = x.ge(lo, l).logical_and(x.le(hi, l), l);
  Tensor bin = x.sub(lo, 1, l).mul(Scalar(double(bins)), l).div(hi.sub(lo, 1, l), l).floor(l);
  bin = where(inside, bin.clamp(Scalar(0), Scalar(double(bins - 1)), l), zeros({}, o, l), l);
  return zeros({bins}, like(*this, dtype()), l)
      .scatter_add(0, bin.to(kInt64, l), inside.to(dtype(), l), l);
}

Tensor Tensor::addcmul(const Tensor& t1, const Tensor& t2, Scalar value, Loc l) const {
  const Tensor p = t1.mul(t2, l);
  return add(value.toDouble() == 1 ? p : p.mul(value, l), 1, l);
}
Tensor Tensor::addcdiv(const Tensor& t1, const Tensor& t2, Scalar value, Loc l) const {
  const Tensor q = t1.div(t2, l);
  return add(value.toDouble() == 1 ? q : q.mul(value, l), 1, l);
}

Tensor Tensor::count_nonzero(Dims dims, Loc l) const {
  const Tensor nz = ne(Scalar(0), l).to(kInt64, l);
  return dims.empty() ? nz.sum(l) : nz.sum(std::move(dims), false, l);
}
Tensor Tensor::nansum(Dims dims, bool keepdim, Loc l) const {
  const Tensor x = is_floating(dtype()) ? where(isnan(l), zeros({}, like(*this, dtype()), l), *this, l) : *this;
  return dims.empty() && !keepdim ? x.sum(l) : x.sum(dims.empty() ? all_dims(*this) : std::vector<int64_t>(dims), keepdim, l);
}
Tensor Tensor::nanmean(Dims dims, bool keepdim, Loc l) const {
  check_floating(*this, "nanmean", l);
  const Tensor count = isnan(l).logical_not(l).to(dtype(), l).nansum(dims, keepdim, l);
  return nansum(dims, keepdim, l).div(count, l);
}

Tensor Tensor::logit(std::optional<double> eps, Loc l) const {
  const Tensor p = eps ? clamp(Scalar(*eps), Scalar(1.0 - *eps), l) : *this;
  return p.div(p.neg(l).add(Scalar(1), l), l).log(l);
}
Tensor Tensor::xlogy(const Tensor& other, Loc l) const {
  const Tensor prod = mul(other.log(l), l);
  const Tensor zero = zeros({}, like(prod, prod.dtype()), l);
  return where(other.isnan(l), other.to(prod.dtype(), l), where(eq(Scalar(0), l), zero, prod, l), l);
}
Tensor Tensor::sinc(Loc l) const {
  check_floating(*this, "sinc", l);
  const Tensor px = mul(Scalar(M_PI), l);
  // At 0 the quotient's value and gradient are those of 1 - (pi x)^2 / 6.
  const Tensor zero = eq(Scalar(0), l);
  const Tensor safe = where(zero, ones({}, like(*this, dtype()), l), px, l);
  return where(zero, ones({}, like(*this, dtype()), l).sub(px.mul(px, l).div(Scalar(6), l), 1, l),
               safe.sin(l).div(safe, l), l);
}
Tensor Tensor::deg2rad(Loc l) const { return mul(Scalar(M_PI / 180.0), l); }
Tensor Tensor::rad2deg(Loc l) const { return mul(Scalar(180.0 / M_PI), l); }
Tensor Tensor::frac(Loc l) const { return sub(trunc(l), 1, l); }
Tensor Tensor::signbit(Loc l) const {
  if (!is_floating(dtype())) return lt(Scalar(0), l);
  // -0.0 is the one negative that compares equal to 0: 1 / -0.0 is -inf.
  NoGradGuard no_grad;
  const Tensor x = detach();
  return x.lt(Scalar(0), l).logical_or(
      x.eq(Scalar(0), l).logical_and(x.reciprocal(l).lt(Scalar(0), l), l), l);
}
Tensor Tensor::copysign(const Tensor& other, Loc l) const {
  const Tensor a = is_floating(dtype()) ? abs(l) : to(kFloat32, l).abs(l);
  return where(other.signbit(l), a.neg(l), a, l);
}
Tensor Tensor::float_power(const Tensor& e, Loc l) const { return to(kFloat64, l).pow(e.to(kFloat64, l), l); }
Tensor Tensor::float_power(Scalar e, Loc l) const { return to(kFloat64, l).pow(Scalar(e.toDouble()), l); }

// ---- selections along a dim ----

namespace {
/// A bool mask [n] of the positions `index` names along a dim of size n, shaped
/// to broadcast against a tensor of `rank` dims at `dim`.
Tensor named_slices(const Tensor& index, int64_t n, int64_t dim, int64_t rank, Loc l) {
  const TensorOptions o = TensorOptions(kInt64).device(index.device());
  Tensor hits = zeros({n}, o, l).index_add(0, index.reshape({-1}, l).to(kInt64, l),
                                           ones({index.numel()}, o, l), 1, l);
  Shape shape(static_cast<size_t>(rank), 1);
  if (rank > 0) shape[size_t(dim)] = n;
  return hits.gt(Scalar(0), l).reshape(shape, l);
}
}  // namespace

Tensor Tensor::index_fill(int64_t dim_, const Tensor& index, Scalar value, Loc l) const {
  const int64_t d = dim() == 0 ? 0 : detail::checked_dim(dim_, dim(), "index_fill", l);
  const int64_t n = dim() == 0 ? 1 : size(d);
  return where(named_slices(index, n, d, dim(), l), full({}, value, like(*this, dtype()), l), *this, l);
}

Tensor Tensor::take(const Tensor& index, Loc l) const {
  if (is_floating(index.dtype()) || index.dtype() == kBool)
    throw Error(std::string("take: expected an integer index, got ") + dtype_name(index.dtype()), here(l));
  const Tensor flat = reshape({-1}, l);
  Tensor i = index.reshape({-1}, l);
  i = where(i.lt(Scalar(0), l), i.add(Scalar(numel()), l), i, l);
  return flat.index_select(0, i, l).reshape(index.sizes(), l);
}

Tensor Tensor::unfold(int64_t dim_, int64_t size_, int64_t step, Loc l) const {
  const int64_t d = dim() == 0 ? 0 : detail::checked_dim(dim_, dim(), "unfold", l);
  const int64_t len = dim() == 0 ? 1 : size(d);
  if (size_ < 0 || size_ > len || step <= 0)
    throw Error("unfold: expected 0 <= size <= " + std::to_string(len) + " and step > 0, got size " +
                    std::to_string(size_) + " and step " + std::to_string(step),
                here(l));
  // A scalar is one window of its one element (or none), as in torch.
  if (dim() == 0) return reshape({1}, l).unfold(0, size_, step, l).reshape({size_}, l);
  return detail::apply(OpKind::unfold, {*this},
                       Attrs{{AttrKey::dim, d}, {AttrKey::size, size_}, {AttrKey::step, step}},
                       here(l));
}

Tensor Tensor::tile(Dims reps, Loc l) const {
  if (static_cast<int64_t>(reps.size()) < dim()) reps.insert(reps.begin(), size_t(dim()) - reps.size(), 1);
  return repeat(std::move(reps), l);
}

// ---- shapes ----
// ---- shapes ----

Tensor Tensor::unflatten(int64_t dim_, std::vector<int64_t> sizes_, Loc l) const {
  const int64_t d = dim_ < 0 ? dim_ + dim() : dim_;
  if (d < 0 || d >= dim())
    throw Error("unflatten: dim " + std::to_string(dim_) + " out of range for an input of shape " +
                    shape_str(sizes()),
                here(l));
  int64_t known = 1, unknown = 0;
  for (int64_t s : sizes_) {
    if (s == -1)
      ++unknown;
    else
      known *= s;
  }
  const bool fits = unknown == 0 ? known == size(d) : unknown == 1 && known > 0 && size(d) % known == 0;
  if (sizes_.empty() || !fits)
    throw Error("unflatten: sizes " + shape_str(sizes_) + " do not multiply to dim " + std::to_string(dim_) +
                    "'s size " + std::to_string(size(d)) + " (input " + shape_str(sizes()) + ")",
                here(l));
  Shape shape(sizes().begin(), sizes().begin() + d);
  for (int64_t s : sizes_) shape.push_back(s == -1 ? size(d) / known : s);
  shape.insert(shape.end(), sizes().begin() + d + 1, sizes().end());
  return reshape(shape, l);
}

Tensor Tensor::movedim(std::vector<int64_t> source, std::vector<int64_t> destination, Loc l) const {
  if (source.size() != destination.size())
    throw Error("movedim: " + std::to_string(source.size()) + " source dims but " +
                    std::to_string(destination.size()) + " destinations",
                here(l));
  const std::vector<int64_t> src = each_dim(source, dim(), "movedim", l);
  const std::vector<int64_t> dst = each_dim(destination, dim(), "movedim", l);
  std::vector<int64_t> perm(static_cast<size_t>(dim()), -1);
  std::vector<bool> taken(static_cast<size_t>(dim()), false);
  for (size_t i = 0; i < src.size(); ++i) {
    if (perm[size_t(dst[i])] != -1 || taken[size_t(src[i])])
      throw Error("movedim: repeated dim in source " + shape_str(source) + " or destination " +
                      shape_str(destination),
                  here(l));
    perm[size_t(dst[i])] = src[i];
    taken[size_t(src[i])] = true;
  }
  int64_t next = 0;
  for (int64_t& p : perm) {
    if (p != -1) continue;
    while (taken[size_t(next)]) ++next;
    p = next++;
  }
  return permute(perm, l);
}

Tensor Tensor::diff(int64_t n, int64_t dim_, const Tensor& prepend, const Tensor& append, Loc l) const {
  if (dim() == 0) throw Error("diff: expected a tensor of at least one dim, got a 0-d tensor", here(l));
  if (n < 0) throw Error("diff: expected n >= 0, got " + std::to_string(n), here(l));
  const int64_t d = detail::checked_dim(dim_, dim(), "diff", l);
  std::vector<Tensor> parts;
  for (const Tensor* t : {&prepend, this, &append})
    if (t->defined()) {
      if (t->dim() != dim())
        throw Error("diff: prepend and append must have the input's " + std::to_string(dim()) +
                        " dims, got shape " + shape_str(t->sizes()),
                    here(l));
      parts.push_back(*t);
    }
  Tensor r = parts.size() == 1 ? *this : cat(parts, d, l);
  for (int64_t i = 0; i < n && r.size(d) > 0; ++i) {
    const int64_t len = r.size(d) - 1;
    const Tensor hi = r.narrow(d, 1, len, l), lo = r.narrow(d, 0, len, l);
    r = r.dtype() == kBool ? hi.ne(lo, l) : hi.sub(lo, 1, l);
  }
  return detail::own_storage(r, *this, l);
}

namespace {
TensorOptions new_options(const Tensor& t, const std::optional<TensorOptions>& o) {
  // Kiln's options always name a device (CPU by default), so a CPU device in
  // the options keeps this tensor's.
  if (!o) return TensorOptions(t.dtype()).device(t.device());
  TensorOptions r = *o;
  if (!r.has_dtype()) r = r.dtype(t.dtype());
  if (r.device().is_cpu()) r = r.device(t.device());
  return r;
}
}  // namespace

Tensor Tensor::new_zeros(Shape s, std::optional<TensorOptions> o, Loc l) const {
  return zeros(std::move(s), new_options(*this, o), l);
}
Tensor Tensor::new_ones(Shape s, std::optional<TensorOptions> o, Loc l) const {
  return ones(std::move(s), new_options(*this, o), l);
}
Tensor Tensor::new_empty(Shape s, std::optional<TensorOptions> o, Loc l) const {
  return empty(std::move(s), new_options(*this, o), l);
}
Tensor Tensor::new_full(Shape s, Scalar v, std::optional<TensorOptions> o, Loc l) const {
  return full(std::move(s), v, new_options(*this, o), l);
}

Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim_, Loc l) const {
  if (repeats < 0)
    throw Error("repeat_interleave: expected repeats >= 0, got " + std::to_string(repeats), here(l));
  const Tensor x = dim_ ? *this : reshape({-1}, l);
  const int64_t d = dim_ ? detail::checked_dim(*dim_, dim(), "repeat_interleave", l) : 0;
  Shape wide = x.sizes();
  wide.insert(wide.begin() + d + 1, repeats);
  Shape out = x.sizes();
  out[size_t(d)] *= repeats;
  return detail::own_storage(x.unsqueeze(d + 1, l).expand(wide, l).reshape(out, l), *this, l);
}

Tensor Tensor::cross(const Tensor& other, std::optional<int64_t> dim_, Loc l) const {
  if (this->dim() != other.dim())
    throw Error("cross: expected inputs of one rank, got shapes " + shape_str(sizes()) + " and " +
                    shape_str(other.sizes()),
                here(l));
  const Shape shape = broadcast_shapes(sizes(), other.sizes());
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t d = -1;
  if (dim_) {
    d = detail::checked_dim(*dim_, rank, "cross", l);
  } else {
    for (int64_t i = 0; i < rank && d < 0; ++i)
      if (shape[size_t(i)] == 3) d = i;
  }
  if (d < 0 || shape[size_t(d)] != 3)
    throw Error("cross: expected a dim of size 3, got shape " + shape_str(shape), here(l));
  const Tensor a = expand(shape, l), b = other.expand(shape, l);
  auto at = [&](const Tensor& t, int64_t i) { return t.narrow(d, i, 1, l); };
  return cat({at(a, 1).mul(at(b, 2), l).sub(at(a, 2).mul(at(b, 1), l), 1, l),
              at(a, 2).mul(at(b, 0), l).sub(at(a, 0).mul(at(b, 2), l), 1, l),
              at(a, 0).mul(at(b, 1), l).sub(at(a, 1).mul(at(b, 0), l), 1, l)},
             d, l);
}

Tensor Tensor::kron(const Tensor& other, Loc l) const {
  const int64_t rank = std::max(dim(), other.dim());
  Shape sa(size_t(rank - dim()), 1), sb(size_t(rank - other.dim()), 1);
  sa.insert(sa.end(), sizes().begin(), sizes().end());
  sb.insert(sb.end(), other.sizes().begin(), other.sizes().end());
  Shape wa, wb, out;
  for (size_t i = 0; i < size_t(rank); ++i) {
    wa.insert(wa.end(), {sa[i], 1});
    wb.insert(wb.end(), {1, sb[i]});
    out.push_back(sa[i] * sb[i]);
  }
  return reshape(wa, l).mul(other.reshape(wb, l), l).reshape(out, l);
}

Tensor Tensor::rot90(int64_t k, Dims dims, Loc l) const {
  if (dims.size() != 2)
    throw Error("rot90: expected two dims, got " + shape_str(dims), here(l));
  const std::vector<int64_t> d = each_dim(dims, dim(), "rot90", l);
  if (d[0] == d[1]) throw Error("rot90: expected two different dims, got " + shape_str(dims), here(l));
  switch (((k % 4) + 4) % 4) {
    case 1:
      return flip({d[1]}, l).transpose(d[0], d[1], l);
    case 2:
      return flip({d[0], d[1]}, l);
    case 3:
      return flip({d[0]}, l).transpose(d[0], d[1], l);
    default:
      return clone(l);
  }
}

// ---- functions only free ----
Tensor rsub(const Tensor& x, const Tensor& other, Scalar alpha, Loc l) { return other.sub(x, alpha, l); }
Tensor rsub(const Tensor& x, Scalar other, Scalar alpha, Loc l) {
  return (alpha.toDouble() == 1 ? x : x.mul(alpha, l)).neg(l).add(other, l);
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, Dims dims, bool unbiased, bool keepdim,
                                    Loc l) {
  if (dims.empty()) dims = all_dims(x);
  return {x.std(dims, unbiased, keepdim, l), x.mean(dims, keepdim, l)};
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, Dims dims, bool unbiased, bool keepdim,
                                    Loc l) {
  if (dims.empty()) dims = all_dims(x);
  return {x.var(dims, unbiased, keepdim, l), x.mean(dims, keepdim, l)};
}
Tensor atleast_1d(const Tensor& x, Loc l) { return x.dim() >= 1 ? x : x.reshape({1}, l); }
Tensor atleast_2d(const Tensor& x, Loc l) { return x.dim() >= 2 ? x : x.reshape({1, x.numel()}, l); }
Tensor atleast_3d(const Tensor& x, Loc l) {
  if (x.dim() >= 3) return x;
  if (x.dim() == 2) return x.unsqueeze(2, l);
  return x.reshape({1, x.numel(), 1}, l);
}
namespace {
std::vector<Tensor> each(const std::vector<Tensor>& ts, Tensor (*f)(const Tensor&, Loc), Loc l) {
  std::vector<Tensor> r;
  for (const Tensor& t : ts) r.push_back(f(t, l));
  return r;
}
}  // namespace
Tensor hstack(const std::vector<Tensor>& ts, Loc l) {
  std::vector<Tensor> r = each(ts, atleast_1d, l);
  return cat(r, !r.empty() && r[0].dim() == 1 ? 0 : 1, l);
}
Tensor vstack(const std::vector<Tensor>& ts, Loc l) { return cat(each(ts, atleast_2d, l), 0, l); }
Tensor dstack(const std::vector<Tensor>& ts, Loc l) { return cat(each(ts, atleast_3d, l), 2, l); }
Tensor column_stack(const std::vector<Tensor>& ts, Loc l) {
  std::vector<Tensor> r;
  for (const Tensor& t : ts) r.push_back(t.dim() <= 1 ? t.reshape({t.numel(), 1}, l) : t);
  return cat(r, 1, l);
}


std::vector<Tensor> meshgrid(const std::vector<Tensor>& ts, const std::string& indexing, Loc l) {
  if (indexing != "ij" && indexing != "xy")
    throw Error("meshgrid: expected indexing \"ij\" or \"xy\", got \"" + indexing + "\"", here(l));
  if (ts.empty()) throw Error("meshgrid: expected at least one tensor", here(l));
  Shape shape;
  for (const Tensor& t : ts) {
    if (t.dim() > 1)
      throw Error("meshgrid: expected 0-D or 1-D tensors, got shape " + shape_str(t.sizes()), here(l));
    shape.push_back(t.numel());
  }
  const bool xy = indexing == "xy" && ts.size() >= 2;
  if (xy) std::swap(shape[0], shape[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    size_t at = i;
    if (xy && i < 2) at = 1 - i;
    Shape one(shape.size(), 1);
    one[at] = shape[at];
    out.push_back(ts[i].reshape(one, l).expand(shape, l));
  }
  return out;
}

Tensor cartesian_prod(const std::vector<Tensor>& ts, Loc l) {
  if (ts.size() == 1) {
    if (ts[0].dim() != 1)
      throw Error("cartesian_prod: expected 1-D tensors, got shape " + shape_str(ts[0].sizes()), here(l));
    return ts[0];
  }
  for (const Tensor& t : ts)
    if (t.dim() != 1)
      throw Error("cartesian_prod: expected 1-D tensors, got shape " + shape_str(t.sizes()), here(l));
  std::vector<Tensor> grids = meshgrid(ts, "ij", l);
  for (Tensor& g : grids) g = g.reshape({-1}, l);
  return stack(grids, 1, l);
}

Tensor combinations(const Tensor& x, int64_t r, bool with_replacement, Loc l) {
  if (x.dim() != 1) throw Error("combinations: expected a 1-D tensor, got shape " + shape_str(x.sizes()), here(l));
  if (r < 0) throw Error("combinations: expected r >= 0, got " + std::to_string(r), here(l));
  const int64_t n = x.size(0);
  if (r == 0) return zeros({0}, TensorOptions(x.dtype()).device(x.device()), l);
  // Index tuples in itertools' order: the last position advances fastest.
  std::vector<std::vector<int64_t>> cols(static_cast<size_t>(r));
  std::vector<int64_t> c(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) c[size_t(i)] = with_replacement ? 0 : i;
  const auto valid = [&] { return n > 0 && (with_replacement || r <= n); };
  while (valid()) {
    for (int64_t i = 0; i < r; ++i) cols[size_t(i)].push_back(c[size_t(i)]);
    int64_t i = r - 1;
    while (i >= 0 && c[size_t(i)] == (with_replacement ? n - 1 : n - r + i)) --i;
    if (i < 0) break;
    ++c[size_t(i)];
    for (int64_t j = i + 1; j < r; ++j) c[size_t(j)] = with_replacement ? c[size_t(i)] : c[size_t(j - 1)] + 1;
  }
  const int64_t count = static_cast<int64_t>(cols[0].size());
  if (count == 0) return zeros({0, r}, TensorOptions(x.dtype()).device(x.device()), l);
  std::vector<Tensor> picked;
  for (const std::vector<int64_t>& col : cols) picked.push_back(x.index_select(0, indices_like(x, col, {count}, l), l));
  return stack(picked, 1, l);
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, Loc l) {
  if (x1.dim() < 2 || x2.dim() < 2 || x1.size(-1) != x2.size(-1))
    throw Error("cdist: expected x1 [..., P, M] and x2 [..., R, M], got " + shape_str(x1.sizes()) +
                    " and " + shape_str(x2.sizes()),
                here(l));
  if (p < 0) throw Error("cdist: expected p >= 0, got " + std::to_string(p), here(l));
  check_floating(x1, "cdist", l);
  // Points of no coordinates (M = 0) are all 0 apart, whatever p: the sum of
  // no terms, since the max (p = inf) of none has no identity.
  if (x1.size(-1) == 0) p = 1;
  return x1.unsqueeze(-2, l).sub(x2.unsqueeze(-3, l), 1, l).norm(p, {-1}, false, l);
}

Tensor searchsorted(const Tensor& seq_, const Tensor& values, bool out_int32, bool right,
                    const std::string& side, const Tensor& sorter, Loc l) {
  if (!side.empty() && side != "left" && side != "right")
    throw Error("searchsorted: expected side \"left\" or \"right\", got \"" + side + "\"", here(l));
  if (side == "left" && right)
    throw Error("searchsorted: side \"left\" contradicts right = true", here(l));
  if (seq_.dim() == 0) throw Error("searchsorted: expected a sorted sequence of at least one dim", here(l));
  const bool upper = right || side == "right";
  Tensor seq = sorter.defined() ? seq_.gather(-1, sorter, l) : seq_;
  if (seq.dim() > 1) {
    const Shape lead(seq.sizes().begin(), seq.sizes().end() - 1);
    const Shape vlead(values.sizes().begin(), values.sizes().end() - (values.dim() > 0 ? 1 : 0));
    if (values.dim() != seq.dim() || lead != vlead)
      throw Error("searchsorted: a sorted sequence of shape " + shape_str(seq.sizes()) +
                      " needs values with the same leading dims, got " + shape_str(values.sizes()),
                  here(l));
  }
  NoGradGuard no_grad;
  // The binary search's comparisons, counted: an element is passed while it is
  // not >= the value (> with `upper`), so a NaN value goes past every element.
  // values [..., V] against seq [..., N] as [..., V, N]; a 1-D seq broadcasts
  // against values of any shape, a 0-D value included (a 0-D position).
  const Tensor v = values.detach().unsqueeze(-1, l);
  const Tensor s = seq.dim() > 1 ? seq.detach().unsqueeze(-2, l) : seq.detach();
  const Tensor passed = (upper ? s.gt(v, l) : s.ge(v, l)).logical_not(l);
  const Tensor r = passed.to(kInt64, l).sum(-1, false, l);
  return out_int32 ? r.to(kInt32, l) : r;
}

Tensor searchsorted(const Tensor& seq, Scalar value, bool out_int32, bool right, const std::string& side,
                    const Tensor& sorter, Loc l) {
  if (seq.dim() != 1)
    throw Error("searchsorted: a scalar value needs a 1-D sorted sequence, got " + shape_str(seq.sizes()),
                here(l));
  return searchsorted(seq, full({}, value, TensorOptions(seq.dtype()).device(seq.device()), l), out_int32,
                      right, side, sorter, l);
}

Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32, bool right, Loc l) {
  if (boundaries.dim() != 1)
    throw Error("bucketize: expected 1-D boundaries, got shape " + shape_str(boundaries.sizes()), here(l));
  return searchsorted(boundaries, input, out_int32, right, "", Tensor(), l);
}

Tensor tensordot(const Tensor& a, const Tensor& b, Dims dims_a, Dims dims_b,
                 Loc l) {
  if (dims_a.size() != dims_b.size())
    throw Error("tensordot: " + std::to_string(dims_a.size()) + " dims of a against " +
                    std::to_string(dims_b.size()) + " of b",
                here(l));
  const std::vector<int64_t> da = each_dim(dims_a, a.dim(), "tensordot", l);
  const std::vector<int64_t> db = each_dim(dims_b, b.dim(), "tensordot", l);
  int64_t k = 1;
  for (size_t i = 0; i < da.size(); ++i) {
    if (a.size(da[i]) != b.size(db[i]))
      throw Error("tensordot: dim " + std::to_string(da[i]) + " of a (" + std::to_string(a.size(da[i])) +
                      ") does not match dim " + std::to_string(db[i]) + " of b (" +
                      std::to_string(b.size(db[i])) + ")",
                  here(l));
    k *= a.size(da[i]);
  }
  auto rest = [](const Tensor& t, const std::vector<int64_t>& used, std::vector<int64_t>& perm, Shape& free) {
    for (int64_t d = 0; d < t.dim(); ++d)
      if (std::find(used.begin(), used.end(), d) == used.end()) {
        perm.push_back(d);
        free.push_back(t.size(d));
      }
  };
  std::vector<int64_t> pa, pb = db;
  Shape fa, fb;
  rest(a, da, pa, fa);
  pa.insert(pa.end(), da.begin(), da.end());
  rest(b, db, pb, fb);
  const int64_t ma = numel(fa), nb = numel(fb);
  Shape out = fa;
  out.insert(out.end(), fb.begin(), fb.end());
  return a.permute(pa, l).reshape({ma, k}, l).matmul(b.permute(pb, l).reshape({k, nb}, l), l).reshape(out, l);
}

Tensor block_diag(const std::vector<Tensor>& ts, Loc l) {
  if (ts.empty()) return zeros({1, 0}, {}, l);
  DType dt = ts[0].dtype();
  int64_t cols = 0;
  std::vector<Tensor> mats;
  for (const Tensor& t : ts) {
    if (t.dim() > 2)
      throw Error("block_diag: expected 0-, 1- or 2-D tensors, got shape " + shape_str(t.sizes()), here(l));
    dt = promote_types(dt, t.dtype());
    mats.push_back(t.dim() == 2 ? t : t.reshape({1, t.numel()}, l));
    cols += mats.back().size(1);
  }
  std::vector<Tensor> rows;
  int64_t at = 0;
  for (const Tensor& m : mats) {
    const TensorOptions o = TensorOptions(dt).device(m.device());
    std::vector<Tensor> row;
    const int64_t r = m.size(0), c = m.size(1);
    if (at > 0) row.push_back(zeros({r, at}, o, l));
    row.push_back(m.to(dt, l));
    if (cols - at - c > 0) row.push_back(zeros({r, cols - at - c}, o, l));
    rows.push_back(row.size() == 1 ? row[0] : cat(row, 1, l));
    at += c;
  }
  return cat(rows, 0, l);
}

// ---- torch.linalg's norms ----

namespace linalg {

Tensor vector_norm(const Tensor& x, double ord, OptionalDims dim, bool keepdim, std::optional<DType> dtype,
                   Loc l) {
  return (dtype ? x.to(*dtype, l) : x).norm(ord, dim.dims.value_or(std::vector<int64_t>{}), keepdim, l);
}

namespace {
Tensor matrix_norm_of(const Tensor& x_, const std::string& ord, double p, std::vector<int64_t> dim,
                      bool keepdim, std::optional<DType> dtype, Loc l) {
  const Tensor x = dtype ? x_.to(*dtype, l) : x_;
  if (dim.size() != 2 || x.dim() < 2)
    throw Error("linalg.matrix_norm: expected two dims of a tensor of at least 2 dims, got dims " +
                    shape_str(dim) + " of shape " + shape_str(x.sizes()),
                here(l));
  const std::vector<int64_t> d = each_dim(dim, x.dim(), "linalg.matrix_norm", l);
  if (d[0] == d[1]) throw Error("linalg.matrix_norm: expected two different dims, got " + shape_str(dim), here(l));
  if (ord == "fro") return x.norm(2, d, keepdim, l);
  const double inf = std::numeric_limits<double>::infinity();
  if (ord.empty() && (p == 1 || p == -1 || p == inf || p == -inf)) {
    // 1: the largest sum of |x| down a column (over rows d[0]); inf: along a row.
    const bool columns = std::abs(p) == 1;
    const int64_t summed = columns ? d[0] : d[1], picked = columns ? d[1] : d[0];
    const Tensor sums = x.abs(l).sum({summed}, true, l);
    Tensor r = p > 0 ? sums.amax({picked}, true, l) : sums.amin({picked}, true, l);
    if (!keepdim) r = r.squeeze(std::max(d[0], d[1]), l).squeeze(std::min(d[0], d[1]), l);
    return r;
  }
  throw Error("linalg.matrix_norm: ord " + (ord.empty() ? std::to_string(p) : "\"" + ord + "\"") +
                  " is not supported (expected \"fro\", 1, -1, inf or -inf; 2, -2 and \"nuc\" need "
                  "singular values, which Kiln does not compute)",
              here(l));
}
}  // namespace

Tensor matrix_norm(const Tensor& x, const std::string& ord, Dims dim, bool keepdim,
                   std::optional<DType> dtype, Loc l) {
  return matrix_norm_of(x, ord, 0, std::move(dim), keepdim, dtype, l);
}
Tensor matrix_norm(const Tensor& x, double ord, Dims dim, bool keepdim,
                   std::optional<DType> dtype, Loc l) {
  return matrix_norm_of(x, "", ord, std::move(dim), keepdim, dtype, l);
}

Tensor norm(const Tensor& x, std::optional<double> ord, OptionalDims dim, bool keepdim, std::optional<DType> dtype,
            Loc l) {
  const size_t n = dim.dims ? dim.dims->size() : size_t(x.dim());
  if (!ord) {
    if (dim.dims && dim.dims->size() == 2) return matrix_norm(x, "fro", *dim.dims, keepdim, dtype, l);
    return vector_norm(x, 2, dim, keepdim, dtype, l);
  }
  if (n == 1) return vector_norm(x, *ord, dim, keepdim, dtype, l);
  if (n == 2) return matrix_norm(x, *ord, dim.dims.value_or(std::vector<int64_t>{0, 1}), keepdim, dtype, l);
  throw Error("linalg.norm: with ord, expected one or two dims (or a 1-D or 2-D tensor), got " +
                  (dim.dims ? "dims " + shape_str(*dim.dims) : "shape " + shape_str(x.sizes())),
              here(l));
}
Tensor norm(const Tensor& x, const std::string& ord, OptionalDims dim, bool keepdim, std::optional<DType> dtype,
            Loc l) {
  return matrix_norm(x, ord, dim.dims.value_or(std::vector<int64_t>{-2, -1}), keepdim, dtype, l);
}

}  // namespace linalg

// ---- free spellings of the methods ----

Tensor diag(const Tensor& x, int64_t k, Loc l) { return x.diag(k, l); }
Tensor diagonal(const Tensor& x, int64_t o, int64_t d1, int64_t d2, Loc l) { return x.diagonal(o, d1, d2, l); }
Tensor trace(const Tensor& x, Loc l) { return x.trace(l); }
Tensor lerp(const Tensor& s, const Tensor& e, Scalar w, Loc l) { return s.lerp(e, w, l); }
Tensor lerp(const Tensor& s, const Tensor& e, const Tensor& w, Loc l) { return s.lerp(e, w, l); }
Tensor baddbmm(const Tensor& i, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha, Loc l) {
  return i.baddbmm(a, b, beta, alpha, l);
}
Tensor addbmm(const Tensor& i, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha, Loc l) {
  return i.addbmm(a, b, beta, alpha, l);
}
Tensor addmv(const Tensor& i, const Tensor& m, const Tensor& v, Scalar beta, Scalar alpha, Loc l) {
  return i.addmv(m, v, beta, alpha, l);
}
Tensor addr(const Tensor& i, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha, Loc l) {
  return i.addr(a, b, beta, alpha, l);
}
Tensor median(const Tensor& x, Loc l) { return x.median(l); }
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t d, bool k, Loc l) { return x.median(d, k, l); }
Tensor repeat_interleave(const Tensor& x, int64_t r, std::optional<int64_t> d, Loc l) {
  return x.repeat_interleave(r, d, l);
}
Tensor repeat_interleave(const Tensor& x, const Tensor& r, std::optional<int64_t> d, Loc l) {
  return x.repeat_interleave(r, d, l);
}
Tensor nan_to_num(const Tensor& x, std::optional<double> n, std::optional<double> p, std::optional<double> m,
                  Loc l) {
  return x.nan_to_num(n, p, m, l);
}
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan, Loc l) {
  return a.isclose(b, rtol, atol, equal_nan, l);
}
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> d, bool k, Loc l) {
  return x.aminmax(d, k, l);
}
Tensor movedim(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> d, Loc l) {
  return x.movedim(std::move(s), std::move(d), l);
}
Tensor movedim(const Tensor& x, int64_t s, int64_t d, Loc l) { return x.movedim(s, d, l); }
Tensor moveaxis(const Tensor& x, int64_t s, int64_t d, Loc l) { return x.movedim(s, d, l); }
Tensor swapaxes(const Tensor& x, int64_t a, int64_t b, Loc l) { return x.transpose(a, b, l); }
Tensor swapdims(const Tensor& x, int64_t a, int64_t b, Loc l) { return x.transpose(a, b, l); }
Tensor diff(const Tensor& x, int64_t n, int64_t d, const Tensor& p, const Tensor& a, Loc l) {
  return x.diff(n, d, p, a, l);
}
Tensor heaviside(const Tensor& x, const Tensor& v, Loc l) { return x.heaviside(v, l); }
Tensor logical_xor(const Tensor& a, const Tensor& b, Loc l) { return a.logical_xor(b, l); }
Tensor floor_divide(const Tensor& a, const Tensor& b, Loc l) { return a.floor_divide(b, l); }
Tensor floor_divide(const Tensor& a, Scalar b, Loc l) { return a.floor_divide(b, l); }
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> d, Loc l) { return a.cross(b, d, l); }
Tensor kron(const Tensor& a, const Tensor& b, Loc l) { return a.kron(b, l); }
Tensor rot90(const Tensor& x, int64_t k, Dims d, Loc l) { return x.rot90(k, std::move(d), l); }
Tensor histc(const Tensor& x, int64_t bins, Scalar lo, Scalar hi, Loc l) { return x.histc(bins, lo, hi, l); }
Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, Scalar v, Loc l) { return x.addcmul(a, b, v, l); }
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, Scalar v, Loc l) { return x.addcdiv(a, b, v, l); }
Tensor index_fill(const Tensor& x, int64_t d, const Tensor& i, Scalar v, Loc l) { return x.index_fill(d, i, v, l); }
Tensor index_copy(const Tensor& x, int64_t d, const Tensor& i, const Tensor& s, Loc l) {
  return x.index_copy(d, i, s, l);
}
Tensor take(const Tensor& x, const Tensor& i, Loc l) { return x.take(i, l); }
Tensor tile(const Tensor& x, Dims r, Loc l) { return x.tile(std::move(r), l); }
Tensor count_nonzero(const Tensor& x, Dims d, Loc l) { return x.count_nonzero(std::move(d), l); }
Tensor nansum(const Tensor& x, Dims d, bool k, Loc l) { return x.nansum(std::move(d), k, l); }
Tensor nanmean(const Tensor& x, Dims d, bool k, Loc l) { return x.nanmean(std::move(d), k, l); }
Tensor logit(const Tensor& x, std::optional<double> eps, Loc l) { return x.logit(eps, l); }
Tensor xlogy(const Tensor& x, const Tensor& y, Loc l) { return x.xlogy(y, l); }
Tensor sinc(const Tensor& x, Loc l) { return x.sinc(l); }
Tensor deg2rad(const Tensor& x, Loc l) { return x.deg2rad(l); }
Tensor rad2deg(const Tensor& x, Loc l) { return x.rad2deg(l); }
Tensor frac(const Tensor& x, Loc l) { return x.frac(l); }
Tensor signbit(const Tensor& x, Loc l) { return x.signbit(l); }
Tensor copysign(const Tensor& x, const Tensor& o, Loc l) { return x.copysign(o, l); }
Tensor float_power(const Tensor& x, const Tensor& e, Loc l) { return x.float_power(e, l); }
Tensor float_power(const Tensor& x, Scalar e, Loc l) { return x.float_power(e, l); }
Tensor true_divide(const Tensor& a, const Tensor& b, Loc l) { return a.div(b, l); }
Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi, Loc l) { return x.clamp(lo, hi, l); }
Tensor absolute(const Tensor& x, Loc l) { return x.abs(l); }
Tensor negative(const Tensor& x, Loc l) { return x.neg(l); }
Tensor sgn(const Tensor& x, Loc l) { return x.sign(l); }

}  // namespace kiln
