// Sorting and what is built on it: sort, argsort, topk and randperm. One order
// everywhere: ascending (descending), ties by position (stable), NaN the largest
// value as in PyTorch, NaNs among themselves by position.
//
// Inside a trace the order is computed by the compiled plan, from table ops:
// indices found on the host while tracing would be baked into the plan as
// constants, silently wrong at the next call. Each element's rank comes from
// comparison counting,
//   rank_i = #{j : x_j before x_i} + #{j < i : x_j ties x_i},
// a [.., n, 1] against [.., 1, n] broadcast compare summed over one dim (one
// fused reduction kernel), then, with hot[r][i] = (rank_i == r),
//   indices[r] = sum_i i * hot[r][i]      values[r] = sum_i x_i * hot[r][i]
// (where-sums: the values' gradient goes to the elements they came from). That
// is O(n^2) work per row of n, fine for the rows models sort (top-k over class
// logits, vocabularies of a few thousand), so traced rows longer than
// kMaxTracedRow are an error rather than a kernel that runs for minutes.
//
// Eagerly the same order comes from std::stable_sort on the host: O(n log n),
// no n^2 temporaries, so eager code sorts long rows (randperm of a dataset).
// Its values are the elements at those indices (x.gather, O(n^2) like every
// index op here, only when a gradient must flow). The conformance matrix runs
// every case both ways, so the two paths are checked to agree.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/random_internal.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln {

using detail::checked_dim;
using detail::here;

namespace {

constexpr int64_t kMaxTracedRow = 16384;

struct Sorted {
  Tensor values, indices;
};

// The host order: a comes before b.
template <class T>
bool comes_before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return descending ? na && !nb : !na && nb;
  }
  return descending ? b < a : a < b;
}

// Rows of n elements (the sorted dim last, contiguous) -> the first k of each
// row's order: indices, and the values when `vals` is given.
template <class T>
void sort_rows(const T* in, int64_t rows, int64_t n, int64_t k, bool descending, T* vals,
               int64_t* idx) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * n;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return comes_before(row[a], row[b], descending);
    });
    for (int64_t j = 0; j < k; ++j) {
      idx[r * k + j] = order[size_t(j)];
      if (vals) vals[r * k + j] = row[order[size_t(j)]];
    }
  }
}

// Eagerly, for xt [.., n] (the sorted dim last): on the host.
Sorted host_sort(const Tensor& xt, int64_t k, bool descending, bool want_values, Loc l) {
  Tensor c;
  {
    NoGradGuard no_grad;
    c = xt.detach().cpu(l).contiguous(l);
  }
  const int64_t n = xt.size(-1);
  Shape out = xt.sizes();
  out.back() = k;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < out.size(); ++i) rows *= out[i];
  Sorted s;
  s.indices = empty(out, TensorOptions(kInt64), l);
  if (want_values) s.values = empty(out, TensorOptions(xt.dtype()), l);
  if (rows > 0 && k > 0)
    visit_dtype(xt.dtype(), [&](auto zero) {
      using T = decltype(zero);
      sort_rows<T>(c.data_ptr<T>(), rows, n, k, descending,
                   want_values ? s.values.data_ptr<T>() : nullptr, s.indices.data_ptr<int64_t>());
    });
  s.indices = s.indices.to(xt.device(), l);
  if (want_values) s.values = s.values.to(xt.device(), l);
  return s;
}

// In a trace, for xt [.., n] (the sorted dim last): ranks by comparison counting.
Sorted traced_sort(const Tensor& xt, int64_t k, bool descending, bool want_values, const char* op,
                   Loc l) {
  const int64_t n = xt.size(-1);
  if (n > kMaxTracedRow)
    throw Error(std::string(op) + ": a traced sort compares every pair in a row (O(n^2) work), " +
                    "so it takes rows of at most " + std::to_string(kMaxTracedRow) +
                    " elements, got " + std::to_string(n) +
                    "; sort longer rows outside the traced function",
                here(l));
  const TensorOptions io = TensorOptions(kInt64).device(xt.device());
  const Tensor key = xt.dtype() == DType::b8 ? xt.to(kInt64, l) : xt;
  const Tensor xi = key.unsqueeze(-1, l), xj = key.unsqueeze(-2, l);  // [.., n, 1], [.., 1, n]
  const Tensor pos = arange(n, io, l);
  const Tensor earlier = pos.lt(pos.unsqueeze(-1, l), l);  // [i, j]: j < i
  Tensor before = (descending ? xj.gt(xi, l) : xj.lt(xi, l))
                      .logical_or(xj.eq(xi, l).logical_and(earlier, l), l);
  if (is_floating(key.dtype())) {
    // NaN is the largest: ascending, every number and every earlier NaN comes
    // before a NaN x_i; descending, a NaN x_j comes before every number and every later NaN.
    const Tensor nan_i = xi.isnan(l), nan_j = xj.isnan(l);
    const Tensor& nan_late = descending ? nan_j : nan_i;
    const Tensor& nan_other = descending ? nan_i : nan_j;
    before = before.logical_or(
        nan_late.logical_and(nan_other.logical_not(l).logical_or(earlier, l), l), l);
  }
  const Tensor rank = before.sum(-1, false, l);  // [.., n]: a permutation of 0 .. n-1
  const Tensor hot = rank.unsqueeze(-2, l).eq(arange(k, io, l).unsqueeze(-1, l), l);  // [.., k, n]
  Sorted s;
  s.indices = where(hot, pos, zeros({}, io, l), l).sum(-1, false, l);
  if (want_values) {
    const Tensor zero = zeros({}, TensorOptions(xt.dtype()).device(xt.device()), l);
    s.values = where(hot, xt.unsqueeze(-2, l), zero, l).sum(-1, false, l).to(xt.dtype(), l);
  }
  return s;
}

// The first k (all when k < 0) of the order along `dim`; values when asked.
Sorted sort_along(const Tensor& x, int64_t dim, int64_t k, bool descending, bool want_values,
                  const char* op, Loc l) {
  const int64_t d = checked_dim(dim, std::max<int64_t>(x.dim(), 1), op, l);
  if (x.dim() == 0) {
    Sorted s = sort_along(x.reshape({1}, l), 0, k, descending, want_values, op, l);
    if (s.indices.numel() == 1) {
      s.indices = s.indices.reshape({}, l);
      if (want_values) s.values = s.values.reshape({}, l);
    }
    return s;
  }
  if (k < 0) k = x.size(d);
  const Tensor xt = x.transpose(d, -1, l);
  Sorted s;
  if (current_trace()) {
    s = traced_sort(xt, k, descending, want_values, op, l);
  } else {
    const bool through_gather = want_values && x.requires_grad() && grad_mode_enabled();
    s = host_sort(xt, k, descending, want_values && !through_gather, l);
    if (through_gather) s.values = xt.gather(-1, s.indices, l);
  }
  s.indices = s.indices.transpose(d, -1, l);
  if (want_values) s.values = s.values.transpose(d, -1, l);
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

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, Loc l) {
  return x.sort(dim, descending, l);
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

}  // namespace kiln
