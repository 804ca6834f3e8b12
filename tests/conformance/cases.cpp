// The case table of the conformance matrix: one or more cases per op of the
// table (which ops a case covers is read off its traced graph), the composites
// users write (mean, var/std, softmax, losses, layer-norm rows, attention), and
// the inputs that break implementations: ties, exact zeros, size-1 broadcast
// dims, empty tensors, non-contiguous views, detach, in-place ops on views and
// no-grad blocks inside the function.
#include <cmath>

#include "conformance.h"
#include "frontend/dispatch.h"

namespace kiln::conformance {
namespace {

using V = const std::vector<Tensor>&;

Input in(Shape s, double lo = -1, double hi = 1) {
  return Input{std::move(s), lo, hi};
}
Input positive(Shape s) {
  return in(std::move(s), 0.2, 3);
}
Input laid_out(Shape s, Layout l) {
  Input i = in(std::move(s));
  i.layout = l;
  return i;
}
Input indices(Shape s, int64_t classes) {
  Input i = in(std::move(s), 0, static_cast<double>(classes));
  i.kind = Kind::Index;
  return i;
}
Input given(Shape s, std::vector<double> values) {
  Input i = in(std::move(s));
  i.values = std::move(values);
  return i;
}

Case unary(std::string name, std::function<Tensor(const Tensor&)> f, Input x = in({3, 4})) {
  return Case{std::move(name), {std::move(x)}, [f](V v) { return f(v[0]); }};
}

Case binary(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f, Input a,
            Input b) {
  return Case{std::move(name), {std::move(a), std::move(b)}, [f](V v) { return f(v[0], v[1]); }};
}

Case no_fd(Case c) {
  c.finite_differences = false;
  return c;
}

struct Cube : autograd::Function<Cube> {
  static Tensor forward(autograd::Context* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::Context* ctx, std::vector<Tensor> g) {
    const Tensor& x = ctx->get_saved_variables()[0];
    return {g[0] * 3 * x * x};
  }
};

Tensor layer_norm_rows(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor mu = x.mean({-1}, true);
  Tensor var = (x - mu).pow(2).mean({-1}, true);
  return (x - mu) / (var + 1e-5).sqrt() * w + b;
}

// Every math op of the op table (ops.def) by itself, through the generic op
// entry, so a new row is in the matrix before anyone writes a case for it, on
// inputs from the op's domain (ops.def's `domain` column).
// A binary one broadcasts its second operand.
std::vector<Case> table_math_cases() {
  std::vector<Case> v;
  for (OpKind k : all_ops()) {
    if (!is_math(k)) continue;
    const Domain& d = op_info(k).domain;
    const std::string name = std::string(op_name(k)) + " (a math op of the table)";
    if (op_info(k).arity == 1)
      v.push_back(unary(
          name, [k](const Tensor& x) { return detail::apply(k, {x}, {}, SourceLoc{}); },
          in({3, 4}, d.low(0), d.high(0))));
    else
      v.push_back(binary(
          name,
          [k](const Tensor& x, const Tensor& y) { return detail::apply(k, {x, y}, {}, SourceLoc{}); },
          in({3, 4}, d.low(0), d.high(0)), in({4}, d.low(1), d.high(1))));
  }
  return v;
}

// Every composite of the op table (ops.def's decomp) through the generic op entry,
// on inputs from its domain: the matrix compares its expansion eager and traced.
std::vector<Case> table_composite_cases() {
  std::vector<Case> v;
  for (OpKind k : all_ops())
    if (is_composite(k))
      v.push_back(unary(
          std::string(op_name(k)) + " (a composite of the table)",
          [k](const Tensor& x) { return detail::apply(k, {x}, {}, SourceLoc{}); },
          in({3, 4}, op_info(k).domain.low(0), op_info(k).domain.high(0))));
  return v;
}

// Every reduction and scan of the op table (ops.def's reduce, argreduce and
// scan rows) through the generic op entry, on inputs from its domain: over one
// dim and over all of them kept, an argreduce's positions added to a sum (so a
// gradient flows), a scan forward along one dim and from the end along another.
std::vector<Case> table_fold_cases() {
  std::vector<Case> v;
  auto apply = [](OpKind k, const Tensor& x, Attrs a) {
    return detail::apply(k, {x}, std::move(a), SourceLoc{});
  };
  for (OpKind k : all_ops()) {
    const Domain& d = op_info(k).domain;
    const std::string name =
        std::string(op_name(k)) + " (a " + (is_scan(k) ? "scan" : "reduction") + " of the table)";
    const Input x = in({3, 4}, d.low(0), d.high(0));
    if (op_info(k).scalar == ScalarRule::reduce)
      v.push_back(unary(
          name,
          [k, apply](const Tensor& t) {
            return apply(k, t,
                         {{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t{0}}})
                       .sum() +
                   apply(k, t,
                         {{AttrKey::dims, std::vector<int64_t>{0, 1}},
                          {AttrKey::keepdim, int64_t{1}}})
                       .sum();
          },
          x));
    if (is_arg_reduction(k))
      v.push_back(unary(
          name,
          [k, apply](const Tensor& t) {
            return apply(k, t, {{AttrKey::dim, int64_t{1}}, {AttrKey::keepdim, int64_t{0}}})
                       .to(t.dtype()) +
                   t.sum(1);
          },
          x));
    if (is_scan(k))
      v.push_back(unary(
          name,
          [k, apply](const Tensor& t) {
            return apply(k, t, {{AttrKey::dim, int64_t{1}}, {AttrKey::reverse, int64_t{0}}}) +
                   apply(k, t, {{AttrKey::dim, int64_t{0}}, {AttrKey::reverse, int64_t{1}}});
          },
          x));
  }
  return v;
}

std::vector<Case> unary_cases() {
  return {
      unary("neg", [](const Tensor& x) { return -x; }),
      unary("abs", [](const Tensor& x) { return x.abs(); }),
      unary("sign", [](const Tensor& x) { return x.sign() * x; }),
      unary("exp", [](const Tensor& x) { return x.exp(); }),
      unary(
          "log", [](const Tensor& x) { return x.log(); }, positive({3, 4})),
      unary(
          "sqrt", [](const Tensor& x) { return x.sqrt(); }, positive({3, 4})),
      unary(
          "rsqrt", [](const Tensor& x) { return x.rsqrt(); }, positive({3, 4})),
      unary(
          "sin", [](const Tensor& x) { return x.sin(); }, in({3, 4}, -3, 3)),
      unary(
          "cos", [](const Tensor& x) { return x.cos(); }, in({3, 4}, -3, 3)),
      unary(
          "tanh", [](const Tensor& x) { return x.tanh(); }, in({3, 4}, -3, 3)),
      unary(
          "sigmoid", [](const Tensor& x) { return x.sigmoid(); }, in({3, 4}, -4, 4)),
      unary("relu", [](const Tensor& x) { return x.relu(); }),
      unary(
          "gelu", [](const Tensor& x) { return x.gelu(); }, in({3, 4}, -3, 3)),
      unary(
          "erf", [](const Tensor& x) { return erf(x) * x.erf(); }, in({3, 4}, -2.5, 2.5)),
      unary("logical_not", [](const Tensor& x) { return x.gt(0).logical_not().to(x.dtype()) * x; }),
      unary("cast to int and back",
            [](const Tensor& x) { return (x * 3).to(kInt64).to(x.dtype()) + x; }),
      unary("cast through f64 and f32",
            [](const Tensor& x) { return x.to(kFloat64).exp().to(x.dtype()); }),
      unary(
          "pow with a scalar exponent", [](const Tensor& x) { return x.pow(3) + x.pow(0.5); },
          positive({3, 4})),
      unary("clamp", [](const Tensor& x) { return x.clamp(-0.5, 0.5) * x; }),
      unary(
          "elementwise on an empty tensor", [](const Tensor& x) { return x.exp() * 2; },
          in({0, 3})),
      unary(
          "transposed input", [](const Tensor& x) { return x.tanh() * x; },
          laid_out({4, 3}, Layout::Transposed)),
      unary(
          "strided input", [](const Tensor& x) { return x.sigmoid() + x * x; },
          laid_out({3, 4}, Layout::Strided)),
  };
}

std::vector<Case> binary_cases() {
  return {
      binary(
          "add with size-1 broadcast dims", [](auto& a, auto& b) { return a + b; }, in({3, 1}),
          in({1, 4})),
      binary(
          "sub, rank broadcast", [](auto& a, auto& b) { return a - b; }, in({2, 3, 4}), in({4})),
      binary(
          "mul with a 0-d tensor", [](auto& a, auto& b) { return a * b; }, in({}), in({3, 2})),
      binary(
          "div", [](auto& a, auto& b) { return a / b; }, in({3, 4}), in({4}, 0.5, 2)),
      binary(
          "pow", [](auto& a, auto& b) { return a.pow(b); }, in({3, 4}, 0.5, 2),
          in({3, 1}, -1.5, 1.5)),
      binary(
          "maximum", [](auto& a, auto& b) { return a.maximum(b); }, in({3, 4}), in({4})),
      binary(
          "minimum", [](auto& a, auto& b) { return minimum(a, b); }, in({3, 4}), in({3, 1})),
      no_fd(binary(
          "comparisons on a grid with ties",
          [](auto& a, auto& b) {
            const DType d = a.dtype();
            return a.eq(b).to(d) + 2 * a.ne(b).to(d) + 3 * a.lt(b).to(d) + 4 * a.le(b).to(d) +
                   5 * a.gt(b).to(d) + 6 * a.ge(b).to(d) + a * b;
          },
          given({2, 3}, {-1, 0, 1, 2, 0.5, 0}), given({3}, {-1, 1, 1}))),
      binary(
          "logical and, or",
          [](auto& a, auto& b) {
            return (logical_and(a.gt(0), b.gt(0)).to(a.dtype()) +
                    logical_or(a.lt(0), b.lt(0)).to(a.dtype())) *
                   a;
          },
          in({3, 4}), in({4})),
      binary(
          "where", [](auto& a, auto& b) { return where(a.gt(b), a * 2, b.exp()); }, in({3, 4}),
          in({3, 1})),
      binary(
          "add on empty tensors", [](auto& a, auto& b) { return a + b; }, in({0, 3}), in({3})),
      binary(
          "expanded input", [](auto& a, auto& b) { return a * b; },
          laid_out({3, 4}, Layout::Expanded), in({3, 4})),
      binary(
          "the same input twice", [](auto& a, auto&) { return a * a + a; }, in({3}), in({1})),
  };
}

std::vector<Case> reduction_cases() {
  return {
      unary(
          "sum of everything", [](const Tensor& x) { return x.sum(); }, in({2, 3, 4})),
      unary(
          "sum over dims, keepdim",
          [](const Tensor& x) {
            return x.sum({0, 2}, true) * x;
          },
          in({2, 3, 4})),
      unary(
          "sum over an empty dim", [](const Tensor& x) { return x.sum(0); }, in({0, 3})),
      unary(
          "mean", [](const Tensor& x) { return x.mean(1); }, in({3, 5})),
      unary(
          "max of everything", [](const Tensor& x) { return x.max(); }, in({3, 4})),
      unary(
          "max over a dim", [](const Tensor& x) { return std::get<0>(x.max(1)); }, in({3, 4})),
      unary(
          "min over a dim, keepdim", [](const Tensor& x) { return std::get<0>(x.min(0, true)); },
          in({3, 4})),
      unary(
          "amax and amin",
          [](const Tensor& x) {
            return x.amax({1}) + x.amin({0, 1});
          },
          in({2, 3, 4})),
      unary(
          "argmax and argmin",
          [](const Tensor& x) {
            return x.argmax(1).to(x.dtype()) + x.argmin(1).to(x.dtype()) + x.sum(1);
          },
          in({3, 5})),
      unary(
          "var and std", [](const Tensor& x) { return x.var({1}) + x.std({0}, false).sum(); },
          in({4, 5})),
      unary(
          "softmax", [](const Tensor& x) { return x.softmax(-1); }, in({3, 6}, -3, 3)),
      unary(
          "log_softmax over dim 0", [](const Tensor& x) { return x.log_softmax(0); },
          in({4, 3}, -3, 3)),
      binary(
          "mse loss", [](auto& a, auto& b) { return nn::functional::mse_loss(a, b); }, in({4, 3}),
          in({4, 3})),
      binary(
          "cross entropy", [](auto& a, auto& b) { return nn::functional::cross_entropy(a, b); },
          in({4, 5}, -2, 2), indices({4}, 5)),
      Case{"layer-norm rows",
           {in({3, 8}), in({8}), in({8})},
           [](V v) { return layer_norm_rows(v[0], v[1], v[2]); }},
      // A world of one process (no launcher): the collectives give the operand
      // back, and carry no gradient (tests/distributed runs them on two ranks).
      // Finite differences would see through them, so the matrix compares modes only.
      Case{"collectives (a world of one)",
           {in({4, 3})},
           [](V v) {
             if (!distributed::is_initialized()) distributed::init();
             Tensor r = distributed::reduce_scatter(distributed::all_gather(v[0] * 2), ReduceOp::avg);
             Tensor c = v[0].detach().clone();
             distributed::all_reduce(c, ReduceOp::max);
             distributed::broadcast(c, 0);
             return v[0] * (r + c);
           },
           /*finite_differences=*/false},
  };
}

std::vector<Case> movement_cases() {
  return {
      unary("reshape and view",
            [](const Tensor& x) {
              return x.reshape({4, 3}).exp().view({12}) * 2;
            }),
      unary(
          "flatten, squeeze, unsqueeze",
          [](const Tensor& x) { return x.unsqueeze(0).flatten(1).squeeze(0).unsqueeze(1).sin(); }),
      unary(
          "permute",
          [](const Tensor& x) {
            return x.permute({2, 0, 1}) * 3;
          },
          in({2, 3, 4})),
      unary("transpose", [](const Tensor& x) { return x.t().exp(); }),
      unary(
          "expand",
          [](const Tensor& x) {
            return x.expand({2, 3, 4}) * x.sum();
          },
          in({3, 1})),
      unary(
          "slice with a step", [](const Tensor& x) { return x.slice(1, 1, 6, 2).tanh(); },
          in({3, 7})),
      unary(
          "narrow and select",
          [](const Tensor& x) { return x.narrow(0, 1, 2) * x.select(0, 3).unsqueeze(0); },
          in({4, 3})),
      unary("contiguous of a transpose", [](const Tensor& x) { return x.t().contiguous() * 2; }),
  };
}

std::vector<Case> matmul_cases() {
  return {
      binary(
          "matmul 2-D", [](auto& a, auto& b) { return a.matmul(b); }, in({3, 4}), in({4, 5})),
      binary(
          "matmul batched with broadcast", [](auto& a, auto& b) { return a.matmul(b); },
          in({2, 3, 4}), in({4, 2})),
      binary(
          "matmul vector-matrix", [](auto& a, auto& b) { return a.matmul(b); }, in({4}),
          in({4, 3})),
      binary(
          "matmul of transposed operands", [](auto& a, auto& b) { return a.t().mm(b); },
          laid_out({4, 3}, Layout::Dense), laid_out({4, 2}, Layout::Transposed)),
      binary(
          "matmul with an empty dim", [](auto& a, auto& b) { return a.matmul(b); }, in({0, 3}),
          in({3, 2})),
      binary(
          "linear layer with bias and relu",
          [](auto& a, auto& b) { return (a.matmul(b) + 0.1).relu(); }, in({5, 4}), in({4, 3})),
      Case{"attention softmax(q k^T) v",
           {in({4, 3}), in({5, 3}), in({5, 2})},
           [](V v) { return (v[0].matmul(v[1].t()) / std::sqrt(3.0)).softmax(-1).matmul(v[2]); }},
      // The attention op (runtime/attention.h streams over key blocks): heads
      // sharing k and v, causal, rows longer than a block; and the mask path.
      Case{"scaled_dot_product_attention, causal, heads sharing k and v",
           {in({2, 3, 70, 4}), in({2, 1, 140, 4}), in({2, 1, 140, 3})},
           [](V v) {
             using nn::functional::scaled_dot_product_attention;
             return scaled_dot_product_attention(v[0], v[1], v[2], {}, 0.0, true) +
                    scaled_dot_product_attention(v[0], v[1] * 2, v[2], {}, 0.0, false, 0.3).exp();
           }},
      Case{"scaled_dot_product_attention with a bool mask",
           {in({5, 3}), in({6, 3}), in({6, 2})},
           [](V v) {
             const TensorOptions o = TensorOptions().device(v[0].device());
             const Tensor keep =
                 (arange(6, o).unsqueeze(0) + arange(5, o).unsqueeze(1)).remainder(3) != 1;
             return nn::functional::scaled_dot_product_attention(v[0], v[1], v[2], keep);
           }},
  };
}

std::vector<Case> creation_and_autograd_cases() {
  return {
      unary("arange, full and a literal inside the function",
            [](const Tensor& x) {
              const TensorOptions o = TensorOptions(x.dtype()).device(x.device());
              Tensor lit = x.dtype() == kFloat64 ? tensor({1.0, -2.0, 0.5, 3.0}, o)
                                                 : tensor({1.f, -2.f, 0.5f, 3.f}, o);
              return x * arange(4, o) + lit + full({3, 4}, 0.25, o) * x;
            }),
      // detach() and no-grad blocks change the gradient on purpose: finite differences do not
      // apply.
      no_fd(unary("detach", [](const Tensor& x) { return x * x.detach(); })),
      no_fd(unary("detach inside a longer chain",
                  [](const Tensor& x) { return (x.exp().detach() * x).sin() + x.detach().sum(); })),
      no_fd(unary("a no-grad block inside the function",
                  [](const Tensor& x) {
                    Tensor y;
                    {
                      NoGradGuard no_grad;
                      y = x * 2 + 1;
                    }
                    return x * y;
                  })),
      // In-place ops where no gradient flows (eager autograd saves every op's
      // operands and result, so it refuses in-place writes to tensors a gradient needs).
      no_fd(unary("in-place ops on an intermediate",
                  [](const Tensor& x) {
                    Tensor y;
                    {
                      NoGradGuard no_grad;
                      y = x * 2;
                      y.add_(1).mul_(x).div_(2);
                    }
                    return y.exp() * x;
                  })),
      // A tensor that requires grad, written under NoGradGuard (as an optimizer
      // step writes parameters): later uses read the new values, and their
      // gradients still flow through the ops that made it.
      no_fd(unary("a no-grad write into a tensor that requires grad",
                  [](const Tensor& x) {
                    Tensor y = x * 2;
                    {
                      NoGradGuard no_grad;
                      y.add_(x.exp());
                    }
                    return y * x;
                  })),
      unary("a custom autograd function", [](const Tensor& x) { return Cube::apply(x) + x; }),
  };
}

std::vector<Case> convention_cases() {
  // Kinks and ties: finite differences do not apply; traced must still equal eager.
  return {
      no_fd(unary(
          "abs, relu and sign at exact zeros",
          [](const Tensor& x) { return x.abs() + x.relu() + x.sign() * x; },
          given({5}, {0, -1, 0, 2, 0}))),
      no_fd(binary(
          "maximum and minimum with ties",
          [](auto& a, auto& b) { return a.maximum(b) + 2 * minimum(a, b); },
          given({4}, {1, 2, 3, 4}), given({4}, {1, 0, 3, 5}))),
      no_fd(unary(
          "amax with ties", [](const Tensor& x) { return x.amax({1}); },
          given({2, 3}, {1, 3, 3, 2, 2, 2}))),
      no_fd(unary(
          "max over a dim with ties", [](const Tensor& x) { return std::get<0>(x.max(1)); },
          given({2, 3}, {1, 3, 3, 2, 2, 2}))),
      no_fd(unary(
          "max of everything with ties", [](const Tensor& x) { return x.max(); },
          given({2, 2}, {4, 1, 4, 0}))),
      no_fd(unary(
          "round half to even, floor and ceil at integers",
          [](const Tensor& x) { return x.round() * x + x.floor() + x.ceil() * 2; },
          given({6}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.0}))),
  };
}

// The ops real models need: rounding and scans, joining and indexing,
// activations, normalisation, classifier losses, dropout (its draws are the same
// stream in every mode: run_case seeds the generator before every call).
std::vector<Case> model_cases() {
  using namespace nn::functional;
  return {
      unary(
          "log1p and expm1", [](const Tensor& x) { return x.log1p() + log1p(x * 0.5) * x.expm1(); },
          in({3, 4}, -0.5, 1)),
      unary(
          "floor, ceil, round, trunc",
          [](const Tensor& x) {
            Tensor y = x * 3;
            return y.floor() + 2 * y.ceil() + 3 * y.round() + 4 * y.trunc() + x;
          },
          given({6}, {-1.25, -0.55, 0.4, 0.6, 0.84, 1.3})),
      unary(
          "reciprocal and square", [](const Tensor& x) { return x.reciprocal() + x.square(); },
          positive({3, 4})),
      binary(
          "fmod and remainder",
          [](auto& a, auto& b) { return a.fmod(b) + 2 * a.remainder(b) + a.fmod(0.3); },
          given({4}, {-1.7, -0.4, 0.45, 1.65}), given({4}, {0.5, -0.7, 0.6, -0.45})),
      no_fd(unary(
          "isnan, isinf, isfinite, all, any",
          [](const Tensor& x) {
            Tensor y = x.log();  // NaN below 0, -inf at 0
            const DType d = x.dtype();
            return y.isnan().to(d) + 2 * y.isinf().to(d) + 3 * y.isfinite().to(d) +
                   x.gt(0).all(1, true).to(d) + 4 * x.gt(0).any().to(d) + x;
          },
          given({2, 3}, {-1, 0, 1, 2, 3, 4}))),
      unary(
          "logsumexp", [](const Tensor& x) { return x.logsumexp(1) + logsumexp(x, {0, 1}, true); },
          in({3, 5}, -3, 3)),
      unary(
          "norm: p = 2, 1, 3 over dims", [](const Tensor& x) {
            return x.norm() + x.norm(1, {1}) + x.norm(3, {0}, true).sum();
          },
          in({3, 4})),
      unary(
          "cumsum", [](const Tensor& x) { return x.cumsum(1) + cumsum(x, 0) * 2; }, in({3, 5})),
      unary(
          "cumsum of long rows, fused with its producer and consumer",
          [](const Tensor& x) { return (x.exp() * 0.5).cumsum(1).tanh() + x.cumsum(0); }, in({3, 300})),
      unary(
          "cumprod", [](const Tensor& x) { return x.cumprod(1) + cumprod(x.t(), 1).t() * 0.5; },
          in({3, 5}, 0.5, 1.5)),
      unary(
          "cumprod through zeros (exact gradient at and after the first zero)",
          [](const Tensor& x) { return x.cumprod(1); },
          given({2, 5}, {0.5, 0, 1.5, 0, 2, -1.2, 0.8, 0, 1.1, 0.9})),
      unary(
          "logcumsumexp", [](const Tensor& x) { return x.logcumsumexp(1) + logcumsumexp(x * 3, 0); },
          in({4, 6}, -4, 4)),
      no_fd(unary(
          "scans along lines long enough to fold in chunks (ir/scan_chunks.h), and their reverse-scan gradients",
          [](const Tensor& x) {
            return x.cumsum(1) * 1e-3 + x.logcumsumexp(1) + (x * 1e-4 + 1).cumprod(1);
          },
          in({2, 70000}, 0.5, 1.5))),
      binary(
          "logaddexp", [](auto& a, auto& b) { return a.logaddexp(b) + logaddexp(a * 20, b.sum(0)); },
          in({3, 4}, -3, 3), in({3, 4}, -3, 3)),
      binary(
          "atan2 and hypot, every quadrant, broadcast",
          [](auto& a, auto& b) { return a.atan2(b) + atan2(b.sum(0), a) * hypot(a, b.exp()) + a.hypot(b); },
          in({3, 4}, -2, 2), in({4}, -2, 2)),
      unary(
          "var and std over one int dim", [](const Tensor& x) { return x.var(1) + x.std(0, false).sum(); },
          in({4, 5})),
      binary(
          "cat and stack",
          [](auto& a, auto& b) {
            return cat({a, b.exp(), a * 2}, 1).sum(0) + stack({a.sum(1), b.sum(1)}, 1).sum();
          },
          in({3, 2}), in({3, 4})),
      unary(
          "chunk and split",
          [](const Tensor& x) {
            auto c = x.chunk(3, 1);
            auto s = x.split(std::vector<int64_t>{1, 3}, 0);
            return (c[0] * c[2] + c[1].exp()).sum(1) + s[1].sum(1).sum() + s[0].sum();
          },
          in({4, 6})),
      unary(
          "tril and triu", [](const Tensor& x) { return x.tril() * 2 + x.triu(1).exp() + tril(x, -1); },
          in({2, 4, 4})),
      binary(
          "masked_fill with a causal mask",
          [](auto& a, auto&) {
            Tensor causal = ones({4, 4}, TensorOptions(kBool).device(a.device())).triu(1);
            return a.masked_fill(causal, -1e9).softmax(-1);
          },
          in({2, 4, 4}), in({1})),
      unary(
          "interpolate: nearest, linear, bilinear with and without aligned corners",
          [](const Tensor& x) {
            using nn::InterpolateMode;
            using nn::InterpolateOptions;
            using nn::functional::interpolate;
            const InterpolateOptions twice = InterpolateOptions().scale_factor({2.0});
            const InterpolateOptions aligned = InterpolateOptions().size({4, 6}).align_corners(true);
            const InterpolateOptions linear = InterpolateOptions().scale_factor({1.5});
            return interpolate(x, InterpolateOptions().size({5, 7})).sum() +
                   interpolate(x, InterpolateOptions(twice).mode(InterpolateMode::Bilinear))
                       .exp()
                       .sum() +
                   interpolate(x, InterpolateOptions(aligned).mode(InterpolateMode::Bilinear))
                       .pow(2)
                       .sum() +
                   interpolate(x.flatten(2), InterpolateOptions(linear).mode(InterpolateMode::Linear))
                       .sin()
                       .sum();
          },
          in({2, 2, 3, 4})),
      binary(
          "huber_loss and a mask made with & | ~",
          [](auto& a, auto& b) {
            const Tensor mask = (a.gt(0) & b.lt(0.5)) | ~a.lt(1.5);
            return nn::functional::huber_loss(a, b, nn::Reduction::Mean, 0.7) +
                   where(mask, a * b, a - b).sum();
          },
          in({3, 4}), in({3, 4})),
      Case{"index_select and embedding",
           {in({5, 3}), indices({4}, 5)},
           [](V v) {
             return v[0].index_select(0, v[1]) * 2 +
                    embedding(v[1].reshape({2, 2}), v[0]).reshape({4, 3}) + v[0].index_select(1, v[1].remainder(3)).sum(0, true).t();
           }},
      Case{"embedding rows and their gradient (a blocked scatter_add), index_add",
           {in({6, 16}), indices({5}, 6), in({5, 16})},
           [](V v) {
             Tensor e = embedding(v[1].reshape({5, 1}), v[0]).squeeze(1);  // [5, 16], repeated rows
             return (e * v[2]).tanh() + v[0].index_add(0, v[1], v[2] * 0.5).narrow(0, 1, 5);
           }},
      Case{"scatter_add along dim 0 of a transposed input, repeated and narrower indices",
           {in({4, 3}), indices({2, 3}, 3), in({3, 3})},
           [](V v) {
             Tensor base = v[0].t();  // [3, 4]: a view, read with its strides
             return base.scatter_add(0, v[1].narrow(1, 0, 2), v[2]).exp() + base.gather(0, v[1]).sum();
           }},
      Case{"gather and scatter_add",
           {in({3, 5}), indices({3, 4}, 5)},
           [](V v) {
             Tensor g = v[0].gather(1, v[1]);
             return g.exp() + v[0].scatter_add(1, v[1], g * g).sum(1, true);
           }},
      unary(
          "basic indexing: slices, integers, None, Ellipsis",
          [](const Tensor& x) {
            using namespace indexing;
            return x.index({Slice(1, None), 0}).sum(0) * 2 + x.index({Ellipsis, Slice(None, 3), 1}).sum() +
                   x.index({None, 2, Slice(), 3}).sum();
          },
          in({3, 4, 5})),
      unary(
          "silu, gelu (tanh), leaky_relu, softplus",
          [](const Tensor& x) {
            return silu(x) + gelu(x, "tanh") * 2 + leaky_relu(x, 0.2) + softplus(x * 5, 2.0, 4.0);
          },
          given({6}, {-2.5, -1.1, -0.3, 0.2, 0.9, 2.7})),
      Case{"layer_norm",
           {in({3, 2, 8}), in({2, 8}), in({2, 8})},
           [](V v) { return layer_norm(v[0], {2, 8}, v[1], v[2]); }},
      Case{"batch_norm, training, with running statistics",
           {in({4, 3, 2, 2}), in({3}), in({3})},
           [](V v) {
             const TensorOptions o = TensorOptions(v[0].dtype()).device(v[0].device());
             Tensor mean = zeros({3}, o), var = ones({3}, o);
             Tensor y = batch_norm(v[0], mean, var, v[1], v[2], true, 0.1);
             // Evaluation mode with other statistics: the updated running ones
             // are detached, so finite differences would see through them.
             Tensor m2 = full({3}, 0.1, o), v2 = full({3}, 2.0, o);
             return y + batch_norm(v[0], m2, v2, Tensor(), Tensor(), false).sum();
           }},
      Case{"nll_loss with ignore_index",
           {in({4, 5}, -2, 2), indices({4}, 5)},
           [](V v) {
             const TensorOptions i = TensorOptions(kInt64).device(v[1].device());
             Tensor t = where(v[1].eq(1), full({}, -100, i), v[1]);  // class 1 is ignored
             return nll_loss(v[0].log_softmax(1), t, nn::Reduction::Mean);
           }},
      Case{"cross entropy with label smoothing",
           {in({4, 5}, -2, 2), indices({4}, 5)},
           [](V v) {
             nn::CrossEntropyOptions o;
             o.label_smoothing = 0.1;
             return cross_entropy(v[0], v[1], o);
           }},
      // The adaptive softmax's computation (nn::AdaptiveLogSoftmaxWithLoss with its
      // weights passed): head with a bias, clusters of 3 and 3 classes projected to 4
      // and 2 features, all 120 weights in one captured tensor.
      Case{"adaptive log-softmax: output, loss and log_prob (AdaptiveLogSoftmaxWithLoss)",
           {in({6, 8}), in({120}), indices({6}, 10)},
           [](V v) {
             int64_t at = 0;
             auto take = [&](Shape s) {
               Tensor w = v[1].narrow(0, at, numel(s)).reshape(s);
               at += numel(s);
               return w;
             };
             const Tensor hw = take({6, 8}), hb = take({6});
             const nn::functional::AdaptiveTail tail{{take({4, 8}), take({3, 4})},
                                                     {take({2, 8}), take({3, 2})}};
             const nn::ASMoutput r =
                 nn::functional::adaptive_log_softmax_with_loss(v[0], v[2], hw, hb, tail);
             const Tensor lp = nn::functional::adaptive_log_prob(v[0], hw, hb, tail);
             return cat({r.output, r.loss.reshape({1}), lp.reshape({-1})}, 0);
           }},
      binary(
          "binary cross entropy, with logits",
          [](auto& a, auto& b) {
            Tensor y = b.gt(0).to(a.dtype());
            return binary_cross_entropy(a.sigmoid(), y) +
                   binary_cross_entropy_with_logits(a * 3, y, nn::Reduction::Sum) +
                   binary_cross_entropy_with_logits(a, y, nn::Reduction::Mean, b.abs() + 0.5);
          },
          in({3, 4}), in({3, 4})),
      unary(
          "dropout (the same draws in every mode)",
          [](const Tensor& x) { return dropout(x.exp(), 0.3, true) + dropout(x, 0.5, false); },
          in({6, 5})),
      unary(
          "rand, randn and randint inside the function",
          [](const Tensor& x) {
            const TensorOptions o = TensorOptions(x.dtype()).device(x.device());
            return x * rand({3, 4}, o) + randn({4}, o) +
                   randint(0, 5, {3, 1}, TensorOptions(kInt64).device(x.device())).to(x.dtype());
          }),
      unary(
          "randint over a range wider than 2^63, and a generator seeded inside the function",
          [](const Tensor& x) {
            const TensorOptions o = TensorOptions(x.dtype()).device(x.device());
            const TensorOptions i = TensorOptions(kInt64).device(x.device());
            Generator g(x.device());
            g.manual_seed(5);
            // A quarter of first attempts are rejected over 3 * 2^62 values.
            Tensor wide = randint(INT64_MIN, int64_t(1) << 62, {3, 1}, i).remainder(1000);
            return x * rand({3, 4}, g, o) + randn({4}, g, o) + wide.to(x.dtype()) +
                   randint(-7, 7, {4}, g, i).to(x.dtype());
          }),
  };
}

// Convolution and pooling (frontend/nn_conv.cpp): im2col windows from movement
// ops, a GEMM, window reductions.
std::vector<Case> conv_cases() {
  return {
      Case{"conv2d: padding 1, bias",
           {in({2, 1, 5, 5}), in({3, 1, 3, 3}), in({3})},
           [](V v) { return conv2d(v[0], v[1], v[2], 1, 1).tanh(); }},
      Case{"conv2d: stride, dilation, groups",
           {in({1, 4, 7, 6}), in({4, 2, 2, 3})},
           [](V v) { return conv2d(v[0], v[1], Tensor(), {2, 1}, {1, 0}, {2, 1}, 2); }},
      // Traced on the CPU, a 3x3 depthwise conv takes the direct form (a fused sum
      // over each window); eagerly and on CUDA, im2col and a GEMM.
      Case{"conv2d: 3x3 depthwise, stride 2, bias",
           {in({2, 3, 6, 5}), in({3, 1, 3, 3}), in({3})},
           [](V v) { return conv2d(v[0], v[1], v[2], {2, 1}, 1, 1, 3).tanh(); }},
      unary(
          "max_pool2d: kernel 3, stride 2, padding 1, ceil_mode",
          [](const Tensor& x) { return max_pool2d(x, 3, ExpandingArray2(2), 1, 1, true) * 2; },
          in({1, 2, 6, 5})),
      unary(
          "avg_pool2d (ceil_mode, padding not counted) and adaptive_avg_pool2d",
          [](const Tensor& x) {
            return avg_pool2d(x, 3, ExpandingArray2(2), 1, true, false).sum(1) +
                   adaptive_avg_pool2d(x, {3, 2}).sum();
          },
          in({1, 2, 5, 6})),
  };
}

// Products and sorting (frontend/math_ops.cpp, frontend/sort_ops.cpp): prod as a
// tree of multiplications; sort, argsort, topk, kthvalue and randperm through
// the argsort op (the sort library's radix sort, comparison sort and selection;
// values by gather, gradients by scatter_add). Indices are returned as floats.
std::vector<Case> sort_cases() {
  return {
      unary(
          "prod over a dim and all dims, with a zero and negatives",
          [](const Tensor& x) {
            const DType d = x.dtype();
            return x.prod(1) + prod(x, 0, true).sum() * 2 + x.prod() +
                   (x * 3).to(kInt64).prod(1).to(d);
          },
          given({3, 5},
                {0.7, -1.3, 0.9, 1.1, -0.8, 0.6, 0, 1.2, -0.9, 1.4, -1.1, 0.5, 0.8, -1.2, 1.3})),
      unary(
          "prod without zeros, and over an empty dim",
          [](const Tensor& x) { return x.prod(0) + x.narrow(0, 0, 0).prod(0) + x.prod(); },
          in({6, 3}, 0.5, 1.5)),
      unary(
          "sort, ascending and descending, values and indices",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.sort(1);
            auto [dv, di] = sort(x, 0, true);
            return v * 2 + i.to(d) + (dv * 3 + di.to(d)).sum(0, true);
          },
          in({4, 6})),
      no_fd(unary(
          "sort with ties, stable",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.sort(-1);
            auto [dv, di] = x.sort(-1, true);
            return v + i.to(d) * 10 + dv * 100 + di.to(d) * 1000;
          },
          given({2, 6}, {1, 3, 1, 2, 3, 1, 0, 0, -1, 0, 2, -1}))),
      unary(
          "topk, largest and smallest, and argsort",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.topk(3);
            auto [sv, si] = topk(x, 2, 0, false);
            return (v * 2 + i.to(d)).sum(1, true) + (sv * si.to(d).add(1)).sum() +
                   x * x.argsort(1, true).to(d) + argsort(x, 0).to(d);
          },
          in({4, 5})),
      no_fd(unary(
          "sort of long rows (the radix sort) and topk of a few (the selection), ties and NaN",
          [](const Tensor& x) {
            const DType d = x.dtype();
            const Tensor y = where(x.gt(2.9), x.log(), (x * 4).round());  // NaN above 2.9, many ties
            auto [v, i] = y.sort(1, true);
            auto [tv, ti] = y.topk(4, 1, false);
            return where(v.isnan(), full_like(v, 7), v).sum(1, true) + i.to(d).narrow(1, 0, 4) + tv + ti.to(d) * 3 +
                   y.argsort(0).to(d).sum(0).narrow(0, 0, 4) * 0.1;
          },
          in({2, 700}))),
      unary(
          "kthvalue and the gradient of sorted values through gather",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.kthvalue(3, 1, true);
            auto [w, j] = kthvalue(x, 2, 0);
            auto [sv, si] = x.sort(0);
            return v * 2 + i.to(d) + (w * w).sum() + j.to(d).sum() + (sv.exp() * sv).sum(0, true);
          },
          in({4, 5})),
      unary(
          "randperm inside the function",
          [](const Tensor& x) {
            const DType d = x.dtype();
            const TensorOptions i = TensorOptions(kInt64).device(x.device());
            return x * randperm(5, i).to(d) + x.index_select(0, randperm(3, i)) +
                   randperm(5, TensorOptions(d).device(x.device()));
          },
          in({3, 5})),
  };
}

}  // namespace

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> v;
    for (auto group : {table_math_cases(), table_composite_cases(), table_fold_cases(),
                       unary_cases(), binary_cases(), reduction_cases(), movement_cases(),
                       matmul_cases(), creation_and_autograd_cases(), convention_cases(),
                       model_cases(), conv_cases(), sort_cases()})
      v.insert(v.end(), group.begin(), group.end());
    return v;
  }();
  return all;
}

const std::vector<std::pair<OpKind, std::string>>& uncovered_ops() {
  static const std::vector<std::pair<OpKind, std::string>> ops = {
      {OpKind::custom,
       "a traced custom function is replaced by its forward and its user-written backward while "
       "tracing; the case 'a custom autograd function' runs both"},
  };
  return ops;
}

}  // namespace kiln::conformance
