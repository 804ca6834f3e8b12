// The sort library step (runtime/sort.h). Each element becomes an unsigned key
// whose integer order is the sort order: floats flip their sign bit (negative
// ones all their bits), -0.0 becomes 0.0, every NaN the largest key; signed
// integers flip the sign bit; descending complements the key. Equal keys keep
// their positions' order, in all three algorithms:
//   - a least-significant-digit radix sort of (key, position) pairs, 8 bits a
//     pass, skipping the digits every key shares (stable by construction);
//   - std::stable_sort of the pairs for lines too short for 256-bucket passes;
//   - for count much smaller than n, one pass keeping the first `count` pairs in
//     order by insertion (a later equal key never displaces an earlier one).
#include "runtime/sort.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

constexpr int64_t kRadixMin = 256;    // shorter lines sort by comparison
constexpr int64_t kSelectRatio = 16;  // count * 16 < n: select instead of sorting
constexpr int64_t kGrain = 1 << 15;   // elements per parallel task, at least

template <class K>
struct Pair {
  K key;
  int64_t pos;
};

template <class T>
auto order_key(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // Branch-free (selects), so a block of keys vectorises.
    using U = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
    constexpr U sign = U(1) << (sizeof(U) * 8 - 1);
    U bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits = v == T(0) ? U(0) : bits;  // -0.0 ties with 0.0
    const U key = (bits & sign) ? U(~bits) : U(bits | sign);
    return v != v ? std::numeric_limits<U>::max() : key;
  } else if constexpr (std::is_same_v<T, bool>) {
    return uint32_t(v);
  } else if constexpr (std::is_unsigned_v<T>) {  // uint8: its own order
    return v;
  } else {
    using U = std::make_unsigned_t<T>;
    return U(U(v) ^ (U(1) << (sizeof(U) * 8 - 1)));
  }
}

template <class K>
void radix_sort(std::vector<Pair<K>>& a, std::vector<Pair<K>>& tmp) {
  constexpr int kPasses = sizeof(K);
  const size_t n = a.size();
  std::vector<std::array<uint32_t, 256>> hist(kPasses);
  for (auto& h : hist) h.fill(0);
  for (const Pair<K>& p : a)
    for (int d = 0; d < kPasses; ++d) hist[d][(p.key >> (8 * d)) & 0xff]++;
  tmp.resize(n);
  for (int d = 0; d < kPasses; ++d) {
    std::array<uint32_t, 256>& h = hist[d];
    if (h[(a[0].key >> (8 * d)) & 0xff] == n) continue;  // every key has this digit
    uint32_t sum = 0;
    for (uint32_t& c : h) {
      const uint32_t here = c;
      c = sum;
      sum += here;
    }
    for (const Pair<K>& p : a) tmp[h[(p.key >> (8 * d)) & 0xff]++] = p;
    a.swap(tmp);
  }
}

// The first `count` (key, position) pairs of a line in order, from one pass
// over it: keys are made a block at a time, and a block whose smallest key
// cannot enter the kept list (equal keys keep the earlier position) is passed
// over after one vectorised min; the rest are inserted in order.
template <class T, class K>
void select_first(const T* x, int64_t n, int64_t stride, bool descending, int64_t count,
                  std::vector<Pair<K>>& best) {
  constexpr int64_t kBlock = 64;
  K keys[kBlock];
  best.clear();
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t m = std::min(kBlock, n - j0);
    const K flip = descending ? std::numeric_limits<K>::max() : K(0);
    K low = std::numeric_limits<K>::max();
    for (int64_t j = 0; j < m; ++j) {
      keys[j] = K(order_key(x[(j0 + j) * stride]) ^ flip);
      low = std::min(low, keys[j]);
    }
    if (int64_t(best.size()) == count && !(low < best.back().key)) continue;
    for (int64_t j = 0; j < m; ++j) {
      const K key = keys[j];
      if (int64_t(best.size()) == count && !(key < best.back().key)) continue;
      auto at = std::upper_bound(best.begin(), best.end(), key,
                                 [](K k, const Pair<K>& b) { return k < b.key; });
      if (int64_t(best.size()) == count) best.pop_back();
      best.insert(at, Pair<K>{key, j0 + j});
    }
  }
}

template <class T>
void sort_typed(const SortLines& s, const T* in, int64_t* out) {
  using K = decltype(order_key(T{}));
  const int64_t lines = s.outer * s.inner;
  const int64_t per_task = std::max<int64_t>(1, kGrain / std::max<int64_t>(s.n, 1));
  parallel_for(lines, per_task, [&](int64_t begin, int64_t end) {
    std::vector<Pair<K>> a, tmp, best;
    for (int64_t line = begin; line < end; ++line) {
      const int64_t o = line / s.inner, i = line % s.inner;
      const T* x = in + o * s.n * s.inner + i;
      int64_t* y = out + o * s.count * s.inner + i;
      if (s.count * kSelectRatio < s.n) {
        select_first(x, s.n, s.inner, s.descending, s.count, best);
        for (int64_t j = 0; j < s.count; ++j) y[j * s.inner] = best[size_t(j)].pos;
        continue;
      }
      a.resize(size_t(s.n));
      for (int64_t j = 0; j < s.n; ++j) {
        K key = order_key(x[j * s.inner]);
        a[size_t(j)] = {s.descending ? K(~key) : key, j};
      }
      const Pair<K>* first = a.data();
      if (s.n >= kRadixMin) {
        radix_sort(a, tmp);
        first = a.data();
      } else {
        std::stable_sort(a.begin(), a.end(),
                         [](const Pair<K>& p, const Pair<K>& q) { return p.key < q.key; });
        first = a.data();
      }
      for (int64_t j = 0; j < s.count; ++j) y[j * s.inner] = first[j].pos;
    }
  });
}

}  // namespace

SortLines sort_lines_for(const TensorType& in, const Attrs& attrs) {
  const int64_t rank = in.rank();
  const int64_t d = normalize_dim(attrs.i(AttrKey::dim), std::max<int64_t>(rank, 1));
  SortLines s;
  s.dtype = in.dtype;
  for (int64_t k = 0; k < rank; ++k)
    (k < d ? s.outer : k > d ? s.inner : s.n) *= in.shape[size_t(k)];
  s.count = attrs.i(AttrKey::count);
  s.descending = attrs.i(AttrKey::descending) != 0;
  return s;
}

void sort_lines(const SortLines& s, const void* in, int64_t* out) {
  KILN_CHECK(s.outer >= 0 && s.n >= 0 && s.inner >= 0 && s.count >= 0 && s.count <= s.n,
             "internal: sort of [", s.outer, ", ", s.n, ", ", s.inner, "] asked for ", s.count,
             " positions");
  if (s.outer * s.inner == 0 || s.count == 0) return;
  switch (s.dtype) {
    case DType::f32:
      return sort_typed(s, static_cast<const float*>(in), out);
    case DType::f64:
      return sort_typed(s, static_cast<const double*>(in), out);
    case DType::i32:
      return sort_typed(s, static_cast<const int32_t*>(in), out);
    case DType::i64:
      return sort_typed(s, static_cast<const int64_t*>(in), out);
    case DType::b8:
      return sort_typed(s, static_cast<const bool*>(in), out);
    case DType::u8:
      return sort_typed(s, static_cast<const uint8_t*>(in), out);
    case DType::i8:
      return sort_typed(s, static_cast<const int8_t*>(in), out);
    case DType::i16:
      return sort_typed(s, static_cast<const int16_t*>(in), out);
  }
  throw Error(std::string("internal: sort of ") + dtype_name(s.dtype));
}

}  // namespace kiln
