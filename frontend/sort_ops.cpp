// Sorting and what is built on it: sort, argsort, topk, kthvalue, unique,
// randperm and multinomial. One order everywhere (PyTorch's): ascending (descending), ties by
// position (stable), NaN the largest value, NaNs among themselves by position.
//
// The order is one primitive op, argsort {dim, descending, count} (ir/ops.def):
// eagerly and in a compiled plan it is the sort library's step (runtime/sort.h,
// a radix sort or, for the first few of a long line, a selection; O(n) per
// line, lines in parallel). The values are x.gather(dim, positions), so their
// gradient is a scatter_add onto the elements they came from. unique's result
// has a size that depends on the values, so it runs eagerly only.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/random_internal.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln {

using detail::checked_dim;
using detail::here;

namespace {

struct Sorted {
  Tensor values, indices;
};

// The first `count` (all when count < 0) of the order along `dim`; values when asked.
Sorted sort_along(const Tensor& x, int64_t dim, int64_t count, bool descending, bool want_values,
                  const char* op, Loc l) {
  const int64_t d = checked_dim(dim, std::max<int64_t>(x.dim(), 1), op, l);
  if (x.dim() == 0) {  // a line of one
    Sorted s = sort_along(x.reshape({1}, l), 0, count, descending, want_values, op, l);
    if (s.indices.numel() == 1) {
      s.indices = s.indices.reshape({}, l);
      if (want_values) s.values = s.values.reshape({}, l);
    }
    return s;
  }
  if (count < 0) count = x.size(d);
  Sorted s;
  s.indices = detail::apply(OpKind::argsort, {x},
                            {{AttrKey::dim, d}, {AttrKey::descending, int64_t(descending)}, {AttrKey::count, count}},
                            here(l));
  if (want_values) s.values = x.gather(d, s.indices, l);
  return s;
}

}  // namespace

std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending, Loc l) const {
  Sorted s = sort_along(*this, dim, -1, descending, true, "sort", l);
  return {s.values, s.indices};
}

Tensor Tensor::argsort(int64_t dim, bool descending, Loc l) const {
  return sort_along(*this, dim, -1, descending, false, "argsort", l).indices;
}

std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted,
                                        Loc l) const {
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "topk", l);
  const int64_t n = this->dim() == 0 ? 1 : size(d);
  if (k < 0 || k > n)
    throw Error("topk: expected k in [0, " + std::to_string(n) + "] (the size of dim " +
                    std::to_string(d) + " of " + shape_str(sizes()) + "), got " + std::to_string(k),
                here(l));
  Sorted s = sort_along(*this, d, k, largest, true, "topk", l);
  return {s.values, s.indices};
}

std::tuple<Tensor, Tensor> Tensor::sort(std::optional<bool> stable, int64_t dim, bool descending,
                                        Loc l) const {
  (void)stable;  // every sort is stable
  return sort(dim, descending, l);
}

std::tuple<Tensor, Tensor> Tensor::kthvalue(int64_t k, int64_t dim, bool keepdim, Loc l) const {
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "kthvalue", l);
  const int64_t n = this->dim() == 0 ? 1 : size(d);
  if (k < 1 || k > n)
    throw Error("kthvalue: expected k in [1, " + std::to_string(n) + "] (the size of dim " + std::to_string(d) +
                    " of " + shape_str(sizes()) + "), got " + std::to_string(k),
                here(l));
  Sorted s = sort_along(*this, d, k, false, true, "kthvalue", l);
  if (this->dim() == 0) return {s.values, s.indices};  // k = 1
  Tensor v = s.values.narrow(d, k - 1, 1, l), i = s.indices.narrow(d, k - 1, 1, l);
  if (!keepdim) return {v.squeeze(d, l), i.squeeze(d, l)};
  return {v, i};
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
                                          Loc l) {
  (void)sorted;  // always sorted, as PyTorch on the CPU
  detail::check_size_static("unique", "the number of distinct values", l);
  Tensor flat, order;
  {
    NoGradGuard no_grad;
    flat = x.detach().reshape({-1}, l);
    order = flat.argsort(0, false, l);
    flat = flat.gather(0, order, l).cpu(l).contiguous(l).to(kFloat64, l);
  }
  const Tensor pos = order.cpu(l).contiguous(l);
  const int64_t n = flat.numel();
  const double* v = flat.data_ptr<double>();
  const int64_t* p = pos.data_ptr<int64_t>();
  // A new value starts where it differs from the one before (NaN differs from
  // everything, as NaN != NaN: each NaN is its own value, as in PyTorch).
  std::vector<int64_t> first;  // sorted position where each distinct value starts
  for (int64_t j = 0; j < n; ++j)
    if (j == 0 || !(v[j] == v[j - 1])) first.push_back(j);
  const int64_t m = static_cast<int64_t>(first.size());
  std::vector<double> at(static_cast<size_t>(m)), counts(static_cast<size_t>(m)), inverse(static_cast<size_t>(n));
  for (int64_t u = 0; u < m; ++u) {
    const int64_t b = first[size_t(u)], e = u + 1 < m ? first[size_t(u + 1)] : n;
    at[size_t(u)] = double(p[b]);
    counts[size_t(u)] = double(e - b);
    for (int64_t j = b; j < e; ++j) inverse[size_t(p[j])] = double(u);
  }
  NoGradGuard no_grad;
  const TensorOptions io = TensorOptions(kInt64).device(x.device());
  Tensor values = x.detach().reshape({-1}, l).index_select(0, from_vector(at, {m}, io, l), l);
  Tensor inv = return_inverse ? from_vector(inverse, x.sizes(), io, l) : Tensor();
  Tensor cnt = return_counts ? from_vector(counts, {m}, io, l) : Tensor();
  return {values, inv, cnt};
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, Loc l) {
  return x.sort(dim, descending, l);
}
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim, Loc l) {
  return x.kthvalue(k, dim, keepdim, l);
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, Loc l) {
  return x.argsort(dim, descending, l);
}
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted,
                                Loc l) {
  return x.topk(k, dim, largest, sorted, l);
}

// The argsort of n random 64-bit keys, so it follows the generator and compiles
// (a plan draws fresh keys at every call). Two equal keys (which the stable
// order would resolve by position, a slight bias) come with probability under
// n^2 / 2^65; they cannot break the permutation anyway: ranks with ties broken
// by position are always a permutation.
Tensor randperm(int64_t n, std::optional<Generator> gen, TensorOptions o, Loc l) {
  if (n < 0) throw Error("randperm: expected n >= 0, got " + std::to_string(n), here(l));
  const DType t = o.has_dtype_ ? o.dtype_ : DType::i64;
  Tensor perm;
  {
    NoGradGuard no_grad;
    Tensor key = detail::random_bits({n}, gen, o.device_, "randperm", l);
    perm = sort_along(key, 0, -1, false, false, "randperm", l).indices.to(t, l);
  }
  if (o.requires_grad_) perm.requires_grad_(true, l);
  return perm;
}
Tensor randperm(int64_t n, TensorOptions o, Loc l) {
  return randperm(n, std::nullopt, o, l);
}

// With replacement, each sample is the first category whose running sum of
// the weights exceeds u times the row's total (u uniform in [0, 1), float64),
// capped at the row's last non-zero weight (u times the total may round up to
// it). Without, the exponential race: the num_samples smallest E_j / w_j with
// E_j standard exponential draws, which is drawing without replacement in
// proportion to the weights (PyTorch draws the same way); zero weights never
// run. The weights are checked (finite, >= 0, a positive sum, enough non-zero
// ones) eagerly and, inside a trace, at every call of the plan.
Tensor Tensor::multinomial(int64_t num_samples, bool replacement, std::optional<Generator> gen,
                           Loc l) const {
  const SourceLoc loc = here(l);
  if (dim() != 1 && dim() != 2)
    throw Error("multinomial: expected weights [n] or [rows, n], got " + shape_str(sizes()), loc);
  if (!is_floating(dtype()))
    throw Error(std::string("multinomial: expected float weights, got ") + dtype_name(dtype()), loc);
  const int64_t n = size(-1);
  if (num_samples <= 0)
    throw Error("multinomial: expected num_samples > 0, got " + std::to_string(num_samples), loc);
  if (!replacement && num_samples > n)
    throw Error("multinomial: cannot draw " + std::to_string(num_samples) +
                    " samples without replacement from " + std::to_string(n) + " categories",
                loc);
  NoGradGuard no_grad;
  const Tensor w = detail::checked_values(
      OpKind::check_distribution, *this,
      {{AttrKey::count, replacement ? int64_t{0} : num_samples},
       {AttrKey::name, std::string("multinomial")}},
      l);
  const Tensor rows = (dim() == 1 ? w.unsqueeze(0, l) : w).to(kFloat64, l);  // [r, n]
  const int64_t r = rows.size(0);
  const TensorOptions f64 = TensorOptions(kFloat64).device(device());
  Tensor drawn;
  if (replacement) {
    const Tensor sums = rows.cumsum(1, l);
    const Tensor u = rand({r, num_samples}, gen, f64, l).mul(sums.slice(1, n - 1, n, 1, l), l);
    const Tensor last = rows.gt(Scalar(0), l)
                            .to(kInt64, l)
                            .mul(arange(n, TensorOptions(kInt64).device(device()), l), l)
                            .amax({1}, true, l);
    drawn = searchsorted(sums, u, false, true, "", Tensor(), l).minimum(last, l);
  } else {
    const Tensor e = rand({r, n}, gen, f64, l).neg(l).log1p(l).neg(l);
    const Tensor key = where(rows.gt(Scalar(0), l), e.div(rows, l),
                             full({}, std::numeric_limits<double>::infinity(), f64, l), l);
    drawn = std::get<1>(key.topk(num_samples, 1, false, true, l));
  }
  return dim() == 1 ? drawn.squeeze(0, l) : drawn;
}
Tensor multinomial(const Tensor& x, int64_t num_samples, bool replacement,
                   std::optional<Generator> generator, Loc l) {
  return x.multinomial(num_samples, replacement, std::move(generator), l);
}

}  // namespace kiln
