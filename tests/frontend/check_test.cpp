// KILN_CHECK's comparison of a compiled plan with eager mode: differences that
// rounding alone can make (amplified by cancellation or by Adam's division) are
// no mismatch; a value the plan computes differently still is.
#include "test_util.h"

using namespace kiln;

namespace {

// An Adam step on gradients at rounding level: every column of x sums to ~0,
// so d(sum(x * w))/dw is what the summation order leaves, and Adam's
// m / (sqrt(v) + eps) turns it into an update of up to lr in either direction.
// `host_shift` adds a number read on the host per call (a real mismatch).
void adam_on_rounding_noise(bool host_shift) {
  manual_seed(21);
  Tensor x = randn({256, 16});
  x = x - x.mean(0, true);
  Tensor w = randn({16}).requires_grad_();
  optim::Adam opt({w}, 1e-2);
  int calls = 0;
  auto step = jit([&](Tensor in) {
    opt.zero_grad();
    (in * w).sum().backward();
    opt.step();
    ++calls;
    if (host_shift) {
      NoGradGuard no_grad;
      w.sub_(full({16}, 0.1 * calls));  // the trace keeps the first call's number
    }
    return in.abs().sum();
  });
  set_check_enabled(true);
  try {
    for (int i = 0; i < 3; ++i) step(x);  // two signatures checked: before and after .grad exists
  } catch (...) {
    set_check_enabled(false);
    throw;
  }
  set_check_enabled(false);
}

}  // namespace

TEST_CASE("KILN_CHECK: Adam steps on gradients at rounding level are no mismatch") {
  adam_on_rounding_noise(false);
}

TEST_CASE("KILN_CHECK: a real difference in the same amplifying step is still reported") {
  KILN_CHECK_ERROR(adam_on_rounding_noise(true), "KILN_CHECK: after a call of", "captured tensor",
                   "rounding-level changes of the inputs move it by up to", "check_test.cpp");
}

TEST_CASE("KILN_CHECK: a sum that cancels to rounding noise is no kernel mismatch") {
  manual_seed(22);
  Tensor x = randn({64, 64});
  x = x - x.mean();  // the total is rounding noise of terms near 1
  auto f = jit([](Tensor t) { return (t * 3).sum(); });
  set_check_enabled(true);
  Tensor s = f(x);
  set_check_enabled(false);
  CHECK(std::abs(s.item<float>()) < 1e-2);
}
