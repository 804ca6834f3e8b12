// How the conformance matrix runs a case: inputs (dense or views of leaves),
// the loss every mode differentiates, each execution mode, finite differences
// and the comparison of two runs.
#include "conformance.h"

#include <cmath>

#include "frontend/settings.h"

namespace kiln::conformance {
namespace {

/// splitmix64: the same stream on every platform and standard library.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * 0x1.0p-53; }
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

/// The shape of the leaf an input is a view of.
Shape base_shape(const Input& in) {
  Shape s = in.shape;
  const size_t r = s.size();
  switch (in.layout) {
    case Layout::Dense:
      break;
    case Layout::Transposed:
      REQUIRE(r >= 2);
      std::swap(s[r - 1], s[r - 2]);
      break;
    case Layout::Strided:
      REQUIRE(r >= 1);
      s[r - 1] = 2 * s[r - 1];
      break;
    case Layout::Expanded:
      REQUIRE(r >= 1);
      s[0] = 1;
      break;
  }
  return s;
}

Tensor view_of(const Input& in, const Tensor& leaf) {
  switch (in.layout) {
    case Layout::Dense:
      return leaf;
    case Layout::Transposed:
      return leaf.transpose(-1, -2);
    case Layout::Strided:
      return leaf.slice(-1, 0, 2 * in.shape.back(), 2);
    case Layout::Expanded:
      return leaf.expand(in.shape);
  }
  return leaf;
}

/// The captured scalar every loss is multiplied by.
constexpr double kCapturedScale = 1.5;

Tensor captured_scalar(DType dt, Device device) {
  return full({}, kCapturedScale, TensorOptions(dt).device(device)).requires_grad_();
}

/// out -> (out * r).sum() * c, in the case's dtype.
Tensor loss_of(const Tensor& out, const Tensor& c) {
  const DType dt = c.dtype();
  return (out.to(dt) * loss_weight(out.sizes(), dt, c.device())).sum() * c;
}

std::vector<double> host(const Tensor& t) {
  return t.cpu().to(kFloat64).to_vector<double>();
}

/// Inputs at odd positions are captured tensors; the rest are arguments.
bool is_argument(size_t i) {
  return i % 2 == 0;
}

/// The function's inputs. Captured views are taken inside the function when
/// `views_inside` (a view made once and differentiated in several calls would
/// need retain_graph in eager mode).
std::vector<Tensor> assemble(const Case& c, const Tensor& a0, const Tensor& a1,
                             const Inputs& captured, bool views_inside = false) {
  std::vector<Tensor> v(c.inputs.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (is_argument(i))
      v[i] = i == 0 ? a0 : a1;
    else
      v[i] = views_inside && captured.leaves[i].defined() ? view_of(c.inputs[i], captured.leaves[i])
                                                          : captured.views[i];
  }
  return v;
}

/// One call's tensors: arguments from the call's seed, captured tensors fixed.
struct Call {
  Inputs in;
  Tensor a0, a1;
};

Call make_call(const Case& c, DType dt, Device device, uint64_t seed) {
  Call k{make_inputs(c, dt, device, seed), {}, {}};
  Tensor dummy = zeros({}, TensorOptions(dt).device(device));
  k.a0 = c.inputs.empty() ? dummy : k.in.views[0];
  k.a1 = c.inputs.size() > 2 ? k.in.views[2] : dummy;
  return k;
}

Result collect(const Tensor& out, const Tensor& loss, const std::vector<Tensor>& leaves,
               const Tensor& scale) {
  Result r;
  r.out = host(out);
  r.out_shape = out.sizes();
  r.loss = host(loss);
  for (const Tensor& leaf : leaves) {
    const bool defined = leaf.defined() && leaf.grad().defined();
    r.grad_defined.push_back(defined);
    r.grads.push_back(defined ? host(leaf.grad()) : std::vector<double>{});
  }
  r.c_grad_defined = scale.grad().defined();
  if (r.c_grad_defined) r.c_grad = host(scale.grad());
  return r;
}

/// The leaves whose gradients a run reports: arguments' from the last call, captured ones'.
std::vector<Tensor> reported_leaves(const Case& c, const Call& last, const Inputs& captured) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    leaves.push_back(is_argument(i) ? last.in.leaves[i] : captured.leaves[i]);
  return leaves;
}

std::vector<uint64_t> call_seeds(Mode m, uint64_t seed) {
  // The cached plan: the first call traces, the second retraces once captured
  // gradients exist, the third runs the cached plan of the second.
  if (m == Mode::CachedSecondCall) return {seed + 2000, seed + 1000, seed};
  return {seed};
}

}  // namespace

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Eager:
      return "eager";
    case Mode::TracedEagerBackward:
      return "traced forward, eager backward";
    case Mode::BackwardInside:
      return "backward inside the trace";
    case Mode::CachedSecondCall:
      return "cached plan, third call";
    case Mode::Unfused:
      return "backward inside, fusion off";
    case Mode::DynamicMarked:
      return "backward inside, dim 0 marked dynamic";
    case Mode::EagerKernels:
      return "eager, compiled kernels at every size";
  }
  return "?";
}

Inputs make_inputs(const Case& c, DType dt, Device device, uint64_t seed) {
  Rng rng{seed * 0x2545F4914F6CDD1Dull ^ name_hash(c.name)};
  Inputs r;
  for (const Input& in : c.inputs) {
    const Shape base = base_shape(in);
    std::vector<double> v(static_cast<size_t>(numel(base)));
    for (double& x : v) x = rng.uniform(in.lo, in.hi);
    if (in.kind == Kind::Index) {
      for (double& x : v) x = std::floor(x);
      r.leaves.emplace_back();
      r.views.push_back(from_vector(v, base, TensorOptions(kInt64)).to(device));
      continue;
    }
    if (!in.values.empty()) {
      REQUIRE(in.values.size() == v.size());
      v = in.values;
    }
    Tensor leaf = from_vector(v, base, TensorOptions(dt)).to(device);
    leaf.requires_grad_();
    r.leaves.push_back(leaf);
    r.views.push_back(view_of(in, leaf));
  }
  return r;
}

Tensor loss_weight(const Shape& shape, DType dt, Device device) {
  Rng rng{0x5eed ^ static_cast<uint64_t>(numel(shape))};
  std::vector<double> w(static_cast<size_t>(numel(shape)));
  for (double& x : w) x = rng.uniform(0.5, 1.5);
  return from_vector(w, shape, TensorOptions(dt)).to(device);
}

// Every call of a case (each mode, each finite difference) starts the random
// generator here, so random draws inside a case (dropout) are the same stream
// in every mode: what the contract promises after manual_seed.
constexpr uint64_t kDrawSeed = 2024;

Result run_case(const Case& c, Mode m, DType dt, Device device, uint64_t seed, Mode calls_like) {
  const Inputs captured = make_inputs(c, dt, device, seed);
  const Tensor scale = captured_scalar(dt, device);
  Tensor out, loss;
  Call last;

  if (m == Mode::EagerKernels) {
    Settings& s = settings();
    const Settings saved = s;
    s.eager_kernels = true;
    s.eager_kernel_min_elements = 1;
    try {
      Result r = run_case(c, Mode::Eager, dt, device, seed, calls_like);
      s = saved;
      return r;
    } catch (...) {
      s = saved;
      throw;
    }
  }

  if (m == Mode::Eager) {
    for (uint64_t s : call_seeds(calls_like, seed)) {
      last = make_call(c, dt, device, s);
      manual_seed(kDrawSeed);
      out = c.fn(assemble(c, last.a0, last.a1, captured, calls_like == Mode::CachedSecondCall));
      loss = loss_of(out, scale);
      loss.backward();
    }
    return collect(out, loss, reported_leaves(c, last, captured), scale);
  }

  if (m == Mode::TracedEagerBackward) {
    auto f = jit([&](Tensor a0, Tensor a1) { return c.fn(assemble(c, a0, a1, captured)); });
    last = make_call(c, dt, device, seed);
    manual_seed(kDrawSeed);
    out = f(last.a0, last.a1);
    loss = loss_of(out, scale);
    loss.backward();
    return collect(out, loss, reported_leaves(c, last, captured), scale);
  }

  auto f = jit([&](Tensor a0, Tensor a1) -> std::vector<Tensor> {
    Tensor o = c.fn(assemble(c, a0, a1, captured, m == Mode::CachedSecondCall));
    Tensor l = loss_of(o, scale);
    l.backward();
    return {o, l};
  });
  if (m == Mode::Unfused) f.set_fusion(false);
  if (m == Mode::DynamicMarked) {
    const Call first = make_call(c, dt, device, seed);
    if (first.a0.dim() > 0) f.mark_dynamic(0, 0);
    if (first.a1.dim() > 0) f.mark_dynamic(1, 0);
  }
  const std::vector<uint64_t> seeds = call_seeds(m, seed);
  for (uint64_t s : seeds) {
    last = make_call(c, dt, device, s);
    manual_seed(kDrawSeed);
    std::vector<Tensor> r = f(last.a0, last.a1);
    out = r[0];
    loss = r[1];
  }
  if (m == Mode::CachedSecondCall)
    CHECK_MESSAGE(f.stats().hits >= 1, "the third call ran no cached plan: ", f.stats().str());
  Result r = collect(out, loss, reported_leaves(c, last, captured), scale);
  r.kernels_templated = f.stats().kernels_templated;
  return r;
}

Graph traced_graph(const Case& c, DType dt, bool optimized, uint64_t seed) {
  const Inputs captured = make_inputs(c, dt, Device(), seed);
  const Tensor scale = captured_scalar(dt, Device());
  auto f = jit([&](Tensor a0, Tensor a1) -> std::vector<Tensor> {
    Tensor o = c.fn(assemble(c, a0, a1, captured));
    Tensor l = loss_of(o, scale);
    l.backward();
    return {o, l};
  });
  Call k = make_call(c, dt, Device(), seed);
  return f.graph(k.a0, k.a1, optimized);
}

std::vector<std::vector<double>> finite_difference_grads(const Case& c, uint64_t seed) {
  const double eps = 1e-6;
  const Inputs base = make_inputs(c, kFloat64, Device(), seed);
  auto loss_at = [&](size_t i, const std::vector<double>& values) {
    NoGradGuard no_grad;
    std::vector<Tensor> views = base.views;
    Tensor leaf = from_vector(values, base.leaves[i].sizes(), TensorOptions(kFloat64));
    views[i] = view_of(c.inputs[i], leaf);
    Tensor scale = full({}, kCapturedScale, TensorOptions(kFloat64));
    manual_seed(kDrawSeed);
    return loss_of(c.fn(views), scale).item<double>();
  };
  std::vector<std::vector<double>> grads;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!base.leaves[i].defined()) {
      grads.emplace_back();
      continue;
    }
    std::vector<double> x = host(base.leaves[i]), g(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      std::vector<double> plus = x, minus = x;
      plus[k] += eps;
      minus[k] -= eps;
      g[k] = (loss_at(i, plus) - loss_at(i, minus)) / (2 * eps);
    }
    grads.push_back(std::move(g));
  }
  return grads;
}

namespace {

void check_values(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  double atol, const std::string& what) {
  REQUIRE_MESSAGE(got.size() == want.size(), what, ": ", got.size(), " elements, expected ",
                  want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    const bool same =
        (std::isnan(a) && std::isnan(b)) || a == b || std::abs(a - b) <= atol + rtol * std::abs(b);
    CHECK_MESSAGE(same, what, ", element ", i, ": ", a, " (expected ", b, ")");
    if (!same) return;  // one message per comparison
  }
}

}  // namespace

void check_same(const Result& got, const Result& want, double rtol, double atol,
                const std::string& what) {
  CHECK_MESSAGE(got.out_shape == want.out_shape, what, ": output shape ", shape_str(got.out_shape),
                ", expected ", shape_str(want.out_shape));
  check_values(got.out, want.out, rtol, atol, what + ": output");
  check_values(got.loss, want.loss, rtol, atol, what + ": loss");
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    const std::string name = what + ": gradient of input " + std::to_string(i);
    CHECK_MESSAGE(got.grad_defined[i] == want.grad_defined[i], name,
                  std::string(got.grad_defined[i] ? " is defined" : " is undefined"), ", expected ",
                  std::string(want.grad_defined[i] ? "defined" : "undefined"));
    if (got.grad_defined[i] && want.grad_defined[i])
      check_values(got.grads[i], want.grads[i], rtol, atol, name);
  }
  CHECK_MESSAGE(got.c_grad_defined == want.c_grad_defined, what,
                ": the captured scalar's gradient definedness differs");
  if (got.c_grad_defined && want.c_grad_defined)
    check_values(got.c_grad, want.c_grad, rtol, atol, what + ": gradient of the captured scalar");
}

}  // namespace kiln::conformance
