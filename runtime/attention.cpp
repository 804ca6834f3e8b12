// The attention library step (runtime/attention.h). Forward, for a block of 64
// query rows and each block of 128 keys: S = scale * Q K^T (a GEMM), the causal
// mask, then the online softmax: m' = max(m, rowmax S), acc *= exp(m - m'),
// P = exp(S - m'), l = l * exp(m - m') + rowsum P, acc += P V (a GEMM); out =
// acc / l. Blocks of keys wholly after a causal row block are skipped.
// The gradient (FlashAttention-2's), with lse_i = m_i + log l_i and D_i = g_i .
// out_i per query row from a first pass over the query blocks, then one pass
// over the key blocks that, for each query block seeing the key block, makes
//   P = exp(S - lse), dP = g V^T, dS = P * (dP - D),
//   dv += P^T g, dk += scale * dS^T Q (the key block's), dq += scale * dS K,
// only the GEMMs of the gradients asked for (`which`). The key pass holds S
// transposed (keys x rows), so dv and dk are plain GEMMs and the row vectors
// lse and D run along its rows. Operands a GEMM would read transposed (k in
// the forward, q and g in the key pass) are transposed once, block by block:
// OpenBLAS's small-matrix kernels then serve every GEMM but dq's. dq is summed per task over its key blocks: a
// task takes every chunks-th key block of one head, chunks fixed by the shape,
// and the tasks' sums are added in chunk order, so the bits do not depend on
// the thread count or on which thread ran what.
// Work is split over (batch, block) pairs across the thread pool; the GEMMs
// are OpenBLAS's, single-threaded inside each task. The loops over a block of
// scores (row maxima, exps, row sums) are vectorised (runtime/vector_exp.h,
// compiled per ISA and picked at load time); sums and maxima run in kLanes
// fixed lanes reduced by a fixed tree, so the order of the additions is the
// same at every vector width.
#include "runtime/attention.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vector_exp.h"

namespace kiln {
namespace {

constexpr int64_t kRows = 64;      // query (or key) rows per task
constexpr int64_t kKeys = 128;     // keys (or queries) per inner block
constexpr int64_t kMinTasks = 16;  // the backward splits each head's key blocks into
constexpr int64_t kMaxChunks = 8;  // chunks, enough for this many tasks, at most this many
constexpr int64_t kLanes = 16;     // row sums and maxima in this many partial lanes: the
                                   // same bits at every vector width

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// The largest of row[0, n) and `m`; row is padded to a multiple of kLanes with -inf.
template <class T>
[[gnu::always_inline]] inline T row_max(const T* row, int64_t n, T m) {
  T lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = m;
  for (int64_t c = 0; c < n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = lane[l] < row[c + l] ? row[c + l] : lane[l];
  for (int64_t w = kLanes / 2; w > 0; w /= 2)  // a fixed tree, not a chain of kLanes
    for (int64_t l = 0; l < w; ++l) lane[l] = lane[l] < lane[l + w] ? lane[l + w] : lane[l];
  return lane[0];
}

// row[c] = exp(row[c] - shift) over the padded row; returns their sum.
template <class T>
[[gnu::always_inline]] inline T exp_row(T* row, int64_t n, T shift) {
  T lane[kLanes] = {};
  for (int64_t c = 0; c < n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += row[c + l] = vector_exp(row[c + l] - shift);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

// One block of the online softmax over `rows` rows of S (ld kKeys, `keys`
// columns padded with -inf to a multiple of kLanes): m' = max(m, rowmax S),
// S = exp(S - m'), l = l exp(m - m') + rowsum S, and each row of acc (rows x
// width, may be null) times exp(m - m').
template <class T>
[[gnu::always_inline]] inline void online_softmax_impl(T* S, int64_t rows, int64_t keys, T* m, T* l,
                                                       T* acc, int64_t width) {
  const int64_t padded = (keys + kLanes - 1) / kLanes * kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    T* row = S + r * kKeys;
    const T mx = row_max(row, padded, m[r]);
    const T shift = mx == kNegInf<T> ? T(0) : mx;  // nothing seen yet: every exp is 0
    const T fade = vector_exp(m[r] - shift);
    l[r] = l[r] * fade + exp_row(row, padded, shift);
    m[r] = mx;
    if (acc && fade != T(1))
      for (int64_t c = 0; c < width; ++c) acc[r * width + c] *= fade;
  }
}
KILN_VECTOR_CLONES void online_softmax(float* S, int64_t rows, int64_t keys, float* m, float* l,
                                       float* acc, int64_t width) {
  online_softmax_impl(S, rows, keys, m, l, acc, width);
}
KILN_VECTOR_CLONES void online_softmax(double* S, int64_t rows, int64_t keys, double* m, double* l,
                                       double* acc, int64_t width) {
  online_softmax_impl(S, rows, keys, m, l, acc, width);
}

// Over a block of scores transposed (keys x rows, ld kRows): P^T = exp(S^T -
// lse_r) in place, and with dS (dP^T on entry; may be null) dS^T = P^T (dP^T - D_r).
template <class T>
[[gnu::always_inline]] inline void probs_t_impl(T* P, T* dS, int64_t keys, int64_t rows,
                                                const T* lse, const T* D) {
  for (int64_t c = 0; c < keys; ++c) {
    T* p = P + c * kRows;
    if (!dS) {
      for (int64_t r = 0; r < rows; ++r) p[r] = vector_exp(p[r] - lse[r]);
      continue;
    }
    T* ds = dS + c * kRows;
    for (int64_t r = 0; r < rows; ++r) {
      p[r] = vector_exp(p[r] - lse[r]);
      ds[r] = p[r] * (ds[r] - D[r]);
    }
  }
}
KILN_VECTOR_CLONES void probs_t(float* P, float* dS, int64_t keys, int64_t rows, const float* lse,
                                const float* D) {
  probs_t_impl(P, dS, keys, rows, lse, D);
}
KILN_VECTOR_CLONES void probs_t(double* P, double* dS, int64_t keys, int64_t rows,
                                const double* lse, const double* D) {
  probs_t_impl(P, dS, keys, rows, lse, D);
}

// c (m x n, ldc) = alpha * op(a) op(b) + beta * c, row-major.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const auto A = ta ? CblasTrans : CblasNoTrans, B = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, A, B, blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b,
                blasint(ldb), beta, c, blasint(ldc));
  else
    cblas_dgemm(CblasRowMajor, A, B, blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b,
                blasint(ldb), beta, c, blasint(ldc));
}

// x [batch, n, w] transposed block by block: [batch, n / blk, w, blk] (the last
// block padded with zeros), for the GEMMs that read it transposed: OpenBLAS's
// kernels for a transposed operand at these sizes are far slower than its
// small-matrix ones for plain operands, and a block's rows blk apart (not n)
// stay clear of the cache's set conflicts.
template <class T>
std::vector<T> blocks_transposed(const T* x, int64_t batch, int64_t n, int64_t w, int64_t blk) {
  const int64_t blocks = (n + blk - 1) / blk;
  std::vector<T> t(static_cast<size_t>(batch * blocks * w * blk));
  parallel_for(batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t b = task / blocks, r0 = task % blocks * blk, r1 = std::min(n, r0 + blk);
      const T* from = x + b * n * w;
      T* to = t.data() + task * w * blk;
      for (int64_t c = 0; c < w; ++c)
        for (int64_t r = r0; r < r1; ++r) to[c * blk + r - r0] = from[r * w + c];
    }
  });
  return t;
}

template <class T>
struct Heads {
  const AttentionShape& s;
  const T *q, *k, *v;
  const T* kt;  // k by blocks of kKeys keys transposed ([batch, tk / kKeys, d, kKeys])
  const T* Q(int64_t b) const { return q + b * s.tq * s.d; }
  const T* K(int64_t b) const { return k + b * s.tk * s.d; }
  const T* V(int64_t b) const { return v + b * s.tk * s.dv; }
  // The transposed block of keys j0.. (ld kKeys).
  const T* Kt(int64_t b, int64_t j0) const {
    return kt + (b * ((s.tk + kKeys - 1) / kKeys) + j0 / kKeys) * s.d * kKeys;
  }
  // Keys [0, key_end(i1)) can be seen by query rows < i1.
  int64_t key_end(int64_t i1) const { return s.causal ? std::min(s.tk, i1) : s.tk; }
  // S (rows x keys, ld kKeys) = scale * Q[i0:i0+rows] K[j0:j0+keys]^T, masked.
  void scores(int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t keys, T* S) const {
    gemm<T>(false, false, rows, keys, s.d, T(s.scale), Q(b) + i0 * s.d, s.d, Kt(b, j0), kKeys, T(0),
            S, kKeys);
    const int64_t padded = (keys + kLanes - 1) / kLanes * kLanes;
    for (int64_t r = 0; r < rows; ++r)
      // Past the keys (the lanes' padding) and, causally, past the row's last key.
      for (int64_t c = s.causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, keys) : keys; c < padded; ++c)
        S[r * kKeys + c] = kNegInf<T>;
  }
  // S^T (keys x rows, ld kRows) = scale * K[j0:j0+keys] Q[i0:i0+rows]^T, masked;
  // qt is the query block transposed (ld kRows).
  void scores_t(const T* qt, int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t keys,
                T* St) const {
    gemm<T>(false, false, keys, rows, s.d, T(s.scale), K(b) + j0 * s.d, s.d, qt, kRows, T(0), St,
            kRows);
    if (!s.causal || j0 + keys - 1 <= i0) return;
    for (int64_t c = 0; c < keys; ++c)  // query i0 + r sees key j0 + c when j0 + c <= i0 + r
      std::fill(St + c * kRows, St + c * kRows + std::min(rows, std::max<int64_t>(0, j0 + c - i0)),
                kNegInf<T>);
  }
  // Each row's log-sum-exp over the keys it sees (the forward's m + log l).
  void lse(int64_t b, int64_t i0, int64_t rows, T* S, T* out) const {
    T m[kRows], l[kRows];
    std::fill(m, m + rows, kNegInf<T>);
    std::fill(l, l + rows, T(0));
    for (int64_t j0 = 0; j0 < key_end(i0 + rows); j0 += kKeys) {
      const int64_t keys = std::min(kKeys, s.tk - j0);
      scores(b, i0, rows, j0, keys, S);
      online_softmax(S, rows, keys, m, l, static_cast<T*>(nullptr), 0);
    }
    for (int64_t r = 0; r < rows; ++r) out[r] = m[r] + std::log(l[r]);
  }
};

template <class T>
void forward(const AttentionShape& s, const T* q, const T* k, const T* v, T* out) {
  const std::vector<T> kt = blocks_transposed(k, s.batch, s.tk, s.d, kKeys);
  const Heads<T> h{s, q, k, v, kt.data()};
  const int64_t blocks = (s.tq + kRows - 1) / kRows;
  parallel_for(s.batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> S(static_cast<size_t>(kRows * kKeys)), acc(static_cast<size_t>(kRows * s.dv)),
        m(static_cast<size_t>(kRows)), l(static_cast<size_t>(kRows));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blocks, i0 = t % blocks * kRows, rows = std::min(kRows, s.tq - i0);
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(l.begin(), l.end(), T(0));
      for (int64_t j0 = 0; j0 < h.key_end(i0 + rows); j0 += kKeys) {
        const int64_t keys = std::min(kKeys, s.tk - j0);
        h.scores(b, i0, rows, j0, keys, S.data());
        online_softmax(S.data(), rows, keys, m.data(), l.data(), acc.data(), s.dv);
        gemm<T>(false, false, rows, s.dv, keys, T(1), S.data(), kKeys, h.V(b) + j0 * s.dv, s.dv,
                T(1), acc.data(), s.dv);
      }
      T* o = out + (b * s.tq + i0) * s.dv;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < s.dv; ++c)
          o[r * s.dv + c] = acc[size_t(r * s.dv + c)] / l[size_t(r)];
    }
  });
}

template <class T>
void backward(const AttentionShape& s, int which, const T* q, const T* k, const T* v, const T* out,
              const T* g, T* grad) {
  const std::vector<T> kt = blocks_transposed(k, s.batch, s.tk, s.d, kKeys);
  const Heads<T> h{s, q, k, v, kt.data()};
  const bool want_q = which & 1, want_k = which & 2, want_v = which & 4, want_ds = want_q || want_k;
  const std::array<int64_t, 3> at = attention_grad_offsets(s, which);
  T* dq = grad + std::max<int64_t>(at[0], 0);
  T* dk = grad + std::max<int64_t>(at[1], 0);
  T* dv = grad + std::max<int64_t>(at[2], 0);
  if (s.batch == 0 || s.tq == 0 || s.tk == 0) {  // no scores: zero gradients, if any
    const int64_t n = (want_q ? s.batch * s.tq * s.d : 0) + (want_k ? s.batch * s.tk * s.d : 0) +
                      (want_v ? s.batch * s.tk * s.dv : 0);
    std::fill(grad, grad + n, T(0));
    return;
  }
  // Per query row: lse, and D = g . out where dS is needed, for every row (the
  // key-block tasks read them all).
  std::vector<T> lse(size_t(s.batch * s.tq)), D(want_ds ? size_t(s.batch * s.tq) : 0);
  const int64_t qblocks = (s.tq + kRows - 1) / kRows;
  parallel_for(s.batch * qblocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> S(static_cast<size_t>(kRows * kKeys));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / qblocks, i0 = t % qblocks * kRows, rows = std::min(kRows, s.tq - i0);
      h.lse(b, i0, rows, S.data(), lse.data() + b * s.tq + i0);
      if (!want_ds) continue;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = b * s.tq + i0 + r;
        T sum = T(0);
        for (int64_t c = 0; c < s.dv; ++c) sum += g[i * s.dv + c] * out[i * s.dv + c];
        D[size_t(i)] = sum;
      }
    }
  });
  // By key blocks: for each query block that sees one, P, dP = g V^T and
  // dS = P (dP - D), then dv += P^T g and dk += scale dS^T Q for the key block
  // and dq += scale dS K for the query block. With dq wanted, a task takes
  // every chunks-th key block of one head (interleaved: causal blocks differ in
  // work) and sums its dq terms into a buffer of its own, added in chunk order
  // afterwards: the same bits at every thread count.
  const int64_t kblocks = (s.tk + kKeys - 1) / kKeys;
  const int64_t chunks = want_q
                             ? std::min({kblocks, kMaxChunks,
                                         std::max<int64_t>(1, (kMinTasks + s.batch - 1) / s.batch)})
                             : kblocks;
  const int64_t head_q = s.tq * s.d;
  const std::vector<T> qt = blocks_transposed(q, s.batch, s.tq, s.d, kRows),
                       gt = want_ds ? blocks_transposed(g, s.batch, s.tq, s.dv, kRows)
                                    : std::vector<T>{};
  std::vector<T> partial(want_q ? size_t((chunks - 1) * s.batch * head_q) : 0);
  auto dq_of = [&](int64_t b, int64_t c) {
    return c == 0 ? dq + b * head_q : partial.data() + ((c - 1) * s.batch + b) * head_q;
  };
  parallel_for(s.batch * chunks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> P(static_cast<size_t>(kKeys * kRows)),
        dS(want_ds ? static_cast<size_t>(kKeys * kRows) : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / chunks, c = t % chunks;
      T* dqc = want_q ? dq_of(b, c) : nullptr;
      if (want_q) std::fill(dqc, dqc + head_q, T(0));
      for (int64_t j0 = c * kKeys; j0 < s.tk; j0 += chunks * kKeys) {
        const int64_t keys = std::min(kKeys, s.tk - j0);
        T* dkj = dk + (b * s.tk + j0) * s.d;
        T* dvj = dv + (b * s.tk + j0) * s.dv;
        if (want_k) std::fill(dkj, dkj + keys * s.d, T(0));
        if (want_v) std::fill(dvj, dvj + keys * s.dv, T(0));
        for (int64_t i0 = s.causal ? j0 / kRows * kRows : 0; i0 < s.tq; i0 += kRows) {
          const int64_t rows = std::min(kRows, s.tq - i0);
          const T* gi = g + (b * s.tq + i0) * s.dv;
          const int64_t blk = b * qblocks + i0 / kRows;
          h.scores_t(qt.data() + blk * s.d * kRows, b, i0, rows, j0, keys, P.data());
          if (want_ds)
            gemm<T>(false, false, keys, rows, s.dv, T(1), h.V(b) + j0 * s.dv, s.dv,
                    gt.data() + blk * s.dv * kRows, kRows, T(0), dS.data(), kRows);
          probs_t(P.data(), want_ds ? dS.data() : nullptr, keys, rows, lse.data() + b * s.tq + i0,
                  want_ds ? D.data() + b * s.tq + i0 : nullptr);
          if (want_v)
            gemm<T>(false, false, keys, s.dv, rows, T(1), P.data(), kRows, gi, s.dv, T(1), dvj,
                    s.dv);
          if (want_k)
            gemm<T>(false, false, keys, s.d, rows, T(s.scale), dS.data(), kRows, h.Q(b) + i0 * s.d,
                    s.d, T(1), dkj, s.d);
          if (want_q)
            gemm<T>(true, false, rows, s.d, keys, T(s.scale), dS.data(), kRows, h.K(b) + j0 * s.d,
                    s.d, T(1), dqc + i0 * s.d, s.d);
        }
      }
    }
  });
  if (chunks <= 1 || !want_q) return;
  parallel_for(s.batch * qblocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / qblocks, i0 = t % qblocks * kRows, n = std::min(kRows, s.tq - i0) * s.d;
      T* to = dq + b * head_q + i0 * s.d;
      for (int64_t c = 1; c < chunks; ++c) {
        const T* from = dq_of(b, c) + i0 * s.d;
        for (int64_t e = 0; e < n; ++e) to[e] += from[e];
      }
    }
  });
}

}  // namespace

AttentionShape attention_shape(const TensorType& q, const TensorType& k, const TensorType& v,
                               const Attrs& attrs) {
  AttentionShape s;
  s.dtype = q.dtype;
  const int64_t r = q.rank();
  KILN_CHECK(r >= 2 && k.rank() == r && v.rank() == r, "internal: attention operands of rank ", r);
  for (int64_t i = 0; i + 2 < r; ++i) s.batch *= q.shape[size_t(i)];
  s.tq = q.shape[size_t(r - 2)];
  s.d = q.shape[size_t(r - 1)];
  s.tk = k.shape[size_t(r - 2)];
  s.dv = v.shape[size_t(r - 1)];
  s.scale = attrs.f(AttrKey::scale);
  s.causal = attrs.i(AttrKey::causal) != 0;
  return s;
}

std::array<int64_t, 3> attention_grad_offsets(const AttentionShape& s, int which) {
  const int64_t size[3] = {s.batch * s.tq * s.d, s.batch * s.tk * s.d, s.batch * s.tk * s.dv};
  std::array<int64_t, 3> at{-1, -1, -1};
  int64_t next = 0;
  for (int i = 0; i < 3; ++i)
    if (which & (1 << i)) {
      at[size_t(i)] = next;
      next += size[i];
    }
  return at;
}

void attention_forward(const AttentionShape& s, const void* q, const void* k, const void* v,
                       void* out) {
  if (s.batch * s.tq * s.dv == 0) return;
  if (s.dtype == DType::f32)
    return forward(s, static_cast<const float*>(q), static_cast<const float*>(k),
                   static_cast<const float*>(v), static_cast<float*>(out));
  KILN_CHECK(s.dtype == DType::f64, "internal: attention of ", dtype_name(s.dtype));
  forward(s, static_cast<const double*>(q), static_cast<const double*>(k),
          static_cast<const double*>(v), static_cast<double*>(out));
}

void attention_backward(const AttentionShape& s, int which, const void* q, const void* k,
                        const void* v, const void* out, const void* g, void* grad) {
  if (s.dtype == DType::f32)
    return backward(s, which, static_cast<const float*>(q), static_cast<const float*>(k),
                    static_cast<const float*>(v), static_cast<const float*>(out),
                    static_cast<const float*>(g), static_cast<float*>(grad));
  KILN_CHECK(s.dtype == DType::f64, "internal: attention of ", dtype_name(s.dtype));
  backward(s, which, static_cast<const double*>(q), static_cast<const double*>(k),
           static_cast<const double*>(v), static_cast<const double*>(out),
           static_cast<const double*>(g), static_cast<double*>(grad));
}

}  // namespace kiln
