// Sums over the leading dims (a bias's gradient: dY [rows, cols] -> [cols]):
// traced against eager (the reference kernel, which folds f32 in double), at
// shapes that split into chunks of rows (passes/split_column_sums.h), with a
// padded last chunk, and at shapes that do not (one row, one column, few
// columns, rows wider than a chunk); in f32 and f64, alone and fused behind an
// elementwise prologue (relu's backward: a `where` of dY on its mask), and
// through a Linear layer's backward behind a ReLU. A traced sum has the same bits at every thread count.
#include "test_util.h"

#include "passes/split_column_sums.h"
#include "runtime/thread_pool.h"

using namespace kiln;

namespace {

struct Case {
  std::vector<int64_t> shape;
  std::vector<int64_t> dims;
  bool splits;
};

const std::vector<Case> kCases = {
    {{256, 1024}, {0}, true},      // the MLP's bias gradient: 8 chunks of 32 rows
    {{4099, 33}, {0}, true},       // odd sizes: 5 chunks of 820 rows, the last padded by one
    {{7711, 17}, {0}, true},       // 5 chunks of 1543 rows, the last padded by four
    {{2049, 33}, {0}, false},      // too few elements for four chunks
    {{70, 9, 600}, {0, 1}, true},  // two leading dims: 12 chunks of 53 rows, padded by 6
    {{300, 10001}, {0}, false},    // rows wider than 4096 columns
    {{1, 1024}, {0}, false},       // one row
    {{4096, 1}, {0}, false},       // one column
    {{999, 7}, {0}, false},        // few columns
    {{37, 129}, {0}, false},       // too few rows
};

void check_case(const Case& c, DType dt, bool prologue) {
  CAPTURE(c.shape.size());
  CAPTURE(c.shape[0]);
  CAPTURE(c.shape.back());
  CAPTURE(prologue);
  CHECK((column_sum_rows_per_chunk(c.shape, c.dims) > 0) == c.splits);
  const Tensor dy = randn(c.shape, TensorOptions(dt)), h = randn(c.shape, TensorOptions(dt));
  auto f = [&](Tensor g, Tensor pre) {
    return (prologue ? where(pre > 0, g, zeros_like(g)) : g).sum(c.dims);
  };
  const Tensor eager = f(dy, h);
  auto traced = jit(f, "column_sum");
  const Tensor t1 = traced(dy, h);
  // f32 sums of n rows round within about n * 2^-24 of each |element| (~1 here).
  int64_t rows = 1;
  for (int64_t d : c.dims) rows *= c.shape[size_t(d)];
  const double tol = dt == kFloat64 ? 1e-12 : 1e-5,
               atol = dt == kFloat64 ? 1e-12 : 1e-7 * double(rows);
  test::check_close(t1, eager, tol, atol);
  // Against the fold in double: the chunks' rounding stays that of short sums.
  const Tensor exact = f(dy.to(kFloat64), h.to(kFloat64)).to(dt);
  test::check_close(t1, exact, tol, atol);
  // The same bits at one thread and at three (the chunks depend on the shape only).
  const int threads = num_threads();
  for (int n : {1, 3}) {
    set_num_threads(n);
    CHECK(test::same_bits(traced(dy, h), t1));
  }
  set_num_threads(threads);
}

}  // namespace

TEST_CASE("a sum over the leading dims: traced equals eager, split into chunks of rows or not") {
  manual_seed(5);
  for (const Case& c : kCases)
    for (DType dt : {kFloat32, kFloat64})
      for (bool prologue : {false, true}) check_case(c, dt, prologue);
}

TEST_CASE("a Linear layer's bias gradient over a large batch: traced equals eager") {
  manual_seed(6);
  for (DType dt : {kFloat32, kFloat64}) {
    nn::Linear lin(64, 1024);
    lin->to(dt);
    const Tensor x = randn({512, 64}, TensorOptions(dt)), w = randn({512, 1024}, TensorOptions(dt));
    auto step = [&](Tensor in) {
      lin->zero_grad();
      Tensor loss = (relu(lin(in)) * w).sum();
      loss.backward();
      return lin->bias.grad().clone();
    };
    const Tensor eager = step(x);
    auto traced = jit(step, "bias_grad");
    traced(x);
    const Tensor t = traced(x);
    const double tol = dt == kFloat64 ? 1e-12 : 1e-4;
    test::check_close(t, eager, tol, tol);
  }
}
