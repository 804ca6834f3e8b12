// The cluster log-probability library step (runtime/cluster_logprob.h).
// First the member rows (start <= t[r] < start + C), in order. w is transposed
// once ([H, C] with rows padded to a multiple of kLanes), so a row's logits z_j
// = h_r . w_j are H passes of z += h_rc * wt_c along the contiguous columns:
// each z_j sums its products in feature order, vectorised over j. Sums along a
// row (of exps: runtime/vector_exp.h, compiled per ISA; of p_j w_jc) and its
// maximum run in kLanes fixed lanes reduced by a fixed tree, so the order of
// the additions is the same at every vector width.
//   forward   per member row (tasks of a few rows): out = z_t - lse; every
//             other row 0, its h not read.
//   gradient  per member row: lse, and with dh wanted dh = g (w_t - sum_j p_j
//             w_j), p_j = exp(z_j - lse); every other row's dh 0. Then dw by
//             blocks of kColumns columns, one task each: for every member row
//             in order, the block's logits again and dw_j += g (delta(j, t) -
//             p_j) h_r, accumulated transposed (along the columns). A column's
//             sum runs over the rows in one order in one task, so the bits do
//             not depend on the thread count; no atomics.
#include "runtime/cluster_logprob.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vector_exp.h"

namespace kiln {
namespace {

constexpr int64_t kLanes = 16;    // maxima and sums in this many partial lanes
constexpr int64_t kColumns = 64;  // dw: columns per task
constexpr int64_t kRowGrain = 4;  // member rows per task at least

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

int64_t padded(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

// z[0, j1 - j0) = h_r . w_j for j in [j0, j1), from wt = w transposed
// [width, ld] (ld >= columns, the padding zeros).
template <class T>
[[gnu::always_inline]] inline void logits(const T* hr, const T* wt, int64_t width, int64_t ld,
                                          int64_t j0, int64_t j1, T* z) {
  for (int64_t j = j0; j < j1; ++j) z[j - j0] = T(0);
  for (int64_t c = 0; c < width; ++c) {
    const T x = hr[c];
    const T* col = wt + c * ld;
    for (int64_t j = j0; j < j1; ++j) z[j - j0] += x * col[j];
  }
}

// Lane sums of n (a multiple of kLanes) values f(j), reduced by a fixed tree.
template <class T, class F>
[[gnu::always_inline]] inline T lane_sum(int64_t n, F&& f) {
  T sum[kLanes] = {};
  for (int64_t c = 0; c < n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) sum[l] += f(c + l);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)  // a fixed tree, not a chain of kLanes
    for (int64_t l = 0; l < w; ++l) sum[l] += sum[l + w];
  return sum[0];
}

// The row's logits z [padded(columns)] (the padding -inf) and their log-sum-exp;
// wt is w transposed with rows of padded(columns).
template <class T>
[[gnu::always_inline]] inline T row_lse(const T* hr, const T* wt, int64_t width, int64_t columns,
                                        T* z) {
  const int64_t n = padded(columns);
  logits(hr, wt, width, n, 0, n, z);
  for (int64_t j = columns; j < n; ++j) z[j] = kNegInf<T>;
  T lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = kNegInf<T>;
  for (int64_t c = 0; c < n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = lane[l] < z[c + l] ? z[c + l] : lane[l];
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) lane[l] = lane[l] < lane[l + w] ? lane[l + w] : lane[l];
  const T shift = lane[0] == kNegInf<T> ? T(0) : lane[0];
  return shift + std::log(lane_sum<T>(n, [&](int64_t j) { return vector_exp(z[j] - shift); }));
}

// A member row's log-probability of its target (relative to the cluster).
template <class T>
[[gnu::always_inline]] inline T row_logprob_impl(const T* hr, const T* wt, int64_t width,
                                                 int64_t columns, int64_t target, T* z) {
  const T lse = row_lse(hr, wt, width, columns, z);
  return z[target] - lse;
}
KILN_VECTOR_CLONES float row_logprob(const float* hr, const float* wt, int64_t width,
                                     int64_t columns, int64_t target, float* z) {
  return row_logprob_impl(hr, wt, width, columns, target, z);
}
KILN_VECTOR_CLONES double row_logprob(const double* hr, const double* wt, int64_t width,
                                      int64_t columns, int64_t target, double* z) {
  return row_logprob_impl(hr, wt, width, columns, target, z);
}

// A member row's log-sum-exp; with dh (may be null) also dh = g (w_t - sum_j
// p_j w_j), each feature's sum along the row of wt in lanes.
template <class T>
[[gnu::always_inline]] inline T row_grad_impl(const T* hr, const T* w, const T* wt, int64_t width,
                                              int64_t columns, int64_t target, T g, T* z, T* dh) {
  const T lse = row_lse(hr, wt, width, columns, z);
  if (!dh) return lse;
  const int64_t n = padded(columns);
  for (int64_t j = 0; j < n; ++j) z[j] = vector_exp(z[j] - lse);  // the padding's is 0
  const T* w_target = w + target * width;
  for (int64_t c = 0; c < width; ++c) {
    const T* col = wt + c * n;
    dh[c] = g * (w_target[c] - lane_sum<T>(n, [&](int64_t j) { return z[j] * col[j]; }));
  }
  return lse;
}
KILN_VECTOR_CLONES float row_grad(const float* hr, const float* w, const float* wt, int64_t width,
                                  int64_t columns, int64_t target, float g, float* z, float* dh) {
  return row_grad_impl(hr, w, wt, width, columns, target, g, z, dh);
}
KILN_VECTOR_CLONES double row_grad(const double* hr, const double* w, const double* wt,
                                   int64_t width, int64_t columns, int64_t target, double g,
                                   double* z, double* dh) {
  return row_grad_impl(hr, w, wt, width, columns, target, g, z, dh);
}

// dw for columns [j0, j1) (at most kColumns): over the member rows in order,
// the block's logits, d logit_j = g (delta(j, t) - exp(z_j - lse)) and dw_j +=
// d logit_j h_r, accumulated transposed in acc [width, kColumns] (vectorised
// along the columns) and written out at the end.
template <class T>
[[gnu::always_inline]] inline void columns_grad_impl(const T* h, const T* wt, int64_t width,
                                                     int64_t ld, int64_t j0, int64_t j1,
                                                     const int64_t* members, int64_t count,
                                                     const int64_t* target, const T* lse,
                                                     const T* g, T* z, T* acc, T* dw) {
  const int64_t n = j1 - j0;
  std::fill(acc, acc + width * kColumns, T(0));
  for (int64_t i = 0; i < count; ++i) {
    const T* hr = h + members[i] * width;
    logits(hr, wt, width, ld, j0, j1, z);
    for (int64_t j = 0; j < n; ++j)
      z[j] = g[i] * (T(j0 + j == target[i] ? 1 : 0) - vector_exp(z[j] - lse[i]));
    for (int64_t c = 0; c < width; ++c) {
      const T x = hr[c];
      T* a = acc + c * kColumns;
      for (int64_t j = 0; j < n; ++j) a[j] += z[j] * x;
    }
  }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < width; ++c) dw[(j0 + j) * width + c] = acc[c * kColumns + j];
}
KILN_VECTOR_CLONES void columns_grad(const float* h, const float* wt, int64_t width, int64_t ld,
                                     int64_t j0, int64_t j1, const int64_t* members, int64_t count,
                                     const int64_t* target, const float* lse, const float* g,
                                     float* z, float* acc, float* dw) {
  columns_grad_impl(h, wt, width, ld, j0, j1, members, count, target, lse, g, z, acc, dw);
}
KILN_VECTOR_CLONES void columns_grad(const double* h, const double* wt, int64_t width, int64_t ld,
                                     int64_t j0, int64_t j1, const int64_t* members, int64_t count,
                                     const int64_t* target, const double* lse, const double* g,
                                     double* z, double* acc, double* dw) {
  columns_grad_impl(h, wt, width, ld, j0, j1, members, count, target, lse, g, z, acc, dw);
}

// The member rows in order and their targets relative to the cluster.
struct Members {
  std::vector<int64_t> rows, target;
};
Members members_of(const ClusterShape& s, const int64_t* t) {
  Members m;
  for (int64_t r = 0; r < s.rows; ++r) {
    // start <= t < start + columns, without overflow for any int64 t and start.
    const uint64_t rel = uint64_t(t[r]) - uint64_t(s.start);
    if (rel < uint64_t(s.columns)) {
      m.rows.push_back(r);
      m.target.push_back(int64_t(rel));
    }
  }
  return m;
}

// w [columns, width] transposed to [width, padded(columns)], the padding zeros.
template <class T>
std::vector<T> transposed(const ClusterShape& s, const T* w) {
  const int64_t ld = padded(s.columns);
  std::vector<T> wt(size_t(ld * s.width), T(0));
  for (int64_t j = 0; j < s.columns; ++j)
    for (int64_t c = 0; c < s.width; ++c) wt[size_t(c * ld + j)] = w[j * s.width + c];
  return wt;
}

template <class T>
void forward(const ClusterShape& s, const T* h, const T* w, const int64_t* t, T* out) {
  std::fill(out, out + s.rows, T(0));
  const Members m = members_of(s, t);
  const int64_t count = int64_t(m.rows.size());
  if (count == 0) return;
  const std::vector<T> wt = transposed(s, w);
  parallel_for(count, kRowGrain, [&](int64_t b, int64_t e) {
    std::vector<T> z(size_t(padded(s.columns)));
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = m.rows[size_t(i)];
      out[r] = row_logprob(h + r * s.width, wt.data(), s.width, s.columns, m.target[size_t(i)],
                           z.data());
    }
  });
}

template <class T>
void backward(const ClusterShape& s, int which, const T* h, const T* w, const int64_t* t,
              const T* g, T* grad) {
  const std::array<int64_t, 2> at = cluster_logprob_grad_offsets(s, which);
  T* dh = at[0] >= 0 ? grad + at[0] : nullptr;
  T* dw = at[1] >= 0 ? grad + at[1] : nullptr;
  if (dh) std::fill(dh, dh + s.rows * s.width, T(0));
  if (dw) std::fill(dw, dw + s.columns * s.width, T(0));
  const Members m = members_of(s, t);
  const int64_t count = int64_t(m.rows.size());
  if (count == 0) return;
  const std::vector<T> wt = transposed(s, w);
  // Per member row: lse (dw reads them all), and dh.
  std::vector<T> lse(static_cast<size_t>(count)), gm(static_cast<size_t>(count));
  parallel_for(count, kRowGrain, [&](int64_t b, int64_t e) {
    std::vector<T> z(size_t(padded(s.columns)));
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = m.rows[size_t(i)];
      gm[size_t(i)] = g[r];
      lse[size_t(i)] =
          row_grad(h + r * s.width, w, wt.data(), s.width, s.columns, m.target[size_t(i)], g[r],
                   z.data(), dh ? dh + r * s.width : nullptr);
    }
  });
  if (!dw) return;
  const int64_t blocks = (s.columns + kColumns - 1) / kColumns;
  parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    std::vector<T> z(static_cast<size_t>(kColumns)), acc(size_t(s.width * kColumns));
    for (int64_t k = b; k < e; ++k) {
      const int64_t j0 = k * kColumns, j1 = std::min(s.columns, j0 + kColumns);
      columns_grad(h, wt.data(), s.width, padded(s.columns), j0, j1, m.rows.data(), count,
                   m.target.data(), lse.data(), gm.data(), z.data(), acc.data(), dw);
    }
  });
}

}  // namespace

ClusterShape cluster_logprob_shape(const TensorType& h, const TensorType& w, const Attrs& attrs) {
  KILN_CHECK(h.rank() == 2 && w.rank() == 2 && h.shape[1] == w.shape[1],
             "internal: cluster_logprob operands ", h.str(), " and ", w.str());
  ClusterShape s;
  s.dtype = h.dtype;
  s.rows = h.shape[0];
  s.width = h.shape[1];
  s.columns = w.shape[0];
  s.start = attrs.i(AttrKey::start);
  return s;
}

std::array<int64_t, 2> cluster_logprob_grad_offsets(const ClusterShape& s, int which) {
  std::array<int64_t, 2> at{-1, -1};
  int64_t next = 0;
  if (which & 1) {
    at[0] = next;
    next += s.rows * s.width;
  }
  if (which & 2) at[1] = next;
  return at;
}

void cluster_logprob_forward(const ClusterShape& s, const void* h, const void* w, const int64_t* t,
                             void* out) {
  if (s.dtype == DType::f32)
    return forward(s, static_cast<const float*>(h), static_cast<const float*>(w), t,
                   static_cast<float*>(out));
  KILN_CHECK(s.dtype == DType::f64, "internal: cluster_logprob of ", dtype_name(s.dtype));
  forward(s, static_cast<const double*>(h), static_cast<const double*>(w), t,
          static_cast<double*>(out));
}

void cluster_logprob_backward(const ClusterShape& s, int which, const void* h, const void* w,
                              const int64_t* t, const void* g, void* grad) {
  if (s.dtype == DType::f32)
    return backward(s, which, static_cast<const float*>(h), static_cast<const float*>(w), t,
                    static_cast<const float*>(g), static_cast<float*>(grad));
  KILN_CHECK(s.dtype == DType::f64, "internal: cluster_logprob of ", dtype_name(s.dtype));
  backward(s, which, static_cast<const double*>(h), static_cast<const double*>(w), t,
           static_cast<const double*>(g), static_cast<double*>(grad));
}

}  // namespace kiln
