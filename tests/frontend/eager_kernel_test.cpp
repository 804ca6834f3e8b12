// Eager CPU ops that run compiled kernels (codegen/eager_kernel.h) against the
// reference kernels, which stay the oracle: every expensive elementwise op, both
// floating dtypes, lengths around the vector widths, a dense slice that starts
// off alignment, special values, and the fallbacks (strided or broadcast
// operands, small tensors, the switch off).
#include <doctest/doctest.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "codegen/eager_kernel.h"
#include "frontend/device_ops.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/settings.h"
#include "test_util.h"

namespace kiln {
namespace {

// Runs f with compiled eager kernels for every size (or with none), restoring the settings.
Tensor with_kernels(bool on, const std::function<Tensor()>& f) {
  Settings& s = settings();
  const Settings saved = s;
  s.eager_kernels = on;
  s.eager_kernel_min_elements = 1;
  Tensor r;
  try {
    r = f();
  } catch (...) {
    s = saved;
    throw;
  }
  s = saved;
  return r;
}

// |got - want| <= atol + rtol |want|, NaN where the reference has NaN, equal
// infinities, and a zero where both are zero with the reference's sign.
void check_same(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.sizes() == want.sizes());
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = std::isnan(w[i])              ? std::isnan(g[i])
                    : std::isinf(w[i])            ? g[i] == w[i]
                    : w[i] == 0 && g[i] == 0      ? std::signbit(g[i]) == std::signbit(w[i])
                                                  : std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    CHECK_MESSAGE(ok, "element ", i, ": ", g[i], " vs ", w[i]);
  }
}

using Unary = Tensor (*)(const Tensor&);
const std::pair<const char*, Unary> kUnary[] = {
    {"exp", [](const Tensor& x) { return x.exp(); }},
    {"log", [](const Tensor& x) { return x.abs().log(); }},
    {"sqrt", [](const Tensor& x) { return x.abs().sqrt(); }},
    {"rsqrt", [](const Tensor& x) { return x.abs().rsqrt(); }},
    {"sin", [](const Tensor& x) { return x.sin(); }},
    {"cos", [](const Tensor& x) { return x.cos(); }},
    {"tanh", [](const Tensor& x) { return x.tanh(); }},
    {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }},
    {"gelu", [](const Tensor& x) { return x.gelu(); }},
};

TEST_CASE("eager expensive ops on compiled kernels match the reference kernels") {
  for (DType dt : {kFloat32, kFloat64}) {
    const double rtol = dt == kFloat32 ? 2e-6 : 1e-13, atol = dt == kFloat32 ? 1e-6 : 1e-14;
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{33}, int64_t{4099}}) {
      manual_seed(uint64_t(n));
      const Tensor x = (randn({n}) * 4).to(dt), y = (randn({n}) * 2).to(dt);
      for (const auto& [name, op] : kUnary) {
        CAPTURE(name);
        CAPTURE(n);
        CAPTURE(dtype_name(dt));
        const Tensor got = with_kernels(true, [&, op = op] { return op(x); });
        const Tensor want = with_kernels(false, [&, op = op] { return op(x); });
        check_same(got, want, rtol, atol);
      }
      CAPTURE(n);
      check_same(with_kernels(true, [&] { return x / y; }),
                        with_kernels(false, [&] { return x / y; }), rtol, atol);
      check_same(with_kernels(true, [&] { return x.abs().pow(y); }),
                        with_kernels(false, [&] { return x.abs().pow(y); }), rtol * 10, atol);
    }
  }
}

// Every costly math op of the op table (the ones eager mode runs on compiled
// kernels), through the generic op entry on inputs from its domain, so a new
// row is checked without a line here.
TEST_CASE("every math op of the table on eager compiled kernels matches the reference") {
  int checked = 0;
  for (OpKind k : all_ops()) {
    if (!is_math(k)) continue;
    ++checked;
    const Domain& d = op_info(k).domain;
    for (DType dt : {kFloat32, kFloat64}) {
      // The cheap math ops (floor, ceil, round, trunc) are exact: the same bits.
      const bool exact = !is_expensive(k);
      const double rtol = exact ? 0 : dt == kFloat32 ? 2e-6 : 1e-13,
                   atol = exact ? 0 : dt == kFloat32 ? 1e-6 : 1e-14;
      for (int64_t n : {int64_t{7}, int64_t{4099}}) {
        CAPTURE(op_name(k));
        CAPTURE(dtype_name(dt));
        CAPTURE(n);
        manual_seed(uint64_t(n));
        std::vector<Tensor> args;
        for (size_t i = 0; i < size_t(op_info(k).arity); ++i)
          args.push_back((rand({n}) * (d.high(i) - d.low(i)) + d.low(i)).to(dt));
        auto run = [&] { return detail::apply(k, args, {}, SourceLoc{}); };
        check_same(with_kernels(true, run), with_kernels(false, run), rtol, atol);
      }
      // Halves (round: to even), signed zeros, tiny and huge values, NaN,
      // infinities; a binary op gets them in both operands, shifted.
      const double inf = std::numeric_limits<double>::infinity();
      const Tensor specials = tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0,
                                      0.49999999999999994, 1e-30, -1e-30, 1e20, -1e20,
                                      std::nan(""), inf, -inf, 4503599627370497.0},
                                     kFloat64)
                                  .repeat({5})
                                  .to(dt);
      std::vector<Tensor> args = {specials};
      if (op_info(k).arity == 2) args.push_back(specials.roll({3}, {0}));
      auto run = [&] { return detail::apply(k, args, {}, SourceLoc{}); };
      CAPTURE(std::string(op_name(k)));
      CAPTURE(std::string(dtype_name(dt)));
      check_same(with_kernels(true, run), with_kernels(false, run), rtol, atol);
    }
  }
  CHECK(checked >= 14);
}

TEST_CASE("an eager kernel reads a dense slice that starts off alignment, and special values") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = {0.5, -0.0, 0.0, inf, -inf, nan, 88.0, -103.0, 1e-30, -20.0, 9.0};
  for (int i = 0; i < 40; ++i) v.push_back(i * 0.37 - 7.0);
  const Tensor base = from_vector(v, {int64_t(v.size())}, kFloat32);
  const Tensor x = base.slice(0, 3, std::nullopt);  // 12 bytes past the block start
  for (const auto& [name, op] : kUnary) {
    CAPTURE(name);
    const Tensor got = with_kernels(true, [&, op = op] { return op(x); });
    const Tensor want = with_kernels(false, [&, op = op] { return op(x); });
    check_same(got, want, 2e-6, 1e-6);
  }
}

TEST_CASE("eager div and pow on compiled kernels keep the special cases") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Pairs (x, y): x/0, 0/0, -0 and infinities, a negative base with a fractional
  // exponent, pow(1, nan), pow(nan, 0), pow(-0, -1), pow(-inf, 3), pow(0, 0).
  const std::vector<double> xs = {1, 0, -0.0, inf, -2, 1, nan, -0.0, -inf, 0, -8, 2.5, 1e-3};
  const std::vector<double> ys = {0, 0, -1, inf, 0.5, nan, 0, -1, 3, 0, 3, -2.5, 40};
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dt));
    const Tensor x = from_vector(xs, {int64_t(xs.size())}, dt);
    const Tensor y = from_vector(ys, {int64_t(ys.size())}, dt);
    const double rtol = dt == kFloat32 ? 2e-6 : 1e-13;
    check_same(with_kernels(true, [&] { return x / y; }), with_kernels(false, [&] { return x / y; }),
               rtol, 0);
    check_same(with_kernels(true, [&] { return x.pow(y); }),
               with_kernels(false, [&] { return x.pow(y); }), rtol * 10, 0);
  }
}

TEST_CASE("eager kernels are compiled once per op and dtypes, whatever the size") {
  const Tensor a = randn({1000}), b = randn({77, 3}), c = randn({5});
  with_kernels(true, [&] { return a.tanh(); });
  const int64_t after_first = eager_cpu_kernels_compiled();
  with_kernels(true, [&] { return b.tanh(); });
  with_kernels(true, [&] { return c.tanh(); });
  CHECK(eager_cpu_kernels_compiled() == after_first);
  // An integer operand is converted in the kernel, as exp() of an integer tensor is a float.
  const Tensor i = arange(0, 20).to(kInt32);
  check_same(with_kernels(true, [&] { return i.exp(); }),
                    with_kernels(false, [&] { return i.exp(); }), 2e-6, 1e-6);
  CHECK(eager_cpu_kernels_compiled() == after_first + 1);
}

TEST_CASE("strided and broadcast operands, small tensors and the switch keep the reference kernels") {
  const Tensor m = randn({64, 33});
  const int64_t before = eager_cpu_kernels_compiled();
  const Tensor t = m.transpose(0, 1);
  check_same(with_kernels(true, [&] { return t.sigmoid(); }),
                    with_kernels(false, [&] { return t.sigmoid(); }), 0, 0);
  const Tensor row = randn({33});
  check_same(with_kernels(true, [&] { return m / row; }),
                    with_kernels(false, [&] { return m / row; }), 0, 0);
  CHECK(eager_cpu_kernels_compiled() == before);
  // Below the size threshold (the default) the reference kernel runs.
  CHECK(settings().eager_kernel_min_elements > 64 * 33);
  const Tensor small = m.cos();
  CHECK(eager_cpu_kernels_compiled() == before);
  (void)small;
}

// sin and cos fused with other work, over arguments past their fast path's
// range (libm's, lane by lane) mixed with ordinary ones and signed zeros.
KILN_TRACE(Tensor, trig_mix, Tensor x) { return x.sin() * 2 + x.cos(); }

TEST_CASE("traced sin and cos of huge arguments and signed zeros match the reference") {
  for (DType dt : {kFloat32, kFloat64}) {
    // sin(1e20) was -inf and sin(-0) was +0 in compiled kernels.
    std::vector<double> v = {-0.0, 0.0, 1e20, -1e20, 3e38, 12345.678, 9999.5, 10000.5, 0.5};
    for (int i = 0; i < 100; ++i) v.push_back(std::ldexp(1.0 + i / 100.0, i % 40) * (i % 2 ? -1 : 1));
    const Tensor x = tensor(v, kFloat64).to(dt);
    const double rtol = dt == kFloat32 ? 3e-6 : 1e-13, atol = dt == kFloat32 ? 1e-6 : 1e-14;
    CAPTURE(std::string(dtype_name(dt)));
    check_same(trig_mix(x), with_kernels(false, [&] { return x.sin() * 2 + x.cos(); }), rtol, atol);
    check_same(with_kernels(true, [&] { return x.sin(); }),
               with_kernels(false, [&] { return x.sin(); }), rtol, atol);
  }
}

TEST_CASE("runs_compiled_kernel says which kernel an eager op runs") {
  const int64_t n = settings().eager_kernel_min_elements;
  const Tensor big = randn({n / 64, 64}), small = randn({8}), t = big.transpose(0, 1);
  auto compiled = [](OpKind k, const Tensor& x) {
    return runs_compiled_kernel(k, {}, {x}, x.impl()->type);
  };
  CHECK(compiled(OpKind::sigmoid, big));
  CHECK(compiled(OpKind::floor, big));
  CHECK_FALSE(compiled(OpKind::sigmoid, small));
  CHECK_FALSE(compiled(OpKind::sigmoid, t));
  Settings& s = settings();
  const Settings saved = s;
  s.eager_kernels = false;
  const bool off = compiled(OpKind::sigmoid, big);
  s = saved;
  CHECK_FALSE(off);
}

// One argument's sin and cos has the same bits wherever it sits: in a vector
// of the loop (its variant, kiln.sin.f32.v8), in the loop's remainder, and in
// a tensor too short to vectorise (the scalar function, which the optimiser
// compiles on its own); past 1e4 both are libm's. sin(inf) is NaN without
// reaching libm, which would set errno.
TEST_CASE("compiled sin and cos give the same bits in vectors and alone, and leave errno") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> vals = {-0.0,       0.0,       1e-30,       0.5,        -2.75,
                              8.71622753, 19.746109, -13.3009195, 9999.99902, 10000.001,
                              -3e38,      1e20,      inf,         -inf,       std::nan("")};
  for (int i = 0; i < 64; ++i)
    vals.push_back(std::ldexp(1.0 + i / 64.0, i % 15) * (i % 2 ? -1 : 1));
  for (DType dt : {kFloat32, kFloat64})
    for (bool cos : {false, true})
      for (double v : vals) {
        auto run = [&](int64_t n) {
          const Tensor x = full({n}, v, TensorOptions().dtype(dt));
          return with_kernels(true, [&] { return cos ? x.cos() : x.sin(); }).to_vector<double>();
        };
        const std::vector<double> one = run(1), many = run(43);
        CAPTURE(std::string(dtype_name(dt)));
        CAPTURE(cos);
        CAPTURE(v);
        for (double y : many) {
          uint64_t a, b;
          std::memcpy(&a, &y, 8);
          std::memcpy(&b, &one[0], 8);
          CHECK((std::isnan(y) ? std::isnan(one[0]) : a == b));
        }
      }
  errno = 0;
  const Tensor x = tensor({1.0, inf, -inf, 2.0}, kFloat32);
  const Tensor y = with_kernels(true, [&] { return x.sin() + x.cos(); });
  CHECK(std::isnan(y.to_vector<double>()[1]));
  CHECK(errno == 0);
}

}  // namespace
}  // namespace kiln
