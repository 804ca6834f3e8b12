// Reference kernel for argsort (ir/ops.def): each line along `dim` sorted by a
// plain comparison, the oracle of the library step (runtime/sort.cpp, which
// sorts integer keys). PyTorch's order: ascending (descending), ties by
// position, NaN the largest value, NaNs among themselves by position.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"

namespace kiln::detail {
namespace {

template <class T>
bool comes_before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return descending ? na && !nb : !na && nb;
  }
  return descending ? b < a : a < b;
}

}  // namespace

void ref_argsort(const Attrs& attrs, const View& in, const View& out) {
  KILN_CHECK(out.dtype == DType::i64, "argsort: expected an int64 output, got ",
             dtype_name(out.dtype));
  const int64_t rank = in.rank();
  const int64_t d = normalize_dim(attrs.i(AttrKey::dim), std::max<int64_t>(rank, 1));
  const bool descending = attrs.i(AttrKey::descending) != 0;
  const int64_t n = rank == 0 ? 1 : in.shape[size_t(d)];
  const int64_t count = rank == 0 ? out.numel() : out.shape[size_t(d)];
  const int64_t xs = rank == 0 ? 0 : in.strides[size_t(d)],
                os = rank == 0 ? 0 : out.strides[size_t(d)];
  Shape lines = in.shape;
  if (rank > 0) lines[size_t(d)] = 1;
  visit_dtype(in.dtype, [&](auto t) {
    using T = decltype(t);
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t line = 0; line < numel(lines); ++line) {
      const auto [xo, oo] = offsets_at(line, lines, in.strides, out.strides);
      const T* x = in.ptr<T>() + xo;
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return comes_before(x[a * xs], x[b * xs], descending);
      });
      for (int64_t j = 0; j < count; ++j) out.ptr<int64_t>()[oo + j * os] = order[size_t(j)];
    }
  });
}

}  // namespace kiln::detail
