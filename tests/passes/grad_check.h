// Gradient checking for the autodiff tests: a case builds one op on float64
// arguments; the checker differentiates sum(op(...) * w) for a fixed random
// weight w, runs the gradient graph in the interpreter and compares it with
// central finite differences of the forward graph. The second-order check
// differentiates the gradient graph again and compares Hessian-vector
// products with finite differences of the first gradient.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "runtime/interpreter.h"

namespace kiln::test {

inline HostArray array_of(const TensorType& t, std::span<const double> values) {
  REQUIRE(values.size() == static_cast<size_t>(t.numel()));
  HostArray a = HostArray::make(t);
  visit_dtype(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = a.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return a;
}

inline HostArray array_of(const TensorType& t, std::initializer_list<double> values) {
  return array_of(t, std::span<const double>(values.begin(), values.size()));
}

inline std::vector<double> values_of(const HostArray& a) {
  std::vector<double> out(static_cast<size_t>(a.type.numel()));
  visit_dtype(a.type.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* p = a.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

inline TensorType f64(Shape s) {
  return TensorType{DType::f64, std::move(s), {}};
}

inline std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> d(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) d[i] = i;
  return d;
}

inline Value sum_all(Builder& b, Value v) {
  const int64_t rank = b.type(v).rank();
  return rank == 0 ? v : b.sum(v, all_dims(rank), /*keepdim=*/false);
}

/// One input of a gradient case: float64 values drawn uniformly from [lo, hi]
/// (with a random sign when `random_sign`, to stay away from kinks at 0), or
/// given explicitly.
struct InputSpec {
  Shape shape;
  double lo = -1.0, hi = 1.0;
  bool random_sign = false;
  std::vector<double> values;
};

/// A graph fragment to differentiate: `build` gets one f64 arg per input and
/// returns the value whose gradient is checked.
struct GradCase {
  std::string name;
  OpKind op;
  std::vector<InputSpec> inputs;
  std::function<Value(Builder&, const std::vector<Value>&)> build;
  double eps = 1e-6;  // finite-difference step
  double tol = 1e-6;  // |ad - fd| <= tol * (1 + |fd|)
  bool second_order = true;
};

inline std::vector<double> draw(const InputSpec& in, std::mt19937_64& rng) {
  if (!in.values.empty()) return in.values;
  std::uniform_real_distribution<double> u(in.lo, in.hi);
  std::bernoulli_distribution coin(0.5);
  std::vector<double> v(static_cast<size_t>(numel(in.shape)));
  for (double& x : v) x = in.random_sign && coin(rng) ? -u(rng) : u(rng);
  return v;
}

inline std::vector<double> uniform(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

/// The forward graph of a case: args 0..k-1 are the inputs, arg k the weight,
/// and the one output is sum(y * weight).
struct LossGraph {
  Graph g;
  std::vector<Value> inputs;
  TensorType weight_type;
};

inline LossGraph loss_graph(const GradCase& c) {
  LossGraph lg;
  Builder b(lg.g);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    lg.inputs.push_back(b.arg(static_cast<int64_t>(i), f64(c.inputs[i].shape)));
  }
  const Value y = c.build(b, lg.inputs);
  lg.weight_type = b.type(y);
  const Value w = b.arg(static_cast<int64_t>(c.inputs.size()), lg.weight_type);
  lg.g.outputs = {sum_all(b, b.mul(y, w))};
  return lg;
}

inline double scalar_of(const HostArray& a) {
  return values_of(a).at(0);
}

inline bool close(double ad, double fd, double tol) {
  return std::abs(ad - fd) <= tol * (1.0 + std::abs(fd));
}

/// Checks the case's first derivatives against central differences, and (when
/// asked) Hessian-vector products against differences of the first gradient.
inline void check_gradients(const GradCase& c, uint64_t seed = 1) {
  INFO("case: ", c.name);
  std::mt19937_64 rng(seed);
  LossGraph lg = loss_graph(c);
  verify(lg.g);
  const size_t k = c.inputs.size();

  std::vector<HostArray> args;
  for (size_t i = 0; i < k; ++i) {
    args.push_back(array_of(f64(c.inputs[i].shape), draw(c.inputs[i], rng)));
  }
  args.push_back(
      array_of(lg.weight_type, uniform(static_cast<size_t>(lg.weight_type.numel()), rng)));
  const HostArray one = array_of(f64({}), {1.0});

  Graph first = autodiff(lg.g, lg.inputs);
  INFO("gradient graph:\n", first.str());
  verify(first);
  REQUIRE(first.outputs.size() == 1 + k);

  std::vector<HostArray> first_args = args;
  first_args.push_back(one);
  const std::vector<HostArray> out = interpret(first, first_args);
  for (size_t i = 0; i < k; ++i) {
    CHECK(first.type(first.outputs[1 + i]) == lg.g.type(lg.inputs[i]));
    const std::vector<double> ad = values_of(out[1 + i]);
    const std::vector<double> x = values_of(args[i]);
    for (size_t j = 0; j < x.size(); ++j) {
      std::vector<HostArray> shifted = args;
      std::vector<double> xs = x;
      xs[j] = x[j] + c.eps;
      shifted[i] = array_of(args[i].type, xs);
      const double up = scalar_of(interpret(lg.g, shifted)[0]);
      xs[j] = x[j] - c.eps;
      shifted[i] = array_of(args[i].type, xs);
      const double down = scalar_of(interpret(lg.g, shifted)[0]);
      const double fd = (up - down) / (2 * c.eps);
      INFO("d/d input ", i, " element ", j, ": autodiff ", ad[j], ", finite difference ", fd);
      CHECK(close(ad[j], fd, c.tol));
    }
  }
  if (!c.second_order) return;

  // Hessian-vector products: differentiate <grad, v> once more.
  Graph grads = first;
  grads.outputs.erase(grads.outputs.begin());
  Graph second = autodiff(grads, lg.inputs);
  INFO("second-order graph:\n", second.str());
  verify(second);
  REQUIRE(second.outputs.size() == 2 * k);
  std::vector<HostArray> second_args = first_args;
  std::vector<std::vector<double>> dirs;
  for (size_t i = 0; i < k; ++i) {
    dirs.push_back(uniform(static_cast<size_t>(numel(c.inputs[i].shape)), rng));
    second_args.push_back(array_of(args[i].type, dirs.back()));
  }
  const std::vector<HostArray> hv = interpret(second, second_args);

  const double h = 1e-5;
  const auto grads_at = [&](double sign) {
    std::vector<HostArray> shifted = first_args;
    for (size_t i = 0; i < k; ++i) {
      std::vector<double> x = values_of(args[i]);
      for (size_t j = 0; j < x.size(); ++j) x[j] += sign * h * dirs[i][j];
      shifted[i] = array_of(args[i].type, x);
    }
    return interpret(grads, shifted);
  };
  const std::vector<HostArray> up = grads_at(1.0), down = grads_at(-1.0);
  for (size_t i = 0; i < k; ++i) {
    CHECK(second.type(second.outputs[k + i]) == lg.g.type(lg.inputs[i]));
    const std::vector<double> ad = values_of(hv[k + i]);
    const std::vector<double> u = values_of(up[i]), d = values_of(down[i]);
    for (size_t j = 0; j < ad.size(); ++j) {
      const double fd = (u[j] - d[j]) / (2 * h);
      INFO("Hv for input ", i, " element ", j, ": autodiff ", ad[j], ", finite difference ", fd);
      CHECK(close(ad[j], fd, 1e-5));
    }
  }
}

}  // namespace kiln::test
