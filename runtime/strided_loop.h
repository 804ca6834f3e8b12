// Internal to the reference kernels: element conversion, broadcasting of
// strides, and a strided N-d loop over a few operands at once. A loop nest
// drops size-1 dims and merges dims whose strides allow it, then walks a flat
// index range as segments of its innermost dim, so kernels see long runs with
// one stride per operand (and pick a tight loop when those are 1 or 0).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "runtime/storage.h"

namespace kiln::detail {

/// Converts one element; bool is "nonzero" in and 0/1 out, as in PyTorch. A
/// float becomes a small integer (uint8, int8, int16) through int64, wrapping,
/// as PyTorch's CPU kernels do (-1.0 as uint8 is 255); every backend does the same.
template <class To, class From>
inline To convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && sizeof(To) < 4) {
    return static_cast<To>(static_cast<int64_t>(x));
  } else {
    return static_cast<To>(x);
  }
}

/// Strides that read `v` as if broadcast to `shape` (trailing dims aligned, stride 0
/// where v has size 1 or no dim). Throws kiln::Error when v cannot broadcast to shape.
Strides broadcast_strides(const View& v, const Shape& shape);

/// `v` itself when it already has dtype `dt`, else a dense copy converted to `dt`
/// whose storage is appended to `keep` (which must outlive the returned view).
View as_dtype(const View& v, DType dt, std::vector<std::shared_ptr<Storage>>& keep);

/// A dense buffer of `shape` and `dt` whose storage is appended to `keep`.
View scratch(const Shape& shape, DType dt, std::vector<std::shared_ptr<Storage>>& keep);

/// The element offsets, in views with strides `a` and `b`, of the position with
/// row-major index `i` in `shape` (the reference kernels' walk over lines).
inline std::pair<int64_t, int64_t> offsets_at(int64_t i, const Shape& shape, const Strides& a, const Strides& b) {
  int64_t oa = 0, ob = 0;
  for (size_t q = shape.size(); q-- > 0;) {
    const int64_t c = i % shape[q];
    i /= shape[q];
    oa += c * a[q];
    ob += c * b[q];
  }
  return {oa, ob};
}

/// A loop nest over a common shape for N operands, each with its own element
/// strides and element size. Dims are outermost first, after coalescing.
template <size_t N>
struct StridedLoop {
  Shape shape;                                  // empty: a single element
  std::array<std::vector<int64_t>, N> strides;  // bytes, per dim
  std::array<char*, N> base{};
  int64_t numel = 1;

  /// Innermost byte stride of operand k (0 for a single element).
  int64_t inner_stride(int k) const { return shape.empty() ? 0 : strides[k].back(); }
};

/// Builds a loop nest: drops size-1 dims and merges dim d into d+1 when every
/// operand's stride allows it. `elem_strides[k]` has one entry per dim of `shape`.
template <size_t N>
StridedLoop<N> make_loop(const Shape& shape, const std::array<void*, N>& data,
                         const std::array<const Strides*, N>& elem_strides,
                         const std::array<int64_t, N>& elem_size) {
  StridedLoop<N> L;
  L.numel = kiln::numel(shape);
  for (size_t k = 0; k < N; ++k) L.base[k] = static_cast<char*>(data[k]);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !L.shape.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = L.strides[k].back() == (*elem_strides[k])[d] * elem_size[k] * shape[d];
    if (merge) {
      L.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) L.strides[k].back() = (*elem_strides[k])[d] * elem_size[k];
    } else {
      L.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) L.strides[k].push_back((*elem_strides[k])[d] * elem_size[k]);
    }
  }
  return L;
}

/// Calls fn(ptrs, len, flat_index) for each run of the innermost dim within the
/// row-major flat index range [begin, end); ptrs point at the run's first element
/// of each operand, offset from `base`.
template <size_t N, class F>
void for_each_segment(const StridedLoop<N>& L, const std::array<char*, N>& base, int64_t begin,
                      int64_t end, F&& fn) {
  if (begin >= end) return;
  const int r = static_cast<int>(L.shape.size());
  if (r == 0) {
    fn(base, int64_t(1), begin);
    return;
  }
  const int64_t inner = L.shape[r - 1];
  int64_t idx_small[8];
  std::vector<int64_t> idx_big;
  int64_t* idx = idx_small;
  if (r > 8) {
    idx_big.resize(r);
    idx = idx_big.data();
  }
  std::array<char*, N> p = base;
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % L.shape[d];
    rem /= L.shape[d];
    for (size_t k = 0; k < N; ++k) p[k] += idx[d] * L.strides[k][d];
  }
  int64_t i = begin;
  for (;;) {
    int64_t len = std::min(inner - idx[r - 1], end - i);
    fn(p, len, i);
    i += len;
    if (i >= end) return;
    for (size_t k = 0; k < N; ++k) p[k] -= idx[r - 1] * L.strides[k][r - 1];
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) p[k] += L.strides[k][d];
      if (++idx[d] < L.shape[d]) break;
      for (size_t k = 0; k < N; ++k) p[k] -= L.shape[d] * L.strides[k][d];
      idx[d] = 0;
    }
  }
}

}  // namespace kiln::detail
