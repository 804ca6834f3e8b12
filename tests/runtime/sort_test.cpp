// The sort library step (runtime/sort.h) against its oracle, the reference
// argsort kernel (a plain comparison sort): every dtype, both directions, each
// of its three algorithms (comparison sort of short lines, radix sort, the
// selection of a few from a long line), lines along inner dims, with ties,
// NaN, infinities, -0.0 and the integers' extremes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "runtime/sort.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<double> draw(DType dt, int64_t n, std::mt19937& rng) {
  const double inf = std::numeric_limits<double>::infinity();
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    const int p = pick(rng);
    if (dt == DType::b8) {
      x = p % 2;
    } else if (is_floating(dt)) {
      x = p < 3    ? std::nan("")
          : p < 5  ? inf
          : p < 7  ? -inf
          : p < 10 ? -0.0
          : p < 40 ? double(p % 5)
                   : (p - 50) * 1.37;
    } else {
      const double big = dt == DType::i32 ? 2147483647.0 : 9.0e18;
      x = p < 3 ? big : p < 6 ? -big - 1 : double(p % 7) - 3;
    }
  }
  return v;
}

}  // namespace

TEST_CASE(
    "the sort library step equals the reference argsort: dtypes, directions, algorithms, inner "
    "dims") {
  std::mt19937 rng(42);
  struct Size {
    int64_t outer, n, inner, count;
  };
  const Size sizes[] = {{3, 17, 1, 17},   {2, 300, 1, 300}, {1, 5000, 2, 5000}, {4, 2000, 1, 3},
                        {2, 1000, 3, 64}, {3, 1, 2, 1},     {2, 0, 2, 0},       {5, 40, 1, 2}};
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64, DType::b8})
    for (const Size& sz : sizes)
      for (bool descending : {false, true}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(sz.n);
        CAPTURE(sz.count);
        CAPTURE(descending);
        const Shape shape{sz.outer, sz.n, sz.inner};
        const Arr x = arr(dt, shape, draw(dt, numel(shape), rng));
        const Attrs attrs{{AttrKey::dim, int64_t{1}},
                          {AttrKey::descending, int64_t(descending)},
                          {AttrKey::count, sz.count}};
        Arr want = empty(DType::i64, {sz.outer, sz.count, sz.inner});
        const std::vector<View> in{x.v};
        reference_kernel(OpKind::argsort, attrs, in, want.v);
        Arr got = empty(DType::i64, want.v.shape);
        const SortLines lines = sort_lines_for(x.type(), attrs);
        CHECK(lines.outer == sz.outer);
        CHECK(lines.inner == sz.inner);
        sort_lines(lines, x.v.data, got.v.ptr<int64_t>());
        CHECK(values(got.v) == values(want.v));
      }
}
