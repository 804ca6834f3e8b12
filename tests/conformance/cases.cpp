// The case table of the conformance matrix: one or more cases per op of the
// table (which ops a case covers is read off its traced graph), the composites
// users write (mean, var/std, softmax, losses, layer-norm rows, attention), and
// the inputs that break implementations: ties, exact zeros, size-1 broadcast
// dims, empty tensors, non-contiguous views, detach, in-place ops on views and
// no-grad blocks inside the function.
#include <cmath>

#include "case_helpers.h"
#include "conformance.h"
#include "frontend/dispatch.h"

namespace kiln::conformance {
namespace {

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
