// copy_to: strided copies with optional dtype conversion. Dense same-dtype
// copies are a parallel memcpy; a transposed source (stride 1 along the
// second-to-last dim) is copied in cache-sized tiles (4-byte elements in 8x8
// blocks in registers); anything else goes
// through the strided loop.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using detail::convert;
using detail::StridedLoop;

template <class D, class S>
void copy_strided(const StridedLoop<2>& L) {
  const int64_t sd = L.inner_stride(0) / int64_t(sizeof(D));
  const int64_t ss = L.inner_stride(1) / int64_t(sizeof(S));
  parallel_for(L.numel, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    detail::for_each_segment(L, L.base, begin, end,
                             [&](const std::array<char*, 2>& p, int64_t n, int64_t) {
                               D* __restrict d = reinterpret_cast<D*>(p[0]);
                               const S* __restrict s = reinterpret_cast<const S*>(p[1]);
                               if (sd == 1 && ss == 1) {
                                 for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
                               } else if (sd == 1 && ss == 0) {
                                 std::fill(d, d + n, convert<D>(*s));
                               } else {
                                 for (int64_t i = 0; i < n; ++i) d[i * sd] = convert<D>(s[i * ss]);
                               }
                             });
  });
}

// A row-major 8x8 block of 4-byte elements from a column-major source: d(i, j)
// = s[i + j * scol] for i, j < 8, in registers (eight loads, the standard 24
// shuffles, eight stores: bits move, nothing is computed). Element by element
// the strided side took a cycle or more an element (a sixth of a small MLP's
// eager step went to transposing Linear weight gradients).
__attribute__((target("avx"))) void transpose_8x8(const uint32_t* s, int64_t scol, uint32_t* d,
                                                  int64_t drow) {
  __m256 r[8], t[8], u[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + j * scol));
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(reinterpret_cast<float*>(d + i * drow),
                     _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(d + (i + 4) * drow),
                     _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// Read at first use, after the CPU model is known (not in a static initializer).
bool has_avx() {
  static const bool avx = __builtin_cpu_supports("avx");
  return avx;
}

// The last two loop dims form a matrix that is row-major in dst and
// column-major in src; walk it in square tiles so both sides stay in cache.
template <class D, class S>
void copy_transposed(const StridedLoop<2>& L) {
  constexpr int64_t kTile = 32;
  const int r = static_cast<int>(L.shape.size());
  const int64_t rows = L.shape[r - 2], cols = L.shape[r - 1];
  const int64_t drow = L.strides[0][r - 2] / int64_t(sizeof(D));
  const int64_t dcol = L.strides[0][r - 1] / int64_t(sizeof(D));
  const int64_t srow = L.strides[1][r - 2] / int64_t(sizeof(S));
  const int64_t scol = L.strides[1][r - 1] / int64_t(sizeof(S));
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t per_outer = row_tiles * col_tiles;
  const int64_t outer = L.numel / (rows * cols);
  // The outer dims, as a loop of their own, locate each matrix.
  StridedLoop<2> O;
  O.shape.assign(L.shape.begin(), L.shape.end() - 2);
  for (int k = 0; k < 2; ++k) O.strides[k].assign(L.strides[k].begin(), L.strides[k].end() - 2);
  O.base = L.base;
  O.numel = outer;
  parallel_for(outer * per_outer, std::max<int64_t>(1, kElementwiseGrain / (kTile * kTile)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t t = begin; t < end; ++t) {
                   int64_t o = t / per_outer, tile = t % per_outer;
                   int64_t i0 = (tile / col_tiles) * kTile, j0 = (tile % col_tiles) * kTile;
                   int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
                   detail::for_each_segment(
                       O, O.base, o, o + 1, [&](const std::array<char*, 2>& p, int64_t, int64_t) {
                         D* d = reinterpret_cast<D*>(p[0]);
                         const S* s = reinterpret_cast<const S*>(p[1]);
                         // The tile's whole 8x8 blocks in registers (dcol == 1 and
                         // srow == 1: copy_typed's test), then its ragged edges.
                         int64_t i8 = i0, j8 = j0;
                         if constexpr (std::is_same_v<D, uint32_t> && std::is_same_v<S, D>) {
                           if (has_avx()) {
                             i8 = i0 + (i1 - i0) / 8 * 8;
                             j8 = j0 + (j1 - j0) / 8 * 8;
                             for (int64_t i = i0; i < i8; i += 8)
                               for (int64_t j = j0; j < j8; j += 8)
                                 transpose_8x8(s + i + j * scol, scol, d + i * drow + j, drow);
                           }
                         }
                         auto scalar = [&](int64_t ia, int64_t ib, int64_t ja, int64_t jb) {
                           for (int64_t i = ia; i < ib; ++i)
                             for (int64_t j = ja; j < jb; ++j)
                               d[i * drow + j * dcol] = convert<D>(s[i * srow + j * scol]);
                         };
                         scalar(i0, i8, j8, j1);
                         scalar(i8, i1, j0, j1);
                       });
                 }
               });
}

// Same-dtype copies only depend on the element size.
template <class D, class S>
void copy_typed(const StridedLoop<2>& L) {
  const int r = static_cast<int>(L.shape.size());
  bool transposed = r >= 2 && L.inner_stride(0) == int64_t(sizeof(D)) &&
                    L.strides[1][r - 2] == int64_t(sizeof(S)) &&
                    L.inner_stride(1) != int64_t(sizeof(S)) && L.shape[r - 1] >= 8 &&
                    L.shape[r - 2] >= 8;
  if (transposed) {
    copy_transposed<D, S>(L);
  } else {
    copy_strided<D, S>(L);
  }
}

template <class U>
void copy_bits(const StridedLoop<2>& L) {
  copy_typed<U, U>(L);
}

}  // namespace

void copy_to(const View& src, const View& dst) {
  KILN_CHECK(src.shape == dst.shape, "copy_to: source shape ", shape_str(src.shape),
             " does not match destination shape ", shape_str(dst.shape));
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int64_t ssize = int64_t(dtype_size(src.dtype)), dsize = int64_t(dtype_size(dst.dtype));
  if (src.dtype == dst.dtype && src.contiguous() && dst.contiguous()) {
    if (src.data == dst.data) return;
    const auto* s = static_cast<const char*>(src.data);
    auto* d = static_cast<char*>(dst.data);
    parallel_for(n * ssize, int64_t(1) << 18, [&](int64_t begin, int64_t end) {
      std::memcpy(d + begin, s + begin, size_t(end - begin));
    });
    return;
  }
  // A zero broadcast over a dense destination (zero_, zeros): a memset.
  const auto* v = static_cast<const unsigned char*>(src.data);
  if (src.dtype == dst.dtype && dst.contiguous() &&
      std::all_of(src.strides.begin(), src.strides.end(), [](int64_t st) { return st == 0; }) &&
      std::all_of(v, v + ssize, [](unsigned char b) { return b == 0; })) {
    auto* d = static_cast<char*>(dst.data);
    parallel_for(n * ssize, int64_t(1) << 18, [&](int64_t begin, int64_t end) {
      std::memset(d + begin, 0, size_t(end - begin));
    });
    return;
  }
  auto L = detail::make_loop<2>(dst.shape, {dst.data, src.data}, {&dst.strides, &src.strides},
                                {dsize, ssize});
  if (src.dtype == dst.dtype) {
    switch (ssize) {
      case 1:
        return copy_bits<uint8_t>(L);
      case 4:
        return copy_bits<uint32_t>(L);
      case 8:
        return copy_bits<uint64_t>(L);
      default:
        break;
    }
  }
  visit_dtype(dst.dtype, [&](auto d) {
    visit_dtype(src.dtype, [&](auto s) { copy_typed<decltype(d), decltype(s)>(L); });
  });
}

void check_indices(const View& indices, int64_t high, std::string_view op) {
  std::vector<int64_t> values(static_cast<size_t>(indices.numel()));
  copy_to(indices, dense_view(values.data(), DType::i64, indices.shape));
  for (int64_t v : values)
    KILN_CHECK(v >= 0 && v < high, op, ": index ", v, " is out of range for size ", high,
               " (expected 0 <= index < ", high, ")");
}

void check_nonzero(const View& divisor, std::string_view op) {
  std::vector<int64_t> values(static_cast<size_t>(divisor.numel()));
  copy_to(divisor, dense_view(values.data(), DType::i64, divisor.shape));
  for (int64_t v : values)
    KILN_CHECK(v != 0, op,
               ": integer division by zero (expected an integer divisor with no zero element)");
}

void check_distribution(const View& weights, int64_t count, std::string_view op) {
  const int64_t n = weights.shape.back(), rows = n == 0 ? 0 : weights.numel() / n;
  KILN_CHECK(n > 0, op, ": expected at least one category, got weights ", shape_str(weights.shape));
  std::vector<double> w(static_cast<size_t>(weights.numel()));
  copy_to(weights, dense_view(w.data(), DType::f64, weights.shape));
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    int64_t nonzero = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = w[size_t(r * n + j)];
      KILN_CHECK(std::isfinite(v) && v >= 0, op, ": expected finite weights >= 0, got ", v,
                 " in row ", r, " at ", j);
      sum += v;
      nonzero += v != 0;
    }
    KILN_CHECK(sum > 0, op, ": expected weights with a positive sum, row ", r, " sums to 0");
    KILN_CHECK(nonzero >= count, op, ": cannot draw ", count,
               " samples without replacement from a row with ", nonzero,
               " non-zero weights (row ", r, ")");
  }
}

void check_values(OpKind k, const Attrs& attrs, const View& in) {
  switch (k) {
    case OpKind::check_index:
      return check_indices(in, attrs.i(AttrKey::high), attrs.str(AttrKey::name));
    case OpKind::check_nonzero:
      return check_nonzero(in, attrs.str(AttrKey::name));
    case OpKind::check_distribution:
      return check_distribution(in, attrs.i(AttrKey::count), attrs.str(AttrKey::name));
    default:
      KILN_CHECK(false, "internal: ", op_name(k), " is not a check op");
  }
}

}  // namespace kiln
