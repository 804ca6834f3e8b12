// What the conformance case tables share (cases.cpp, model_cases.cpp): the
// inputs' builders, the one- and two-operand case shorthands, and the case
// groups each file defines.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "conformance.h"

namespace kiln::conformance {

using V = const std::vector<Tensor>&;

inline Input in(Shape s, double lo = -1, double hi = 1) {
  return Input{std::move(s), lo, hi};
}
inline Input positive(Shape s) {
  return in(std::move(s), 0.2, 3);
}
inline Input laid_out(Shape s, Layout l) {
  Input i = in(std::move(s));
  i.layout = l;
  return i;
}
inline Input indices(Shape s, int64_t classes) {
  Input i = in(std::move(s), 0, static_cast<double>(classes));
  i.kind = Kind::Index;
  return i;
}
inline Input given(Shape s, std::vector<double> values) {
  Input i = in(std::move(s));
  i.values = std::move(values);
  return i;
}

inline Case unary(std::string name, std::function<Tensor(const Tensor&)> f, Input x = in({3, 4})) {
  return Case{std::move(name), {std::move(x)}, [f](V v) { return f(v[0]); }};
}

inline Case binary(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f, Input a,
                   Input b) {
  return Case{std::move(name), {std::move(a), std::move(b)}, [f](V v) { return f(v[0], v[1]); }};
}

inline Case no_fd(Case c) {
  c.finite_differences = false;
  return c;
}

inline Tensor layer_norm_rows(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor mu = x.mean({-1}, true);
  Tensor var = (x - mu).pow(2).mean({-1}, true);
  return (x - mu) / (var + 1e-5).sqrt() * w + b;
}

// The groups of model_cases.cpp: the ops real models need, convolution and
// pooling, products and sorting.
std::vector<Case> model_cases();
std::vector<Case> conv_cases();
std::vector<Case> sort_cases();

}  // namespace kiln::conformance
