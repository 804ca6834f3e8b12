// Reference kernels for reductions (ir/ops.def's reduce and argreduce rows):
// sum/max/min over a list of dims and argmax/argmin over one dim (or all,
// flattened, when no dim is given). Each folds from its row's identity with its
// row's combine op: a sum and a max or min have vectorised loops of their own;
// any other combine op folds with its elementwise scalar functor.
//
// The input's dims split into kept (K) and reduced (R) groups, each sorted by
// stride and coalesced. When the smallest stride is in R, each output reduces
// a run of contiguous input ("inner" reduction, parallel over outputs); when
// it is in K, a block of neighbouring outputs accumulates together while R is
// walked ("outer" reduction, vectorised along the block). When there are few
// outputs, R itself is split over cores and partial results merged in order.
// f32 sums accumulate in double, integer and bool sums in int64.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_functors.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln::detail {
namespace {

// Input elements per parallel chunk.
constexpr int64_t kReduceGrain = 1 << 15;
// Outputs accumulated together in an outer reduction.
constexpr int64_t kBlock = 1024;

// ---- 16-byte vectors (GCC/Clang extensions: SSE2 on x86-64, NEON on ARM) ----
// The NaN-aware max/min and the f32 sum do not auto-vectorise; these do.

template <class T>
inline constexpr bool kVectorisable = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                      std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

template <class T>
struct Vec {
  static constexpr int64_t kLanes = int64_t(16 / sizeof(T));
  typedef T V __attribute__((vector_size(16)));
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  static V splat(T x) {
    V v = {};
    return v + x;
  }
};

// ---- Reducers: init / step / merge / finish, plus loops over a run (inner
// reductions) and over up to four rows of a block of outputs (outer ones) ----

template <class T, class O>
struct SumReducer {
  using Acc = std::conditional_t<std::is_floating_point_v<O>, double, int64_t>;
  using State = Acc;
  State init() const { return 0; }
  void step(State& s, T x, int64_t) const { s += Acc(x); }
  void merge(State& s, const State& later) const { s += later; }
  O finish(const State& s) const { return convert<O>(s); }
  void run(State& s, const T* p, int64_t n, int64_t stride, int64_t) const {
    if constexpr (std::is_same_v<T, float>) {
      if (stride == 1) return run_f32(s, p, n);
    }
    if (stride == 1) {
      Acc lane[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) lane[j] += Acc(p[i + j]);
      for (; i < n; ++i) lane[0] += Acc(p[i]);
      s +=
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    } else {
      for (int64_t i = 0; i < n; ++i) s += Acc(p[i * stride]);
    }
  }
  // f32 lanes sum short stretches (at most 32 values each, so their rounding
  // error stays near that of pairwise summation) and hand them on in double.
  static void run_f32(State& s, const float* p, int64_t n) {
    using W = Vec<float>;
    constexpr int64_t L = W::kLanes, kStretch = 32;
    double total = 0;
    int64_t i = 0;
    while (n - i >= 4 * L) {
      typename W::V a0 = {}, a1 = {}, a2 = {}, a3 = {};
      const int64_t stop = i + std::min<int64_t>((n - i) / (4 * L), kStretch) * 4 * L;
      for (; i < stop; i += 4 * L) {
        a0 += W::load(p + i);
        a1 += W::load(p + i + L);
        a2 += W::load(p + i + 2 * L);
        a3 += W::load(p + i + 3 * L);
      }
      typename W::V a = (a0 + a1) + (a2 + a3);
      for (int64_t j = 0; j < L; ++j) total += double(a[j]);
    }
    for (; i < n; ++i) total += double(p[i]);
    s += total;
  }
  void rows(State* __restrict s, const T* q, int64_t rs, int64_t nr, int64_t cnt, int64_t stride,
            int64_t) const {
    if (stride == 1 && nr == 4) {
      const T* __restrict q0 = q;
      const T* __restrict q1 = q + rs;
      const T* __restrict q2 = q + 2 * rs;
      const T* __restrict q3 = q + 3 * rs;
      for (int64_t j = 0; j < cnt; ++j)
        s[j] += (Acc(q0[j]) + Acc(q1[j])) + (Acc(q2[j]) + Acc(q3[j]));
      return;
    }
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t j = 0; j < cnt; ++j) s[j] += Acc(q[r * rs + j * stride]);
  }
};

// max/min, NaN-propagating: once a NaN is seen it stays.
template <class T, bool kMax>
struct ExtremeReducer {
  using State = T;
  static bool better(T x, T s) { return (kMax ? x > s : x < s) || x != x; }
  State init() const {
    if constexpr (std::is_floating_point_v<T>) {
      return kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  }
  void step(State& s, T x, int64_t) const { s = better(x, s) ? x : s; }
  void merge(State& s, const State& later) const { step(s, later, 0); }
  T finish(const State& s) const { return s; }
  void run(State& s, const T* p, int64_t n, int64_t stride, int64_t) const {
    int64_t i = 0;
    if constexpr (kVectorisable<T>) {
      if (stride == 1) i = run_vec(s, p, n);
    }
    for (; i < n; ++i) step(s, p[i * stride], 0);
  }
  // Four vector accumulators over the whole-vector prefix of the run; returns
  // how many elements it consumed. Any NaN makes the result NaN at once.
  static int64_t run_vec(State& s, const T* p, int64_t n) {
    using W = Vec<T>;
    using V = typename W::V;
    constexpr int64_t L = W::kLanes;
    if (n < 4 * L) return 0;
    V m0 = W::splat(s), m1 = m0, m2 = m0, m3 = m0;
    decltype(m0 != m0) nan = {};
    auto pick = [](V x, V m) { return (kMax ? x > m : x < m) ? x : m; };
    int64_t i = 0;
    for (; i + 4 * L <= n; i += 4 * L) {
      V x0 = W::load(p + i), x1 = W::load(p + i + L);
      V x2 = W::load(p + i + 2 * L), x3 = W::load(p + i + 3 * L);
      m0 = pick(x0, m0);
      m1 = pick(x1, m1);
      m2 = pick(x2, m2);
      m3 = pick(x3, m3);
      if constexpr (std::is_floating_point_v<T>)
        nan |= (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3);
    }
    bool any_nan = false;
    for (int64_t j = 0; j < L; ++j) {
      any_nan |= nan[j] != 0;
      s = better(m0[j], s) ? m0[j] : s;
      s = better(m1[j], s) ? m1[j] : s;
      s = better(m2[j], s) ? m2[j] : s;
      s = better(m3[j], s) ? m3[j] : s;
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (any_nan) s = std::numeric_limits<T>::quiet_NaN();
    }
    return i;
  }
  void rows(State* __restrict s, const T* q, int64_t rs, int64_t nr, int64_t cnt, int64_t stride,
            int64_t) const {
    int64_t j = 0;
    if constexpr (kVectorisable<T>) {
      if (stride == 1 && nr == 4) j = rows4_vec(s, q, rs, cnt);
    }
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t c = j; c < cnt; ++c) step(s[c], q[r * rs + c * stride], 0);
  }
  // Four rows folded into the states per pass with a plain select; NaNs (rare)
  // are patched in afterwards, which is exact since a NaN wins whatever the order.
  static int64_t rows4_vec(State* __restrict s, const T* q, int64_t rs, int64_t cnt) {
    using W = Vec<T>;
    using V = typename W::V;
    auto pick = [](V x, V m) { return (kMax ? x > m : x < m) ? x : m; };
    decltype(V{} != V{}) nan = {};
    int64_t j = 0;
    for (; j + W::kLanes <= cnt; j += W::kLanes) {
      V x0 = W::load(q + j), x1 = W::load(q + rs + j);
      V x2 = W::load(q + 2 * rs + j), x3 = W::load(q + 3 * rs + j);
      if constexpr (std::is_floating_point_v<T>)
        nan |= (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3);
      W::store(s + j, pick(pick(pick(x0, x1), pick(x2, x3)), W::load(s + j)));
    }
    if constexpr (std::is_floating_point_v<T>) {
      bool any = false;
      for (int64_t l = 0; l < W::kLanes; ++l) any |= nan[l] != 0;
      if (any)
        for (int64_t r = 0; r < 4; ++r)
          for (int64_t c = 0; c < j; ++c)
            if (q[r * rs + c] != q[r * rs + c]) s[c] = q[r * rs + c];
    }
    return j;
  }
};

// argmax/argmin: the first index of the extreme value; a NaN is the extreme.
template <class T, bool kMax>
struct ArgReducer {
  struct State {
    T v{};
    int64_t i = -1;
  };
  static bool better(T x, T s) { return (kMax ? x > s : x < s) || (x != x && s == s); }
  State init() const { return {}; }
  void step(State& s, T x, int64_t idx) const {
    if (s.i < 0 || better(x, s.v)) s = {x, idx};
  }
  void merge(State& s, const State& later) const {
    if (later.i >= 0 && (s.i < 0 || better(later.v, s.v))) s = later;
  }
  int64_t finish(const State& s) const { return s.i; }
  void run(State& s, const T* p, int64_t n, int64_t stride, int64_t idx0) const {
    for (int64_t i = 0; i < n; ++i) step(s, p[i * stride], idx0 + i);
  }
  void rows(State* s, const T* q, int64_t rs, int64_t nr, int64_t cnt, int64_t stride,
            int64_t idx0) const {
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t j = 0; j < cnt; ++j) step(s[j], q[r * rs + j * stride], idx0 + r);
  }
};

// Any other reduction: the accumulator starts at the row's identity and folds
// each element in with the combine op's scalar functor (reference_functors.h),
// in the result's dtype and in index order.
template <class T>
struct FoldReducer {
  using State = T;
  T start;
  CombineFn<T> f;
  State init() const { return start; }
  void step(State& s, T x, int64_t) const { s = f(s, x); }
  void merge(State& s, const State& later) const { s = f(s, later); }
  T finish(const State& s) const { return s; }
  void run(State& s, const T* p, int64_t n, int64_t stride, int64_t) const {
    for (int64_t i = 0; i < n; ++i) s = f(s, p[i * stride]);
  }
  void rows(State* s, const T* q, int64_t rs, int64_t nr, int64_t cnt, int64_t stride,
            int64_t) const {
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t j = 0; j < cnt; ++j) s[j] = f(s[j], q[r * rs + j * stride]);
  }
};

// ---- The driver ----

struct Dim {
  int64_t size, in, out;  // element strides of input and output
};

// An array of reducer states (not std::vector, whose bool specialisation has no data()).
template <class S>
struct States {
  std::unique_ptr<S[]> p;
  States(int64_t n, const S& init) : p(new S[size_t(std::max<int64_t>(n, 1))]) {
    std::fill(p.get(), p.get() + n, init);
  }
  S* data() const { return p.get(); }
  S& operator[](int64_t i) const { return p[i]; }
};

std::vector<Dim> coalesce(std::vector<Dim> dims) {
  std::vector<Dim> outv;
  for (const Dim& d : dims) {
    if (!outv.empty() && outv.back().in == d.in * d.size && outv.back().out == d.out * d.size) {
      outv.back().size *= d.size;
      outv.back().in = d.in;
      outv.back().out = d.out;
    } else {
      outv.push_back(d);
    }
  }
  return outv;
}

template <class T, class O, class Red>
void run_reduce(const Red& red, const View& in, const View& out, const std::vector<int64_t>& rdims,
                bool sort_reduced) {
  using State = typename Red::State;
  const int64_t rank = in.rank();
  std::vector<char> reduced(rank, 0);
  for (int64_t d : rdims) reduced[d] = 1;
  std::vector<int64_t> kout(rank, 0);
  for (int64_t d = rank - 1, s = 1; d >= 0; --d) {
    if (!reduced[d]) {
      kout[d] = s;
      s *= in.shape[d];
    }
  }
  std::vector<Dim> K, R;
  for (int64_t d = 0; d < rank; ++d) {
    if (in.shape[d] == 1) continue;
    (reduced[d] ? R : K).push_back({in.shape[d], in.strides[d], kout[d]});
  }
  auto by_stride = [](const Dim& a, const Dim& b) { return a.in > b.in; };
  std::stable_sort(K.begin(), K.end(), by_stride);
  if (sort_reduced) std::stable_sort(R.begin(), R.end(), by_stride);
  K = coalesce(K);
  for (Dim& d : R) d.out = 0;
  R = coalesce(R);

  Shape rshape;
  Strides rstride;
  for (const Dim& d : R) {
    rshape.push_back(d.size);
    rstride.push_back(d.in);
  }
  const auto RL = make_loop<1>(rshape, {in.data}, {&rstride}, {int64_t(sizeof(T))});
  const int64_t rn = RL.numel;
  const int64_t rinner = RL.inner_stride(0) / int64_t(sizeof(T));

  // Outer reduction: the last kept dim is walked in blocks of kBlock outputs.
  const bool outer = !K.empty() && (R.empty() || K.back().in < R.back().in);
  Dim inner_k{1, 0, 0};
  if (outer) {
    inner_k = K.back();
    K.pop_back();
  }
  Shape kshape;
  Strides kin, kout_s;
  for (const Dim& d : K) {
    kshape.push_back(d.size);
    kin.push_back(d.in);
    kout_s.push_back(d.out);
  }
  const auto KL = make_loop<2>(kshape, {out.data, in.data}, {&kout_s, &kin},
                               {int64_t(sizeof(O)), int64_t(sizeof(T))});
  const int64_t nblocks = (inner_k.size + kBlock - 1) / kBlock;
  const int64_t items = KL.numel * nblocks;

  // Accumulates R's flat range [rb, re) for the `cnt` outputs whose input starts at x.
  auto accumulate = [&](const char* x, int64_t cnt, int64_t rb, int64_t re, State* st) {
    for_each_segment(RL, {const_cast<char*>(x)}, rb, re,
                     [&](const std::array<char*, 1>& q, int64_t n, int64_t i0) {
                       const T* p = reinterpret_cast<const T*>(q[0]);
                       if (!outer) {
                         red.run(st[0], p, n, rinner, i0);
                       } else {
                         for (int64_t t = 0; t < n; t += 4)
                           red.rows(st, p + t * rinner, rinner, std::min<int64_t>(4, n - t), cnt,
                                    inner_k.in, i0 + t);
                       }
                     });
  };
  // Pointers to the first input element and first output of item t.
  auto item_ptrs = [&](int64_t t, char** o, const char** x, int64_t* cnt) {
    int64_t k = t / nblocks, blk = t % nblocks;
    for_each_segment(KL, KL.base, k, k + 1, [&](const std::array<char*, 2>& p, int64_t, int64_t) {
      *o = p[0] + blk * kBlock * inner_k.out * int64_t(sizeof(O));
      *x = p[1] + blk * kBlock * inner_k.in * int64_t(sizeof(T));
    });
    *cnt = std::min(kBlock, inner_k.size - blk * kBlock);
  };
  auto write = [&](char* o, int64_t cnt, const State* st) {
    O* dst = reinterpret_cast<O*>(o);
    for (int64_t j = 0; j < cnt; ++j) dst[j * inner_k.out] = red.finish(st[j]);
  };

  const int64_t total = items * rn * std::min<int64_t>(inner_k.size, kBlock);
  const bool split_r = items < 2 * int64_t(num_threads()) && total >= 2 * kReduceGrain;
  if (!split_r) {
    const int64_t per_item = std::max<int64_t>(1, rn * std::min<int64_t>(inner_k.size, kBlock));
    parallel_for(items, std::max<int64_t>(1, kReduceGrain / per_item), [&](int64_t b, int64_t e) {
      States<State> st(std::min(kBlock, inner_k.size), red.init());
      if (!outer) {
        // Walk kept outputs run by run instead of locating each one.
        const int64_t so = KL.inner_stride(0), sx = KL.inner_stride(1);
        for_each_segment(KL, KL.base, b, e, [&](const std::array<char*, 2>& p, int64_t n, int64_t) {
          for (int64_t j = 0; j < n; ++j) {
            st[0] = red.init();
            accumulate(p[1] + j * sx, 1, 0, rn, st.data());
            *reinterpret_cast<O*>(p[0] + j * so) = red.finish(st[0]);
          }
        });
        return;
      }
      for (int64_t t = b; t < e; ++t) {
        char* o;
        const char* x;
        int64_t cnt;
        item_ptrs(t, &o, &x, &cnt);
        std::fill(st.data(), st.data() + cnt, red.init());
        accumulate(x, cnt, 0, rn, st.data());
        write(o, cnt, st.data());
      }
    });
    return;
  }
  // Few outputs: split R over cores, merge the partial states in index order.
  for (int64_t t = 0; t < items; ++t) {
    char* o;
    const char* x;
    int64_t cnt;
    item_ptrs(t, &o, &x, &cnt);
    std::vector<std::pair<int64_t, States<State>>> parts;
    std::mutex mu;
    parallel_for(rn, std::max<int64_t>(1, kReduceGrain / cnt), [&](int64_t b, int64_t e) {
      States<State> st(cnt, red.init());
      accumulate(x, cnt, b, e, st.data());
      std::lock_guard<std::mutex> lock(mu);
      parts.emplace_back(b, std::move(st));
    });
    std::sort(parts.begin(), parts.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    States<State> st(cnt, red.init());
    for (const auto& [begin, part] : parts)
      for (int64_t j = 0; j < cnt; ++j) red.merge(st[j], part[j]);
    write(o, cnt, st.data());
  }
}

std::vector<int64_t> reduce_dims(OpKind k, const Attrs& attrs, int64_t rank) {
  if (is_arg_reduction(k)) {
    if (!attrs.has(AttrKey::dim)) {
      std::vector<int64_t> all(rank);
      for (int64_t d = 0; d < rank; ++d) all[d] = d;
      return all;
    }
    if (rank == 0) return {};
    return {normalize_dim(attrs.i(AttrKey::dim), rank)};
  }
  return normalize_dims(attrs.ints(AttrKey::dims), rank);
}

}  // namespace

void ref_fold(Identity id, OpKind combine, const std::vector<int64_t>& dims, const View& in,
              const View& out) {
  // Sums and max/min have vectorised loops of their own (a sum accumulates
  // wider); any other combine op folds with its elementwise scalar functor.
  std::vector<std::shared_ptr<Storage>> keep;
  const bool up = combine == OpKind::maximum;
  if (combine == OpKind::add && id == Identity::zero) {
    if (in.dtype == out.dtype) {
      visit_dtype(in.dtype, [&](auto t) {
        using T = decltype(t);
        run_reduce<T, T>(SumReducer<T, T>{}, in, out, dims, true);
      });
    } else if (out.dtype == DType::i64 && is_integral(in.dtype)) {
      visit_dtype(in.dtype, [&](auto t) {
        using T = decltype(t);
        run_reduce<T, int64_t>(SumReducer<T, int64_t>{}, in, out, dims, true);
      });
    } else {
      View x = as_dtype(in, out.dtype, keep);
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        run_reduce<T, T>(SumReducer<T, T>{}, x, out, dims, true);
      });
    }
    return;
  }
  View x = as_dtype(in, out.dtype, keep);
  if ((up && id == Identity::lowest) || (combine == OpKind::minimum && id == Identity::highest)) {
    visit_dtype(out.dtype, [&](auto t) {
      using T = decltype(t);
      if (up) {
        run_reduce<T, T>(ExtremeReducer<T, true>{}, x, out, dims, true);
      } else {
        run_reduce<T, T>(ExtremeReducer<T, false>{}, x, out, dims, true);
      }
    });
    return;
  }
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    const CombineFn<T> f = combine_fn<T>(combine);
    KILN_CHECK(f, "reference kernel: a reduction cannot fold with ", op_name(combine),
               ", which has no scalar functor");
    run_reduce<T, T>(FoldReducer<T>{identity_value<T>(id), f}, x, out, dims, true);
  });
}

void ref_reduce(OpKind k, const Attrs& attrs, const View& in, const View& out) {
  const std::vector<int64_t> dims = reduce_dims(k, attrs, in.rank());
  int64_t kept = 1;
  for (int64_t d = 0, j = 0; d < in.rank(); ++d) {
    if (j < int64_t(dims.size()) && dims[j] == d) {
      ++j;
    } else {
      kept *= in.shape[d];
    }
  }
  KILN_CHECK(out.numel() == kept, op_name(k), ": output has ", out.numel(), " elements, expected ",
             kept, " for input ", shape_str(in.shape), " reduced over ", dims.size(), " dim(s)");
  if (kept == 0) return;
  const OpInfo& info = op_info(k);
  KILN_CHECK(info.identity != Identity::none, "reference kernel: ", op_name(k),
             " is not a reduction");
  if (in.numel() == 0) {
    // Nothing folded in: the identity, where it is a value (0 or 1) rather than
    // a bound (an empty max has no value: PyTorch raises).
    KILN_CHECK(
        !is_arg_reduction(k) && (info.identity == Identity::zero || info.identity == Identity::one),
        op_name(k), ": cannot reduce over an empty dimension (input shape ", shape_str(in.shape),
        ")");
    reference_kernel(OpKind::constant,
                     Attrs{{AttrKey::value, info.identity == Identity::one ? 1.0 : 0.0}}, {}, out);
    return;
  }
  if (is_arg_reduction(k)) {
    const bool up = info.combine == OpKind::maximum;
    KILN_CHECK(up || info.combine == OpKind::minimum, "reference kernel: ", op_name(k),
               ": an argreduce keeps the position of a maximum or a minimum, not of ",
               op_name(info.combine));
    std::vector<std::shared_ptr<Storage>> keep;
    View dst = out.dtype == DType::i64 ? out : scratch(out.shape, DType::i64, keep);
    visit_dtype(in.dtype, [&](auto t) {
      using T = decltype(t);
      if (up) {
        run_reduce<T, int64_t>(ArgReducer<T, true>{}, in, dst, dims, false);
      } else {
        run_reduce<T, int64_t>(ArgReducer<T, false>{}, in, dst, dims, false);
      }
    });
    if (dst.data != out.data) copy_to(dst, out);
    return;
  }
  ref_fold(info.identity, info.combine, dims, in, out);
}

}  // namespace kiln::detail
