// Vector-Jacobian products, one `vjp_<name>` per ops.def row whose vjp column is
// not `none`, wired into vjp_rule() by the same X-macro.
//
// Every rule follows one contract, so the autodiff pass never post-processes:
//   - it emits ordinary forward ops through the Builder (so gradients are
//     fused, compiled and differentiated again like any other code);
//   - each returned gradient has exactly its operand's type: summed back down
//     over broadcast dims (sum_to) and cast to the operand's dtype;
//   - operands whose gradient is not wanted (needs[i] false), integer and
//     bool operands, and where's condition get an invalid Value, and nothing
//     is built for them;
//   - nodes are built with b.loc, which the caller sets to the forward node's
//     location, so every gradient node points at the user line it came from.
#include "ir/vjp.h"

#include <limits>
#include <numbers>

namespace kiln {
namespace {

using Grads = std::vector<Value>;
using Needs = std::vector<bool>;

bool floating(Builder& b, Value v) {
  return is_floating(b.type(v).dtype);
}

Value scalar(Builder& b, Value like, double c) {
  return b.scalar_like(like, c);
}

Value compare(Builder& b, OpKind k, Value x, Value y) {
  return b.op(k, {x, y});
}

/// Operand i's gradient, or none when it is not wanted or not a float.
/// `make(operand)` builds it, possibly in the broadcast result's shape and
/// dtype; it is then summed down to the operand's shape and cast to its dtype.
template <class F>
Value grad_for(Builder& b, const Node& n, const Needs& needs, size_t i, F&& make) {
  const Value x = n.operands[i];
  if (!needs[i] || !floating(b, x)) return {};
  const TensorType t = b.type(x);
  return b.cast(b.sum_to(make(x), t.shape), t.dtype);
}

/// A unary rule: `dx` maps x to its gradient.
template <class F>
Grads unary(Builder& b, const Node& n, const Needs& needs, F&& dx) {
  return {grad_for(b, n, needs, 0, dx)};
}

/// The input shape with each reduced dim kept as size 1.
Shape keepdim_shape(const Shape& in, const std::vector<int64_t>& dims) {
  Shape s = in;
  for (int64_t d : dims) s[d] = 1;
  return s;
}

std::vector<int64_t> reduced_dims(const Node& n, int64_t rank) {
  return normalize_dims(n.attrs.ints(AttrKey::dims), rank);
}

// ---- Elementwise unary ----

Grads vjp_neg(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return b.neg(g); });
}

Grads vjp_abs(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.mul(g, b.unary(OpKind::sign, x)); });
}

Grads vjp_exp(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return b.mul(g, out); });
}

Grads vjp_log(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.div(g, x); });
}

// d log_b(x) = 1 / (x ln b).
Grads vjp_log2(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.div(g, b.mul(x, scalar(b, g, std::numbers::ln2))); });
}

Grads vjp_log10(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.div(g, b.mul(x, scalar(b, g, std::numbers::ln10))); });
}

Grads vjp_sqrt(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return b.div(b.mul(g, scalar(b, g, 0.5)), out); });
}

// d rsqrt(x) = -0.5 * x^(-3/2) = -0.5 * out / x.
Grads vjp_rsqrt(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs,
               [&](Value x) { return b.div(b.mul(b.mul(g, scalar(b, g, -0.5)), out), x); });
}

Grads vjp_sin(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.mul(g, b.unary(OpKind::cos, x)); });
}

Grads vjp_cos(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.neg(b.mul(g, b.unary(OpKind::sin, x))); });
}

Grads vjp_tanh(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs,
               [&](Value) { return b.mul(g, b.sub(scalar(b, out, 1.0), b.mul(out, out))); });
}

Grads vjp_sigmoid(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs,
               [&](Value) { return b.mul(b.mul(g, out), b.sub(scalar(b, out, 1.0), out)); });
}

Grads vjp_relu(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    return b.where(compare(b, OpKind::gt, x, scalar(b, x, 0.0)), g, scalar(b, g, 0.0));
  });
}

// gelu(x) = x Phi(x), so gelu'(x) = Phi(x) + x phi(x), with Phi(x) =
// (1 + erf(x / sqrt 2)) / 2 and phi the standard normal density.
Grads vjp_gelu(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
    const Value erf = b.unary(OpKind::erf, b.mul(x, scalar(b, x, 1 / std::numbers::sqrt2)));
    const Value cdf = b.mul(b.add(erf, scalar(b, x, 1.0)), scalar(b, x, 0.5));
    const Value pdf =
        b.mul(b.unary(OpKind::exp, b.mul(b.mul(x, x), scalar(b, x, -0.5))), scalar(b, x, kInvSqrt2Pi));
    return b.mul(g, b.add(cdf, b.mul(x, pdf)));
  });
}

// d erf(x) = 2/sqrt(pi) exp(-x^2).
Grads vjp_erf(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    constexpr double k2OverSqrtPi = 2 * std::numbers::inv_sqrtpi;
    const Value e = b.unary(OpKind::exp, b.neg(b.mul(x, x)));
    return b.mul(g, b.mul(e, scalar(b, x, k2OverSqrtPi)));
  });
}

// d log1p(x) = 1 / (1 + x).
Grads vjp_log1p(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.div(g, b.add(x, scalar(b, x, 1.0))); });
}

// d expm1(x) = exp(x) = expm1(x) + 1.
Grads vjp_expm1(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return b.mul(g, b.add(out, scalar(b, out, 1.0))); });
}

// floor, ceil, round, trunc: piecewise constant, so the gradient is zero (PyTorch's
// convention, also at the jumps).
Grads vjp_zero_grad(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return b.zeros_like(g); });
}

// Casting back: the gradient of a float value cast from another float dtype
// is the incoming gradient in the input's dtype. Casts to or from integers
// carry no gradient.
Grads vjp_cast(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  if (!floating(b, out)) return {Value{}};
  return unary(b, n, needs, [&](Value) { return g; });
}

// ---- Elementwise binary (broadcasting) ----

Grads vjp_add(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return {grad_for(b, n, needs, 0, [&](Value) { return g; }),
          grad_for(b, n, needs, 1, [&](Value) { return g; })};
}

Grads vjp_sub(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return {grad_for(b, n, needs, 0, [&](Value) { return g; }),
          grad_for(b, n, needs, 1, [&](Value) { return b.neg(g); })};
}

Grads vjp_mul(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value x = n.operands[0], y = n.operands[1];
  return {grad_for(b, n, needs, 0, [&](Value) { return b.mul(g, y); }),
          grad_for(b, n, needs, 1, [&](Value) { return b.mul(g, x); })};
}

// d(x/y) = g/y for x and -g*x/y^2 = -g*out/y for y.
Grads vjp_div(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value y = n.operands[1];
  return {grad_for(b, n, needs, 0, [&](Value) { return b.div(g, y); }),
          grad_for(b, n, needs, 1, [&](Value) { return b.neg(b.div(b.mul(g, out), y)); })};
}

// As PyTorch: dx = g * y * x^(y-1), zero where y == 0 (so 0^-1 never meets a
// zero factor); dy = g * out * log(x), zero where x == 0 and y >= 0 (the
// limit there), NaN for negative x as in PyTorch.
Grads vjp_pow(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value x = n.operands[0], y = n.operands[1];
  const auto dx = [&](Value) {
    const Value d = b.mul(b.mul(g, y), b.binary(OpKind::pow, x, b.sub(y, scalar(b, y, 1.0))));
    const Value y_zero = compare(b, OpKind::eq, y, scalar(b, y, 0.0));
    return b.where(y_zero, scalar(b, d, 0.0), d);
  };
  const auto dy = [&](Value) {
    const Value d = b.mul(b.mul(g, out), b.unary(OpKind::log, x));
    const Value limit = b.op(OpKind::logical_and, {compare(b, OpKind::eq, x, scalar(b, x, 0.0)),
                                                   compare(b, OpKind::ge, y, scalar(b, y, 0.0))});
    return b.where(limit, scalar(b, d, 0.0), d);
  };
  return {grad_for(b, n, needs, 0, dx), grad_for(b, n, needs, 1, dy)};
}

// As PyTorch: d fmod(x, y) = g for x and -g trunc(x / y) for y; remainder the
// same with floor (a - q b, with q held constant where it is differentiable).
Grads quotient_vjp(Builder& b, const Node& n, Value g, const Needs& needs, OpKind round) {
  const Value x = n.operands[0], y = n.operands[1];
  return {grad_for(b, n, needs, 0, [&](Value) { return g; }),
          grad_for(b, n, needs, 1, [&](Value) { return b.neg(b.mul(g, b.unary(round, b.div(x, y)))); })};
}

Grads vjp_fmod(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return quotient_vjp(b, n, g, needs, OpKind::trunc);
}

Grads vjp_remainder(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return quotient_vjp(b, n, g, needs, OpKind::floor);
}

// d logaddexp(a, b) = g exp(a - out) for a, g exp(b - out) for b.
Grads vjp_logaddexp(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  auto d = [&](Value x) { return b.mul(g, b.unary(OpKind::exp, b.sub(x, out))); };
  return {grad_for(b, n, needs, 0, d), grad_for(b, n, needs, 1, d)};
}

// As PyTorch: d atan2(a, b) = g b / (a^2 + b^2) for a, -g a / (a^2 + b^2) for b.
Grads vjp_atan2(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value x = n.operands[0], y = n.operands[1];
  const auto r2 = [&] { return b.add(b.mul(x, x), b.mul(y, y)); };
  return {grad_for(b, n, needs, 0, [&](Value) { return b.div(b.mul(g, y), r2()); }),
          grad_for(b, n, needs, 1, [&](Value) { return b.neg(b.div(b.mul(g, x), r2())); })};
}

// As PyTorch: d hypot(a, b) = g a / out for a, g b / out for b.
Grads vjp_hypot(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const auto d = [&](Value x) { return b.div(b.mul(g, x), out); };
  return {grad_for(b, n, needs, 0, d), grad_for(b, n, needs, 1, d)};
}

// ---- Scans ----

// The scan `k` of v along the node's dim, in its direction or (flip) the other.
Value scan_along(Builder& b, OpKind k, const Node& n, Value v, bool flip) {
  const int64_t reverse = n.attrs.i(AttrKey::reverse, 0) != 0;
  return b.op(k, {v}, Attrs{{AttrKey::dim, n.attrs.i(AttrKey::dim)}, {AttrKey::reverse, flip ? 1 - reverse : reverse}});
}

// A cumulative sum's gradient sums the output gradient from the other end.
Grads vjp_cumsum(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return scan_along(b, OpKind::cumsum, n, g, true); });
}

// As PyTorch, exact where x has zeros. Before the first zero (in the scan's
// direction) each x_i gets sum_{j>=i} g_j out_j / x_i; the first zero z gets
// prod_{k<z} x_k * sum_{j>=z} g_j prod_{z<k<=j} x_k; later elements get 0 (every
// product through them has the factor x_z = 0).
Grads vjp_cumprod(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const Value zero = scalar(b, x, 0.0), one = scalar(b, x, 1.0);
    const Value is_zero = compare(b, OpKind::eq, x, zero);
    const Value zeros_so_far = scan_along(b, OpKind::cumsum, n, b.cast(is_zero, b.type(x).dtype), false);
    const Value before = compare(b, OpKind::eq, zeros_so_far, zero);
    const Value first = b.op(OpKind::logical_and, {is_zero, compare(b, OpKind::eq, zeros_so_far, one)});
    const Value to_come = b.div(scan_along(b, OpKind::cumsum, n, b.mul(g, out), true), b.where(is_zero, one, x));
    const Value prefix = scan_along(b, OpKind::cumprod, n, b.where(before, x, one), false);
    const Value after = scan_along(b, OpKind::cumprod, n, b.where(b.op(OpKind::logical_or, {before, first}), one, x), false);
    const Value at_first = b.mul(prefix, scan_along(b, OpKind::cumsum, n, b.mul(g, after), true));
    return b.where(before, to_come, b.where(first, at_first, zero));
  });
}

// As PyTorch, in log space: sum_{j>=i} g_j exp(x_i - out_j) split by the sign of g,
// exp(x + logcumsumexp(log g+ - out)) - exp(x + logcumsumexp(log g- - out)), the
// logcumsumexps from the other end. Where g has the other sign its log is the
// lowest finite number, not -inf: it contributes exp(lowest) = 0 all the same, and
// the second derivative sees no -inf - -inf (a zero part's gradient stays 0).
Grads vjp_logcumsumexp(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const Value zero = scalar(b, g, 0.0), one = scalar(b, g, 1.0);
    const double lowest = b.type(g).dtype == DType::f32 ? double(std::numeric_limits<float>::lowest())
                                                        : std::numeric_limits<double>::lowest();
    // log of the part of g with one sign, lowest elsewhere; the log only sees
    // positive numbers, so its own gradient (second derivatives) has no 0 * inf.
    auto part = [&](Value signed_g) {
      const Value positive = compare(b, OpKind::gt, signed_g, zero);
      const Value log_g = b.where(positive, b.unary(OpKind::log, b.where(positive, signed_g, one)),
                                  scalar(b, g, lowest));
      const Value lse = scan_along(b, OpKind::logcumsumexp, n, b.sub(log_g, out), true);
      return b.unary(OpKind::exp, b.add(x, lse));
    };
    return b.sub(part(g), part(b.neg(g)));
  });
}

// The gradients of operands [0, count) that `needs` selects (floating ones), from
// one node `grad_op` of `operands` and n's attributes with the `which` mask of
// those operands: a library step's gradient, which lays them end to end in one
// 1-D result; each is sliced out in order and reshaped to its operand's shape.
Grads library_grads(Builder& b, const Node& n, const Needs& needs, size_t count, OpKind grad_op,
                    std::vector<Value> operands) {
  int64_t which = 0;
  for (size_t i = 0; i < count; ++i)
    if (needs[i] && floating(b, n.operands[i])) which |= int64_t(1) << i;
  if (which == 0) return Grads(count);
  Attrs a = n.attrs;
  a.set(AttrKey::which, which);
  const Value all = b.op(grad_op, std::move(operands), a);
  int64_t start = 0;
  Grads grads;
  for (size_t i = 0; i < count; ++i)
    grads.push_back(grad_for(b, n, needs, i, [&](Value x) {
      const TensorType t = b.type(x);
      const Value part = b.op(OpKind::slice, {all},
                              Attrs{{AttrKey::dim, int64_t{0}},
                                    {AttrKey::start, start},
                                    {AttrKey::end, start + t.numel()},
                                    {AttrKey::step, int64_t{1}}});
      start += t.numel();
      return b.reshape(part, t.shape);
    }));
  return grads;
}

// Attention's gradients come from one attention_grad node, which recomputes the
// probabilities from q, k and v (runtime/attention.h) once for all the operands
// that need one (its `which` mask) and lays them end to end in one 1-D result;
// each is sliced out and reshaped. attention_grad has no gradient of its own, so
// a second derivative through attention is an error, not zero.
Grads vjp_attention(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return library_grads(b, n, needs, 3, OpKind::attention_grad,
                       {n.operands[0], n.operands[1], n.operands[2], out, g});
}

Grads vjp_attention_grad(Builder&, const Node& n, Value, Value, const Needs&) {
  throw Error("scaled_dot_product_attention: second derivatives (a gradient of its gradient) are not "
              "supported; compose the attention from matmul and softmax to take them",
              n.loc);
}

// cluster_logprob's gradients come from one cluster_logprob_grad node for h and
// w (its `which` mask), which recomputes each member row's softmax
// (runtime/cluster_logprob.h); each is sliced out of its 1-D result and
// reshaped. The targets have none. cluster_logprob_grad has no gradient of its
// own, so a second derivative through it is an error, not zero.
Grads vjp_cluster_logprob(Builder& b, const Node& n, Value, Value g, const Needs& needs) {
  Grads grads = library_grads(b, n, needs, 2, OpKind::cluster_logprob_grad,
                              {n.operands[0], n.operands[1], n.operands[2], g});
  grads.push_back(Value{});  // the targets
  return grads;
}

Grads vjp_cluster_logprob_grad(Builder&, const Node& n, Value, Value, const Needs&) {
  throw Error(
      "adaptive_log_softmax_with_loss: second derivatives (a gradient of its gradient) "
      "are not supported",
      n.loc);
}

// gather and scatter_add are each other's gradient: gather's x gets the output
// gradient added back at the gathered positions (duplicates add up); scatter_add's
// base gets the gradient as it is, its source the gradient at the scattered positions.
Grads vjp_gather(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value x = n.operands[0], index = n.operands[1];
  return {grad_for(b, n, needs, 0, [&](Value) {
            const TensorType t = b.type(x);
            return b.op(OpKind::scatter_add, {b.constant(0.0, b.type(g).dtype, t.shape, t.device), index, g},
                        n.attrs);
          }),
          Value{}};
}

Grads vjp_scatter_add(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value index = n.operands[1];
  return {grad_for(b, n, needs, 0, [&](Value) { return g; }), Value{},
          grad_for(b, n, needs, 2, [&](Value) { return b.op(OpKind::gather, {g, index}, n.attrs); })};
}

// The gradient goes to the selected operand; ties split it evenly (as PyTorch).
// `wins` is gt for maximum and lt for minimum.
Grads select_vjp(Builder& b, const Node& n, Value g, const Needs& needs, OpKind wins) {
  const Value x = n.operands[0], y = n.operands[1];
  const auto share = [&](Value self) {
    const Value other = self == x ? y : x;
    const Value half = b.mul(g, scalar(b, g, 0.5));
    const Value tied = b.where(compare(b, OpKind::eq, x, y), half, scalar(b, g, 0.0));
    return b.where(compare(b, wins, self, other), g, tied);
  };
  return {grad_for(b, n, needs, 0, share), grad_for(b, n, needs, 1, share)};
}

Grads vjp_maximum(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return select_vjp(b, n, g, needs, OpKind::gt);
}

Grads vjp_minimum(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return select_vjp(b, n, g, needs, OpKind::lt);
}

// ---- where(cond, x, y) ----

// rebind(new, old): the gradient goes to the tensor that was written, none to the
// values written into it (they were computed under NoGradGuard).
Grads vjp_rebind(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return {Value{}, grad_for(b, n, needs, 1, [&](Value) { return g; })};
}

Grads vjp_where(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value c = n.operands[0];
  const Value zero = scalar(b, g, 0.0);
  return {Value{}, grad_for(b, n, needs, 1, [&](Value) { return b.where(c, g, zero); }),
          grad_for(b, n, needs, 2, [&](Value) { return b.where(c, zero, g); })};
}

// ---- Reductions ----

// Each input element receives the gradient of the sum it went into.
Grads vjp_sum(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const Shape in = b.type(x).shape;
    const Shape keep = keepdim_shape(in, reduced_dims(n, b.type(x).rank()));
    return b.expand(b.reshape(g, keep), in);
  });
}

// The gradient goes to the elements equal to the result, split evenly among
// ties (as torch.amax/amin).
Grads extremum_vjp(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const TensorType tx = b.type(x);
    const std::vector<int64_t> dims = reduced_dims(n, tx.rank());
    const Shape keep = keepdim_shape(tx.shape, dims);
    const Value mask = b.cast(compare(b, OpKind::eq, x, b.reshape(out, keep)), tx.dtype);
    const Value count = b.sum(mask, dims, /*keepdim=*/true);
    return b.mul(mask, b.div(b.reshape(g, keep), count));
  });
}

Grads vjp_max(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return extremum_vjp(b, n, out, g, needs);
}
Grads vjp_min(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return extremum_vjp(b, n, out, g, needs);
}

// ---- Movement ----

Grads vjp_reshape(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) { return b.reshape(g, b.type(x).shape); });
}

// grad_for's sum_to undoes the broadcast.
Grads vjp_expand(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value) { return g; });
}

Grads vjp_permute(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const std::vector<int64_t>& perm = n.attrs.ints(AttrKey::perm);
    const int64_t rank = static_cast<int64_t>(perm.size());
    std::vector<int64_t> inverse(perm.size());
    for (int64_t i = 0; i < rank; ++i) inverse[normalize_dim(perm[i], rank)] = i;
    return b.permute(g, inverse);
  });
}

// The slice's elements go back to their places; the rest are zero: a pad with
// `step - 1` zeros between elements, `start` before and the remainder after.
Grads vjp_slice(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const TensorType tx = b.type(x);
    const int64_t dim = normalize_dim(n.attrs.i(AttrKey::dim), tx.rank());
    const int64_t size = tx.shape[dim];
    const int64_t step = n.attrs.i(AttrKey::step);
    const int64_t count = b.type(out).shape[dim];
    if (count == 0) return b.constant(0.0, b.type(g).dtype, tx.shape, tx.device);
    const int64_t start = n.attrs.i(AttrKey::start);
    const int64_t high = size - (start + (count - 1) * step + 1);
    return b.op(OpKind::pad, {g},
                Attrs{{AttrKey::dim, dim},
                      {AttrKey::low, start},
                      {AttrKey::high, high},
                      {AttrKey::interior, step - 1}});
  });
}

// Each window element goes back to its place, and overlapping windows add up:
// for each tap j, the windows' element j padded into place (j dilation before,
// step - 1 zeros between windows), summed over the taps.
Grads vjp_unfold(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const TensorType tx = b.type(x);
    const Shape& os = b.type(out).shape;
    const int64_t dim = normalize_dim(n.attrs.i(AttrKey::dim), tx.rank());
    const int64_t len = tx.shape[dim], windows = os[dim], size = os.back();
    const int64_t step = n.attrs.i(AttrKey::step), dilation = n.attrs.i(AttrKey::dilation, 1);
    if (windows == 0 || size == 0) return b.constant(0.0, b.type(g).dtype, tx.shape, tx.device);
    const int64_t last = int64_t(os.size()) - 1;
    const Shape tap_shape(os.begin(), os.end() - 1);
    Value sum;
    for (int64_t j = 0; j < size; ++j) {
      const Value tap = b.reshape(b.op(OpKind::slice, {g},
                                       Attrs{{AttrKey::dim, last},
                                             {AttrKey::start, j},
                                             {AttrKey::end, j + 1},
                                             {AttrKey::step, int64_t(1)}}),
                                  tap_shape);
      const int64_t low = j * dilation;
      const Value placed = b.op(OpKind::pad, {tap},
                                Attrs{{AttrKey::dim, dim},
                                      {AttrKey::low, low},
                                      {AttrKey::high, len - (low + (windows - 1) * step + 1)},
                                      {AttrKey::interior, step - 1}});
      sum = sum ? b.add(sum, placed) : placed;
    }
    return sum;
  });
}

// Inverse of a pad: every (interior + 1)-th element from `low`.
Grads vjp_pad(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  return unary(b, n, needs, [&](Value x) {
    const TensorType tx = b.type(x);
    const int64_t dim = normalize_dim(n.attrs.i(AttrKey::dim), tx.rank());
    const int64_t size = tx.shape[dim];
    if (size == 0) return b.constant(0.0, b.type(g).dtype, tx.shape, tx.device);
    const int64_t low = n.attrs.i(AttrKey::low);
    const int64_t step = n.attrs.i(AttrKey::interior) + 1;
    return b.op(OpKind::slice, {g},
                Attrs{{AttrKey::dim, dim},
                      {AttrKey::start, low},
                      {AttrKey::end, low + (size - 1) * step + 1},
                      {AttrKey::step, step}});
  });
}

// ---- Matmul ----

// v permuted by `perm` (when that moves anything) and reshaped to `shape`.
Value permute_reshape(Builder& b, Value v, const std::vector<int64_t>& perm, Shape shape) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  return b.reshape(identity ? v : b.permute(v, perm), std::move(shape));
}

// The gradient of matmul operand `which` (0: x [.., n, k], 1: y [.., k, m]) from
// g [B.., n, m]: dx = g @ y^T, dy = x^T @ g, summed over the batch dims the
// operand was broadcast along. Those dims join the contraction, so the sum is
// inside one matmul per kept batch (a Linear on [B, T, D] inputs, conv2d's
// weight) rather than a matmul per batch element and a reduction after it.
Value matmul_grad(Builder& b, Value x, Value y, Value g, int which) {
  const Value self = which == 0 ? x : y, other = which == 0 ? y : x;
  const Shape gs = b.type(g).shape, ss = b.type(self).shape;
  const int64_t nb = int64_t(gs.size()) - 2, lead = nb - (int64_t(ss.size()) - 2);
  std::vector<int64_t> kept, folded;
  Shape kept_shape;
  int64_t fold = 1;
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t own = i >= lead ? ss[size_t(i - lead)] : 1;
    if (own == 1 && gs[size_t(i)] != 1) {
      folded.push_back(i);
      fold *= gs[size_t(i)];
    } else {
      kept.push_back(i);
      kept_shape.push_back(gs[size_t(i)]);
    }
  }
  if (folded.empty())
    return which == 0 ? b.matmul(g, b.transpose_last(y)) : b.matmul(b.transpose_last(x), g);
  // The other operand over the full batch B.
  Shape os = b.type(other).shape, full(gs.begin(), gs.end() - 2);
  full.insert(full.end(), os.end() - 2, os.end());
  Value o = other;
  if (os != full) {
    Shape padded(full.size() - os.size(), 1);
    padded.insert(padded.end(), os.begin(), os.end());
    o = b.expand(b.reshape(other, padded), full);
  }
  const int64_t rows = gs[size_t(nb)], cols = gs[size_t(nb) + 1];
  const int64_t inner = which == 0 ? full[size_t(nb)] : full[size_t(nb) + 1];  // k
  // Permutations: kept batch dims, then `before`, the folded dims, `after`.
  auto order = [&](std::vector<int64_t> before, std::vector<int64_t> after) {
    std::vector<int64_t> p = kept;
    p.insert(p.end(), before.begin(), before.end());
    p.insert(p.end(), folded.begin(), folded.end());
    p.insert(p.end(), after.begin(), after.end());
    return p;
  };
  auto dims = [&](int64_t a, int64_t c) {
    Shape s = kept_shape;
    s.push_back(a);
    s.push_back(c);
    return s;
  };
  Value result;
  if (which == 0)  // dx [.., n, k]: the sum over (B_fold, m) of g[.., n, m] y[.., k, m]
    result = b.matmul(permute_reshape(b, g, order({nb}, {nb + 1}), dims(rows, fold * cols)),
                      b.transpose_last(permute_reshape(b, o, order({nb}, {nb + 1}),
                                                       dims(inner, fold * cols))));
  else  // dy [.., k, m]: the sum over (B_fold, n) of x[.., n, k] g[.., n, m]
    result = b.matmul(b.transpose_last(permute_reshape(b, o, order({}, {nb, nb + 1}),
                                                       dims(fold * rows, inner))),
                      permute_reshape(b, g, order({}, {nb, nb + 1}), dims(fold * rows, cols)));
  return b.reshape(result, ss);
}

Grads vjp_matmul(Builder& b, const Node& n, Value out, Value g, const Needs& needs) {
  const Value x = n.operands[0], y = n.operands[1];
  return {grad_for(b, n, needs, 0, [&](Value) { return matmul_grad(b, x, y, g, 0); }),
          grad_for(b, n, needs, 1, [&](Value) { return matmul_grad(b, x, y, g, 1); })};
}

// Custom nodes have a gradient, but not a rule here: build_gradients differentiates
// them with its caller's CustomVjp (passes/autodiff.h), which runs user code.
constexpr VjpRule vjp_custom = nullptr;

// The table's `none` column entry.
constexpr VjpRule vjp_none = nullptr;

// Composites (the `derived` column entry) have a gradient but no rule: the
// Builder expands them, and autodiff differentiates the expansion's ops.
constexpr VjpRule vjp_derived = nullptr;

}  // namespace

VjpRule vjp_rule(OpKind k) {
  static constexpr VjpRule kRules[] = {
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, ...) vjp_##vjp,
#include "ir/ops.def"
#undef KILN_OP
  };
  return kRules[static_cast<size_t>(k)];
}

}  // namespace kiln
