// Helpers shared by the frontend tests.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include <kiln/kiln.h>

namespace kiln::test {

/// The message of the kiln::Error that f throws ("" if it throws none).
/// Sets a field of settings() (or any variable) for the scope and puts the old
/// value back: `ScopedValue algo(settings().conv, ConvAlgo::Im2col);`.
template <class T>
class ScopedValue {
 public:
  ScopedValue(T& field, T value) : field_(field), saved_(field) { field_ = std::move(value); }
  ~ScopedValue() { field_ = std::move(saved_); }
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  T& field_;
  T saved_;
};

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Checks that f throws a kiln::Error whose message contains every piece.
#define KILN_CHECK_ERROR(expr, ...)                                          \
  do {                                                                       \
    std::string _msg = ::kiln::test::error_of([&] { (void)(expr); });        \
    CHECK_MESSAGE(!_msg.empty(), "expected a kiln::Error from " #expr);      \
    for (const char* _piece : {__VA_ARGS__})                                 \
      CHECK_MESSAGE(_msg.find(_piece) != std::string::npos, "message: ", _msg, \
                    "\n  lacks: ", _piece);                                  \
  } while (0)

/// "file.cpp:LINE" for a line of this test file.
inline std::string at_line(int line) { return "frontend/" + std::to_string(line); }

/// Central finite differences of a scalar function of one f64 tensor.
inline Tensor numeric_grad(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0,
                           double eps = 1e-6) {
  NoGradGuard no_grad;
  std::vector<double> base = x0.to_vector<double>();
  std::vector<double> g(base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    auto plus = base, minus = base;
    plus[i] += eps;
    minus[i] -= eps;
    double fp = f(from_vector(plus, x0.sizes(), kFloat64)).item<double>();
    double fm = f(from_vector(minus, x0.sizes(), kFloat64)).item<double>();
    g[i] = (fp - fm) / (2 * eps);
  }
  return from_vector(g, x0.sizes(), kFloat64);
}

/// Autograd's gradient of f at x0 (f64).
inline Tensor autograd_grad(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0) {
  Tensor x = x0.detach().clone().requires_grad_();
  f(x).backward();
  return x.grad();
}

/// t's values (as f32, flattened) against reference values `want`, each within
/// tol * (1 + |want|); a NaN or an infinity wanted must be there exactly.
inline void check_near(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = t.detach().to(kFloat32).flatten().to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::isnan(want[i])   ? std::isnan(got[i])
                    : std::isinf(want[i]) ? got[i] == want[i]
                                          : std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]));
    CHECK_MESSAGE(ok, "element ", i, ": ", got[i], " vs ", want[i]);
  }
}

/// Same sizes, dtype and bytes (a NaN equals itself; +0 and -0 differ).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.dtype() == y.dtype() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel() * x.element_size())) == 0;
}

/// t against a reference summary that a script printed: its first values (up
/// to 6), its sum and its sum weighted by cos(0.7 i), each within tol * (1 +
/// |want|) (tests/frontend/data/make_nn_more_reference.py's show()).
inline void check_summary(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> v = t.detach().to(kFloat64).flatten().to_vector<double>();
  std::vector<double> got(v.begin(), v.begin() + std::min<size_t>(v.size(), 6));
  double sum = 0, weighted = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    sum += v[i];
    weighted += v[i] * std::cos(0.7 * static_cast<double>(i));
  }
  got.push_back(sum);
  got.push_back(weighted);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])), "entry ", i, ": ",
                  got[i], " vs ", want[i]);
}

inline void check_close(const Tensor& a, const Tensor& b, double rtol = 1e-6, double atol = 1e-7) {
  REQUIRE(a.sizes() == b.sizes());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    CHECK_MESSAGE(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]), "element ", i, ": ", x[i],
                  " vs ", y[i]);
}

}  // namespace kiln::test
