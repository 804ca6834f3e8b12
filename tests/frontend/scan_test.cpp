// Long scans (ir/scan_chunks.h): lines of 64K elements or more fold in chunks, in
// parallel, eagerly (the reference kernel) and traced (the split_scans pass), so
// both give the same bits, values and gradients (the gradient of a scan is the
// reverse scan: it splits too), and the rounding stays that of short folds.
// (logcumsumexp's combine, logaddexp, may differ in the last bit between the
// reference kernel's scalar math and LLVM's, as its elementwise op does.)
#include "test_util.h"

using namespace kiln;

TEST_CASE(
    "long scans: eager and traced give the same values and gradients, cumsum and cumprod the same "
    "bits") {
  manual_seed(11);
  for (const char* op : {"cumsum", "cumprod", "logcumsumexp"})
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{100003}, {3, 70000}, {2, 65536, 1}}) {
      CAPTURE(std::string(op));
      CAPTURE(shape.size());
      const int64_t dim = shape.size() == 3 ? 1 : -1;
      const std::string name = op;
      auto scan = [&](const Tensor& a) {
        return name == "cumsum"    ? a.cumsum(dim)
               : name == "cumprod" ? a.cumprod(dim)
                                   : a.logcumsumexp(dim);
      };
      Tensor x0 = name == "cumprod" ? 1 + randn(shape) * 1e-4 : randn(shape);
      Tensor w = randn(shape);
      auto step = [&](Tensor x) {
        Tensor y = scan(x);
        (y * w).sum().backward();
        return y;
      };
      Tensor xe = x0.clone().requires_grad_();
      Tensor ye = step(xe);
      Tensor xt = x0.clone().requires_grad_();
      auto traced = jit(step, "long_scan");
      traced(xt);
      xt.grad().zero_();
      Tensor yt = traced(xt);
      CHECK(traced.stats().hits >= 1);
      if (name == "logcumsumexp") {
        // logaddexp's scalar math in the reference kernel and LLVM's may differ
        // in the last bit (as for the elementwise op), short lines or long.
        test::check_close(ye, yt, 1e-6, 1e-6);
        test::check_close(xe.grad(), xt.grad(), 1e-4, 1e-4);  // cancellation in the gradient
      } else {
        CHECK(test::same_bits(ye, yt));
        CHECK(test::same_bits(xe.grad(), xt.grad()));
      }
      // Against a fold in double: the chunked rounding stays small.
      if (name == "cumsum") {
        Tensor exact = x0.to(kFloat64).cumsum(dim).to(kFloat32);
        test::check_close(ye, exact, 1e-3, 1e-3);
      }
    }
}
