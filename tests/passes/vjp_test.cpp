// Every VJP rule in the op table against finite differences, first and second
// order, with broadcasting, keepdim, strided slices, padding and batched matmul.
#include <doctest/doctest.h>

#include <set>

#include "grad_check.h"
#include "ir/vjp.h"

namespace kiln::test {
namespace {

using Args = const std::vector<Value>&;

Attrs reduce_attrs(std::vector<int64_t> dims, bool keepdim) {
  return Attrs{{AttrKey::dims, std::move(dims)}, {AttrKey::keepdim, int64_t{keepdim}}};
}

Attrs slice_attrs(int64_t dim, int64_t start, int64_t end, int64_t step) {
  return Attrs{
      {AttrKey::dim, dim}, {AttrKey::start, start}, {AttrKey::end, end}, {AttrKey::step, step}};
}

Attrs pad_attrs(int64_t dim, int64_t low, int64_t high, int64_t interior) {
  return Attrs{{AttrKey::dim, dim},
               {AttrKey::low, low},
               {AttrKey::high, high},
               {AttrKey::interior, interior}};
}

GradCase unary_case(OpKind k, InputSpec in) {
  return GradCase{
      op_name(k), k, {std::move(in)}, [k](Builder& b, Args x) { return b.unary(k, x[0]); }};
}

GradCase binary_case(OpKind k, std::string name, InputSpec a, InputSpec c) {
  return GradCase{std::string(op_name(k)) + " " + name,
                  k,
                  {std::move(a), std::move(c)},
                  [k](Builder& b, Args x) { return b.binary(k, x[0], x[1]); }};
}

GradCase reduce_case(OpKind k, Shape shape, std::vector<int64_t> dims, bool keepdim) {
  std::string name = std::string(op_name(k)) + " " + shape_str(shape) + " dims " + shape_str(dims) +
                     (keepdim ? " keepdim" : "");
  return GradCase{name, k, {{shape}}, [=](Builder& b, Args x) {
                    return b.op(k, {x[0]}, reduce_attrs(dims, keepdim));
                  }};
}

InputSpec away_from_zero(Shape s, double lo = 0.2, double hi = 1.0) {
  return InputSpec{std::move(s), lo, hi, /*random_sign=*/true};
}

InputSpec in_range(Shape s, double lo, double hi) {
  return InputSpec{std::move(s), lo, hi};
}

InputSpec given(Shape s, std::vector<double> values) {
  return InputSpec{std::move(s), 0, 0, false, std::move(values)};
}

std::vector<GradCase> gradient_cases() {
  using K = OpKind;
  const Shape s{3, 4};
  std::vector<GradCase> cases = {
      unary_case(K::neg, in_range(s, -1, 1)),
      unary_case(K::abs, away_from_zero(s)),
      unary_case(K::exp, in_range(s, -1, 1)),
      unary_case(K::log, in_range(s, 0.5, 2)),
      unary_case(K::sqrt, in_range(s, 0.5, 2)),
      unary_case(K::rsqrt, in_range(s, 0.5, 2)),
      unary_case(K::sin, in_range(s, -2, 2)),
      unary_case(K::cos, in_range(s, -2, 2)),
      unary_case(K::tanh, in_range(s, -2, 2)),
      unary_case(K::sigmoid, in_range(s, -3, 3)),
      unary_case(K::relu, away_from_zero(s)),
      unary_case(K::gelu, in_range(s, -3, 3)),
      unary_case(K::erf, in_range(s, -2, 2)),
      unary_case(K::log1p, in_range(s, -0.5, 1)),
      unary_case(K::expm1, in_range(s, -1, 1)),
      // Rounding: constant between the integers the inputs stay away from.
      unary_case(K::floor, in_range(s, 0.1, 0.9)),
      unary_case(K::ceil, in_range(s, 0.1, 0.9)),
      unary_case(K::round, in_range(s, 0.1, 0.4)),
      unary_case(K::trunc, in_range(s, 0.1, 0.9)),
      // sign: constant on each side of 0 (PyTorch's zero gradient).
      unary_case(K::sign, in_range(s, 0.1, 0.9)),
      // Around 0.
      GradCase{"gelu near 0",
               K::gelu,
               {InputSpec{{10},
                          0,
                          0,
                          false,
                          {0.0, 0.005, -0.005, 0.0099, -0.0101, 0.02, -0.02, 1e-4, 2.5, -2.5}}},
               [](Builder& b, Args x) { return b.unary(K::gelu, x[0]); }},
      // f64 -> f32 -> f64: the f32 rounding needs a larger step and tolerance.
      GradCase{"cast f64 -> f32 -> f64",
               K::cast,
               {in_range(s, -1, 1)},
               [](Builder& b, Args x) { return b.cast(b.cast(x[0], DType::f32), DType::f64); },
               1e-2,
               1e-4},

      binary_case(K::add, "[3,1] + [4]", in_range({3, 1}, -1, 1), in_range({4}, -1, 1)),
      binary_case(K::add, "[2,3] + []", in_range({2, 3}, -1, 1), in_range({}, -1, 1)),
      binary_case(K::sub, "[2,3] - [3]", in_range({2, 3}, -1, 1), in_range({3}, -1, 1)),
      binary_case(K::sub, "[3] - [2,3]", in_range({3}, -1, 1), in_range({2, 3}, -1, 1)),
      binary_case(K::mul, "[4,1,3] * [2,1]", in_range({4, 1, 3}, -1, 1), in_range({2, 1}, -1, 1)),
      binary_case(K::div, "[3] / [2,3]", in_range({3}, -1, 1), away_from_zero({2, 3}, 0.5, 2)),
      binary_case(K::div, "[2,3] / [2,1]", in_range({2, 3}, -1, 1), away_from_zero({2, 1}, 0.5, 2)),
      binary_case(K::pow, "[3,4] ^ [4]", in_range({3, 4}, 0.5, 2), in_range({4}, -1.5, 2)),
      binary_case(K::maximum, "[3,4] [4]", in_range({3, 4}, -1, 1), in_range({4}, -1, 1)),
      // Quotients 2.1..2.45 in magnitude, away from the jumps at integers.
      binary_case(K::fmod, "[3,4] fmod [4]", in_range({3, 4}, 4.1, 4.4), in_range({4}, 1.8, 1.95)),
      binary_case(K::fmod, "[3] fmod [2,3], negative", in_range({3}, -4.4, -4.1),
                  in_range({2, 3}, 1.8, 1.95)),
      binary_case(K::remainder, "[3,4] remainder [4]", in_range({3, 4}, 4.1, 4.4),
                  in_range({4}, 1.8, 1.95)),
      binary_case(K::remainder, "[3] remainder [2,3], negative", in_range({3}, -4.4, -4.1),
                  in_range({2, 3}, 1.8, 1.95)),
      binary_case(K::minimum, "[2,3] [2,1]", in_range({2, 3}, -1, 1), in_range({2, 1}, -1, 1)),

      binary_case(K::logaddexp, "[3,4] [4]", in_range({3, 4}, -2, 2), in_range({4}, -2, 2)),
      // Scans, forward and from the end; cumprod with zeros (one, two, and a
      // zero first), where the gradient is PyTorch's exact one.
      GradCase{"cumsum [3,4] dim 1",
               K::cumsum,
               {in_range({3, 4}, -1, 1)},
               [](Builder& b,
                  Args x) { return b.op(K::cumsum, {x[0]}, Attrs{{AttrKey::dim, int64_t{1}}}); }},
      GradCase{"cumsum [4,2] dim 0 reverse",
               K::
                   cumsum,
               {in_range({4, 2}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.op(K::cumsum, {x[0]}, Attrs{{AttrKey::dim, int64_t{0}}, {AttrKey::reverse, int64_t{1}}});
               }},
      // Attention: first order (its gradient nodes recompute; no second order).
      GradCase{"attention [2,3,4] x [2,5,4] x [2,5,2]",
               K::attention,
               {in_range({2, 3, 4}, -1, 1), in_range({2, 5, 4}, -1, 1), in_range({2, 5, 2}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.op(K::attention, {x[0], x[1], x[2]},
                             Attrs{{AttrKey::scale, 0.7}, {AttrKey::causal, int64_t{0}}});
               },
               1e-6,
               1e-6,
               false},
      GradCase{"attention causal [4,3] x [6,3] x [6,3]",
               K::attention,
               {in_range({4, 3}, -1, 1), in_range({6, 3}, -1, 1), in_range({6, 3}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.op(K::attention, {x[0], x[1], x[2]},
                             Attrs{{AttrKey::scale, 1.0}, {AttrKey::causal, int64_t{1}}});
               },
               1e-6,
               1e-6,
               false},
      // One cluster of an adaptive softmax: rows 0, 2, 3 and 5 in the cluster
      // [2, 6) (two with one target), rows 1 and 4 outside it (below, above).
      GradCase{
          "cluster_logprob [6,3] x [4,3] start 2",
          K::cluster_logprob,
          {in_range({6, 3}, -1, 1), in_range({4, 3}, -1, 1)},
          [](Builder& b, Args x) {
            const Value t = b.op_typed(
                K::literal, {}, Attrs{{AttrKey::data, std::vector<int64_t>{2, 0, 5, 5, 6, 3}}},
                TensorType{DType::i64, {6}, {}});
            return b.op(K::cluster_logprob, {x[0], x[1], t}, Attrs{{AttrKey::start, int64_t{2}}});
          },
          1e-6,
          1e-6,
          false},
      GradCase{"cumprod [3,5] dim 1",
               K::cumprod,
               {in_range({3, 5}, 0.5, 1.5)},
               [](Builder& b, Args x) {
                 return b.op(K::cumprod, {x[0]}, Attrs{{AttrKey::dim, int64_t{1}}});
               }},
      // At zeros the gradient is exact; its own gradient is not checked there
      // (the elements past the first zero get 0, whose derivative in that zero
      // is not), only away from zeros (the case above).
      GradCase{"cumprod [6] with zeros",
               K::cumprod,
               {given({6}, {0.9, 0.0, 1.3, 0.0, 0.7, 1.1})},
               [](Builder& b, Args x) {
                 return b.op(K::cumprod, {x[0]}, Attrs{{AttrKey::dim, int64_t{0}}});
               },
               1e-6,
               1e-6,
               false},
      GradCase{"cumprod [2,4] dim 1 reverse, zeros first and last",
               K::cumprod,
               {given({2, 4}, {0.0, 1.2, 0.8, 1.1, 1.3, 0.9, 1.2, 0.0})},
               [](Builder& b, Args x) {
                 return b.op(K::cumprod, {x[0]}, Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::reverse, int64_t{1}}});
               },
               1e-6,
               1e-6,
               false},
      GradCase{"logcumsumexp [3,4] dim 1",
               K::logcumsumexp,
               {in_range({3, 4}, -3, 3)},
               [](Builder& b, Args x) {
                 return b.op(K::logcumsumexp, {x[0]}, Attrs{{AttrKey::dim, int64_t{1}}});
               }},
      GradCase{"logcumsumexp [5] reverse",
               K::logcumsumexp,
               {in_range({5}, -40, 40)},
               [](Builder& b, Args x) {
                 return b.op(K::logcumsumexp, {x[0]}, Attrs{{AttrKey::dim, int64_t{0}}, {AttrKey::reverse, int64_t{1}}});
               }},
      // Indices as literals; duplicates add up in the gradient.
      GradCase{"gather [4,3] dim 0, repeated indices",
               K::gather,
               {in_range({4, 3}, -1, 1)},
               [](Builder& b, Args x) {
                 Value idx = b.op_typed(K::literal, {},
                                        Attrs{{AttrKey::data, std::vector<int64_t>{3, 0, 1, 0, 0, 2}}},
                                        TensorType{DType::i64, {2, 3}, {}});
                 return b.op(K::gather, {x[0], idx}, Attrs{{AttrKey::dim, int64_t{0}}});
               }},
      GradCase{"gather [2,5] dim 1, narrower indices",
               K::gather,
               {in_range({2, 5}, -1, 1)},
               [](Builder& b, Args x) {
                 Value idx = b.op_typed(K::literal, {},
                                        Attrs{{AttrKey::data, std::vector<int64_t>{4, 4, 1, 0, 2, 3, 0, 0}}},
                                        TensorType{DType::i64, {2, 4}, {}});
                 return b.op(K::gather, {x[0], idx}, Attrs{{AttrKey::dim, int64_t{-1}}});
               }},
      GradCase{"scatter_add [4,3] dim 0 of [2,3], repeated indices",
               K::scatter_add,
               {in_range({4, 3}, -1, 1), in_range({2, 3}, -1, 1)},
               [](Builder& b, Args x) {
                 Value idx = b.op_typed(K::literal, {},
                                        Attrs{{AttrKey::data, std::vector<int64_t>{3, 0, 3, 3, 1, 0}}},
                                        TensorType{DType::i64, {2, 3}, {}});
                 return b.op(K::scatter_add, {x[0], idx, x[1]}, Attrs{{AttrKey::dim, int64_t{0}}});
               }},

      // where(c > 0, x, y): c gets no gradient (and its finite difference is 0).
      GradCase{"where [3,1] ? [3,4] : [4]",
               K::where,
               {away_from_zero({3, 1}), in_range({3, 4}, -1, 1), in_range({4}, -1, 1)},
               [](Builder& b, Args x) {
                 const Value c = b.op(K::gt, {x[0], b.scalar_like(x[0], 0.0)});
                 return b.where(c, x[1], x[2]);
               }},

      reduce_case(K::sum, {2, 3, 4}, {1}, false),
      reduce_case(K::sum, {2, 3, 4}, {0, 2}, true),
      reduce_case(K::sum, {2, 3, 4}, {0, 1, 2}, false),
      reduce_case(K::sum, {2, 3, 4}, {-1}, true),
      reduce_case(K::max, {3, 5}, {1}, false),
      reduce_case(K::max, {2, 3, 4}, {0, 2}, true),
      reduce_case(K::min, {4, 3}, {0}, false),
      reduce_case(K::min, {2, 3, 4}, {0, 1, 2}, false),

      GradCase{"reshape [2,3,4] -> [6,4]",
               K::reshape,
               {in_range({2, 3, 4}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.reshape(x[0], {6, 4});
               }},
      GradCase{"reshape [2,6] -> [3,2,2]",
               K::reshape,
               {in_range({2, 6}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.reshape(x[0], {3, 2, 2});
               }},
      GradCase{"expand [3,1] -> [2,3,4]",
               K::expand,
               {in_range({3, 1}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.expand(x[0], {2, 3, 4});
               }},
      GradCase{"permute [2,3,4] by [2,0,1]",
               K::permute,
               {in_range({2, 3, 4}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.permute(x[0], {2, 0, 1});
               }},
      GradCase{"slice [3,8] dim 1 1:7:2",
               K::slice,
               {in_range({3, 8}, -1, 1)},
               [](Builder& b, Args x) { return b.op(K::slice, {x[0]}, slice_attrs(1, 1, 7, 2)); }},
      GradCase{"slice [5,2] dim 0 0:5:2",
               K::slice,
               {in_range({5, 2}, -1, 1)},
               [](Builder& b, Args x) { return b.op(K::slice, {x[0]}, slice_attrs(0, 0, 5, 2)); }},
      GradCase{"slice [6] 2:4",
               K::slice,
               {in_range({6}, -1, 1)},
               [](Builder& b, Args x) { return b.op(K::slice, {x[0]}, slice_attrs(0, 2, 4, 1)); }},
      GradCase{"unfold [2,7] dim 1 size 3 step 1 (overlapping)",
               K::unfold,
               {in_range({2, 7}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.op(K::unfold, {x[0]},
                             Attrs{{AttrKey::dim, int64_t{1}},
                                   {AttrKey::size, int64_t{3}},
                                   {AttrKey::step, int64_t{1}}});
               }},
      GradCase{"unfold [9,2] dim 0 size 2 step 3 dilation 2 (a gap at the end)",
               K::unfold,
               {in_range({9, 2}, -1, 1)},
               [](Builder& b, Args x) {
                 return b.op(K::unfold, {x[0]},
                             Attrs{{AttrKey::dim, int64_t{0}},
                                   {AttrKey::size, int64_t{2}},
                                   {AttrKey::step, int64_t{3}},
                                   {AttrKey::dilation, int64_t{2}}});
               }},
      GradCase{"pad [3,2] dim 0 low 1 high 2 interior 1",
               K::pad,
               {in_range({3, 2}, -1, 1)},
               [](Builder& b, Args x) { return b.op(K::pad, {x[0]}, pad_attrs(0, 1, 2, 1)); }},
      GradCase{"pad [2,3] dim 1 interior 2",
               K::pad,
               {in_range({2, 3}, -1, 1)},
               [](Builder& b, Args x) { return b.op(K::pad, {x[0]}, pad_attrs(1, 0, 0, 2)); }},

      binary_case(K::matmul, "[2,3,4] @ [4,5]", in_range({2, 3, 4}, -1, 1),
                  in_range({4, 5}, -1, 1)),
      binary_case(K::matmul, "[2,1,3,4] @ [3,4,5]", in_range({2, 1, 3, 4}, -1, 1),
                  in_range({3, 4, 5}, -1, 1)),
      binary_case(K::matmul, "[3,4] @ [2,4,5]", in_range({3, 4}, -1, 1),
                  in_range({2, 4, 5}, -1, 1)),
      // Broadcast batch dims folded into the gradient's contraction: kept and
      // folded dims interleaved, both operands broadcast, n == k.
      binary_case(K::matmul, "[2,1,3,3] @ [1,4,3,2]", in_range({2, 1, 3, 3}, -1, 1),
                  in_range({1, 4, 3, 2}, -1, 1)),
      binary_case(K::matmul, "[3,1,2,4] @ [3,2,4,3]", in_range({3, 1, 2, 4}, -1, 1),
                  in_range({3, 2, 4, 3}, -1, 1)),
  };
  // Every math op of the op table on inputs from its domain (ops.def's `domain`
  // column), so a new row is checked before it has a case of its own above.
  // A binary one also with its second operand broadcast.
  // And every composite, whose gradient is that of its expansion.
  for (OpKind k : all_ops())
    if (is_math(k) || is_composite(k)) {
      const Domain& d = op_info(k).domain;
      std::vector<GradCase> more;
      if (op_info(k).arity == 1) {
        more.push_back(unary_case(k, in_range(s, d.low(0), d.high(0))));
      } else {
        const Shape row = {s.back()};
        more.push_back(binary_case(k, shape_str(s) + " " + shape_str(s), in_range(s, d.low(0), d.high(0)),
                                   in_range(s, d.low(1), d.high(1))));
        more.push_back(binary_case(k, shape_str(s) + " " + shape_str(row),
                                   in_range(s, d.low(0), d.high(0)), in_range(row, d.low(1), d.high(1))));
      }
      for (GradCase& c : more) {
        c.name += " (a math op of the table)";
        cases.push_back(std::move(c));
      }
    }
  // And every differentiable reduction and scan of the table, the same way.
  for (OpKind k : all_ops()) {
    const OpInfo& info = op_info(k);
    if (!info.differentiable ||
        (info.scalar != ScalarRule::reduce && info.scalar != ScalarRule::scan))
      continue;
    const InputSpec x = in_range({2, 3, 4}, info.domain.low(0), info.domain.high(0));
    const std::string of =
        info.scalar == ScalarRule::scan ? " (a scan of the table)" : " (a reduction of the table)";
    for (int i = 0; i < 2; ++i) {
      const Attrs a =
          info.scalar == ScalarRule::scan
              ? Attrs{{AttrKey::dim, int64_t{i == 0 ? 1 : 0}}, {AttrKey::reverse, int64_t{i}}}
              : reduce_attrs(i == 0 ? std::vector<int64_t>{1} : std::vector<int64_t>{0, 2}, i == 1);
      cases.push_back(GradCase{std::string(op_name(k)) + " [2,3,4] " + std::to_string(i) + of,
                               k,
                               {x},
                               [k, a](Builder& b, Args v) { return b.op(k, {v[0]}, a); }});
    }
  }
  return cases;
}

TEST_CASE("every VJP rule matches finite differences, first and second order") {
  for (const GradCase& c : gradient_cases()) {
    SUBCASE(c.name.c_str()) {
      check_gradients(c);
    }
  }
}

TEST_CASE("attention's gradients are one attention_grad node asking for just the operands wanted") {
  // For every set of operands: one node whose mask names them (1 q, 2 k, 4 v),
  // and gradients equal to those of the node that computes all three.
  const GradCase c{
      "attention causal [2,5,3] x [2,7,3] x [2,7,4]",
      OpKind::attention,
      {in_range({2, 5, 3}, -1, 1), in_range({2, 7, 3}, -1, 1), in_range({2, 7, 4}, -1, 1)},
      [](Builder& b, Args x) {
        return b.op(OpKind::attention, {x[0], x[1], x[2]},
                    Attrs{{AttrKey::scale, 0.6}, {AttrKey::causal, int64_t{1}}});
      }};
  const LossGraph lg = loss_graph(c);
  std::mt19937_64 rng(5);
  std::vector<HostArray> args;
  for (const InputSpec& in : c.inputs) args.push_back(array_of(f64(in.shape), draw(in, rng)));
  args.push_back(array_of(lg.weight_type, uniform(size_t(lg.weight_type.numel()), rng)));
  args.push_back(array_of(f64({}), {1.0}));
  auto gradients = [&](const std::vector<Value>& wrt, int64_t* which) {
    const Graph g = autodiff(lg.g, wrt);
    verify(g);
    int nodes = 0;
    for (const Node& n : g.nodes())
      if (n.op == OpKind::attention_grad) {
        ++nodes;
        *which = n.attrs.i(AttrKey::which);
      }
    CHECK(nodes == 1);
    std::vector<std::vector<double>> r;
    const std::vector<HostArray> out = interpret(g, args);
    for (size_t i = 1; i < out.size(); ++i) r.push_back(values_of(out[i]));
    return r;
  };
  int64_t which = 0;
  const std::vector<std::vector<double>> all = gradients(lg.inputs, &which);
  CHECK(which == 7);
  for (int64_t mask = 1; mask < 7; ++mask) {
    CAPTURE(mask);
    std::vector<Value> wrt;
    std::vector<size_t> index;
    for (size_t i = 0; i < 3; ++i)
      if (mask & (int64_t(1) << i)) {
        wrt.push_back(lg.inputs[i]);
        index.push_back(i);
      }
    const std::vector<std::vector<double>> some = gradients(wrt, &which);
    CHECK(which == mask);
    REQUIRE(some.size() == index.size());
    for (size_t j = 0; j < index.size(); ++j) CHECK(some[j] == all[index[j]]);
  }
}

TEST_CASE("every differentiable op has a gradient case") {
  std::set<OpKind> covered;
  for (const GradCase& c : gradient_cases()) covered.insert(c.op);
  for (OpKind k : all_ops()) {
    INFO("op: ", op_name(k));
    // custom is differentiable through build_gradients' CustomVjp, not a rule.
    // Composites are differentiable through their expansion (ir/decompose.h).
    CHECK(op_info(k).differentiable ==
          (vjp_rule(k) != nullptr || k == OpKind::custom || is_composite(k)));
    if (is_composite(k)) CHECK(covered.count(k) == 1);
    // rebind routes the gradient of one operand's values to the other operand, on
    // purpose unlike its derivative: the conformance matrix checks it against eager.
    // attention_grad's rule is an error (no second derivatives of attention),
    // checked in the frontend's attention test.
    // cluster_logprob_grad's likewise (checked in the frontend's adaptive softmax test).
    if (vjp_rule(k) && k != OpKind::rebind && k != OpKind::attention_grad &&
        k != OpKind::cluster_logprob_grad)
      CHECK(covered.count(k) == 1);
  }
}

}  // namespace
}  // namespace kiln::test
