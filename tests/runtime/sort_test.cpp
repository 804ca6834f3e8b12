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
#include "sort_inputs.h"

using namespace kiln;
using namespace kiln::test;

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
        const Arr x = arr(dt, shape, sort_inputs(dt, numel(shape), rng));
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
