// The autodiff pass: path finding, accumulation over several paths, values
// with no path, integer operands, locations, seeds, custom functions, and
// second derivatives through its own output.
#include "passes/autodiff.h"

#include <doctest/doctest.h>

#include <cmath>

#include "grad_check.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/vjp.h"

namespace kiln::test {
namespace {

/// Runs autodiff(g, wrt) (verifying the result) and interprets it with the
/// given args followed by a seed of 1 per output (all outputs must be scalars).
std::vector<std::vector<double>> gradients(const Graph& g, std::span<const Value> wrt,
                                           std::vector<HostArray> args) {
  Graph ad = autodiff(g, wrt);
  verify(ad);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    args.push_back(array_of(g.type(g.outputs[i]), {1.0}));
  }
  const std::vector<HostArray> out = interpret(ad, args);
  std::vector<std::vector<double>> grads;
  for (size_t i = g.outputs.size(); i < out.size(); ++i) grads.push_back(values_of(out[i]));
  return grads;
}

size_t count_ops(const Graph& g, OpKind k) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == k;
  return n;
}

TEST_CASE("autodiff as IR text: a broadcast product under exp") {
  const Graph g = parse_graph(R"(%0 = arg {index=0} : f32[3,4]
%1 = arg {index=1} : f32[4]
%2 = mul %0, %1 : f32[3,4]
%3 = exp %2 : f32[3,4]
%4 = sum %3 {dims=[0,1], keepdim=0} : f32[]
return %4
)");
  const Graph ad = autodiff(g, std::vector<Value>{Value(0), Value(1)});
  verify(ad);
  CHECK(ad.str() == R"(%0 = arg {index=0} : f32[3,4]
%1 = arg {index=1} : f32[4]
%2 = mul %0, %1 : f32[3,4]
%3 = exp %2 : f32[3,4]
%4 = sum %3 {dims=[0,1], keepdim=0} : f32[]
%5 = arg {index=2} : f32[]
%6 = reshape %5 {shape=[1,1]} : f32[1,1]
%7 = expand %6 {shape=[3,4]} : f32[3,4]
%8 = mul %7, %3 : f32[3,4]
%9 = mul %8, %1 : f32[3,4]
%10 = mul %8, %0 : f32[3,4]
%11 = sum %10 {dims=[0], keepdim=0} : f32[4]
return %4, %9, %11
)");
}

TEST_CASE("autodiff as IR text: max over rows of a matmul") {
  const Graph g = parse_graph(R"(%0 = arg {index=0} : f32[2,3]
%1 = arg {index=1} : f32[3,5]
%2 = matmul %0, %1 : f32[2,5]
%3 = max %2 {dims=[1], keepdim=0} : f32[2]
return %3
)");
  const Graph ad = autodiff(g, std::vector<Value>{Value(0), Value(1)});
  verify(ad);
  // The mask of maxima, the gradient shared among ties, then g @ W^T and x^T @ g.
  CHECK(ad.str() == R"(%0 = arg {index=0} : f32[2,3]
%1 = arg {index=1} : f32[3,5]
%2 = matmul %0, %1 : f32[2,5]
%3 = max %2 {dims=[1], keepdim=0} : f32[2]
%4 = arg {index=2} : f32[2]
%5 = reshape %3 {shape=[2,1]} : f32[2,1]
%6 = eq %2, %5 : bool[2,5]
%7 = cast %6 {dtype=f32} : f32[2,5]
%8 = sum %7 {dims=[1], keepdim=1} : f32[2,1]
%9 = reshape %4 {shape=[2,1]} : f32[2,1]
%10 = div %9, %8 : f32[2,1]
%11 = mul %7, %10 : f32[2,5]
%12 = permute %1 {perm=[1,0]} : f32[5,3]
%13 = matmul %11, %12 : f32[2,3]
%14 = permute %0 {perm=[1,0]} : f32[3,2]
%15 = matmul %14, %11 : f32[3,5]
return %3, %13, %15
)");
}

TEST_CASE("gradients along several paths are summed: d/dx sum(x*x + x) = 2x + 1") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  g.outputs = {sum_all(b, b.add(b.mul(x, x), x))};
  const auto grads = gradients(g, std::vector<Value>{x}, {array_of(f64({3}), {1.0, -2.0, 0.5})});
  CHECK(grads[0] == std::vector<double>{3.0, -3.0, 2.0});
}

TEST_CASE("a wrt value with no path to the outputs gets zeros of its type") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({2}));
  const Value z = b.arg(1, TensorType{DType::f32, {2, 3}, {}});
  const Value c = b.arg(2, f64({2}));
  // c reaches the output only through a comparison: no gradient either.
  const Value picked = b.where(b.op(OpKind::gt, {c, b.scalar_like(c, 0.0)}), x, b.neg(x));
  g.outputs = {sum_all(b, b.unary(OpKind::exp, picked))};
  Graph ad = autodiff(g, std::vector<Value>{x, z, c});
  verify(ad);
  REQUIRE(ad.outputs.size() == 4);
  CHECK(ad.type(ad.outputs[2]) == g.type(z));
  CHECK(ad.type(ad.outputs[3]) == g.type(c));
  const auto out =
      interpret(ad, std::vector<HostArray>{
                        array_of(f64({2}), {0.5, -1.0}), array_of(g.type(z), {1, 2, 3, 4, 5, 6}),
                        array_of(f64({2}), {1.0, -1.0}), array_of(f64({}), {1.0})});
  const std::vector<double> gx = values_of(out[1]);
  CHECK(gx[0] == doctest::Approx(std::exp(0.5)));
  CHECK(gx[1] == doctest::Approx(-std::exp(1.0)));
  CHECK(values_of(out[2]) == std::vector<double>(6, 0.0));
  CHECK(values_of(out[3]) == std::vector<double>{0.0, 0.0});
}

TEST_CASE("integer operands get no gradient; float operands get their own dtype") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, TensorType{DType::f32, {3}, {}});
  const Value n = b.arg(1, TensorType{DType::i64, {3}, {}});
  const Value w = b.arg(2, f64({3}));
  // f32 * i64 -> f32, then f32 * f64 -> f64.
  g.outputs = {sum_all(b, b.mul(b.mul(x, n), w))};
  Graph ad = autodiff(g, std::vector<Value>{x, n, w});
  verify(ad);
  CHECK(ad.type(ad.outputs[1]) == g.type(x));
  CHECK(ad.type(ad.outputs[2]) == g.type(n));
  CHECK(ad.type(ad.outputs[3]) == g.type(w));
  const auto out = interpret(
      ad,
      std::vector<HostArray>{array_of(g.type(x), {1.0, 2.0, 3.0}), array_of(g.type(n), {2, 3, 4}),
                             array_of(f64({3}), {0.5, 0.25, 2.0}), array_of(f64({}), {1.0})});
  CHECK(values_of(out[1]) == std::vector<double>{1.0, 0.75, 8.0});
  CHECK(values_of(out[2]) == std::vector<double>{0.0, 0.0, 0.0});
  CHECK(values_of(out[3]) == std::vector<double>{2.0, 6.0, 12.0});
}

/// d/dx sum(op(x, dims=[1])) for a max or min reduction over rows.
std::vector<double> row_extremum_grad(OpKind k, std::initializer_list<double> xs) {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({2, 4}));
  const Attrs rows{{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t{0}}};
  g.outputs = {sum_all(b, b.op(k, {x}, rows))};
  return gradients(g, std::vector<Value>{x}, {array_of(f64({2, 4}), xs)})[0];
}

TEST_CASE("max and min reductions split the gradient evenly among ties") {
  CHECK(row_extremum_grad(OpKind::max, {1, 3, 3, 2, 5, 5, 5, 5}) ==
        std::vector<double>{0, 0.5, 0.5, 0, 0.25, 0.25, 0.25, 0.25});
  CHECK(row_extremum_grad(OpKind::min, {1, 3, 3, 2, -1, 4, -1, -1}) ==
        std::vector<double>{1, 0, 0, 0, 1.0 / 3, 0, 1.0 / 3, 1.0 / 3});
}

TEST_CASE("maximum and minimum split ties 0.5/0.5, also when broadcast") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  const Value y = b.arg(1, f64({}));
  g.outputs = {sum_all(b, b.binary(OpKind::maximum, x, y))};
  const auto grads = gradients(g, std::vector<Value>{x, y},
                               {array_of(f64({3}), {1.0, 2.0, 3.0}), array_of(f64({}), {2.0})});
  CHECK(grads[0] == std::vector<double>{0.0, 0.5, 1.0});
  CHECK(grads[1] == std::vector<double>{1.5});

  Graph h;
  Builder hb(h);
  const Value p = hb.arg(0, f64({2}));
  const Value q = hb.arg(1, f64({2}));
  h.outputs = {sum_all(hb, hb.binary(OpKind::minimum, p, q))};
  const auto hg = gradients(h, std::vector<Value>{p, q},
                            {array_of(f64({2}), {1.0, 4.0}), array_of(f64({2}), {1.0, 3.0})});
  CHECK(hg[0] == std::vector<double>{0.5, 0.0});
  CHECK(hg[1] == std::vector<double>{0.5, 1.0});
}

TEST_CASE("pow at a zero base: finite gradients, as PyTorch") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  const Value y = b.arg(1, f64({3}));
  g.outputs = {sum_all(b, b.binary(OpKind::pow, x, y))};
  const auto grads =
      gradients(g, std::vector<Value>{x, y},
                {array_of(f64({3}), {0.0, 0.0, 2.0}), array_of(f64({3}), {2.0, 0.0, 3.0})});
  // dx = y x^(y-1): 0 at 0^2, 0 (not 0 * inf) at 0^0. dy = x^y log x: 0 where x == 0, y >= 0.
  CHECK(grads[0] == std::vector<double>{0.0, 0.0, 12.0});
  CHECK(grads[1][0] == 0.0);
  CHECK(grads[1][1] == 0.0);
  CHECK(grads[1][2] == doctest::Approx(8.0 * std::log(2.0)));
}

TEST_CASE("gradients with respect to intermediate values and outputs") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({2}));
  const Value y = b.unary(OpKind::exp, x);
  const Value loss = sum_all(b, b.mul(y, y));
  g.outputs = {loss};
  // d loss / dy = 2y; d loss / dx = 2y^2 (through y); d loss / d loss = the seed.
  const auto grads = gradients(g, std::vector<Value>{y, x, loss}, {array_of(f64({2}), {0.0, 1.0})});
  const double e = std::exp(1.0);
  CHECK(grads[0][0] == doctest::Approx(2.0));
  CHECK(grads[0][1] == doctest::Approx(2 * e));
  CHECK(grads[1][0] == doctest::Approx(2.0));
  CHECK(grads[1][1] == doctest::Approx(2 * e * e));
  CHECK(grads[2] == std::vector<double>{1.0});
}

TEST_CASE("autodiff adds one seed arg per output after the largest arg index") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(3, f64({2}));
  const Value y = b.arg(1, f64({2}));
  g.outputs = {sum_all(b, b.mul(x, y)), b.unary(OpKind::exp, x)};
  Graph ad = autodiff(g, std::vector<Value>{x});
  verify(ad);
  const std::vector<NodeId> args = ad.args();
  REQUIRE(args.size() == 4);
  CHECK(ad[args[2]].attrs.i(AttrKey::index) == 4);
  CHECK(ad[args[2]].type() == g.type(g.outputs[0]));
  CHECK(ad[args[3]].attrs.i(AttrKey::index) == 5);
  CHECK(ad[args[3]].type() == g.type(g.outputs[1]));
  // g's nodes come first, unchanged, and its outputs lead the result's.
  for (NodeId id = 0; id < g.size(); ++id) CHECK(ad[id].op == g[id].op);
  CHECK(ad.outputs.size() == 3);
  CHECK(ad.outputs[0] == g.outputs[0]);
  CHECK(ad.outputs[1] == g.outputs[1]);
  // Seeds: 1 for the sum, [2, 3] for exp(x): dx = y + [2, 3] * exp(x).
  const auto out = interpret(ad, std::vector<HostArray>{{},
                                                        array_of(f64({2}), {5.0, 7.0}),
                                                        {},
                                                        array_of(f64({2}), {0.0, 1.0}),
                                                        array_of(f64({}), {1.0}),
                                                        array_of(f64({2}), {2.0, 3.0})});
  const std::vector<double> gx = values_of(out[2]);
  CHECK(gx[0] == doctest::Approx(5.0 + 2.0));
  CHECK(gx[1] == doctest::Approx(7.0 + 3.0 * std::exp(1.0)));
}

TEST_CASE("no gradient nodes are kept for operands no wrt value depends on") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({2, 3}));
  const Value w = b.param(0, f64({3, 4}), "w");
  g.outputs = {sum_all(b, b.matmul(x, w))};
  Graph ad = autodiff(g, std::vector<Value>{w});
  verify(ad);
  // The forward matmul and x^T @ g; no g @ w^T for x.
  CHECK(count_ops(ad, OpKind::matmul) == 2);
}

TEST_CASE("gradient nodes carry the forward node's source location") {
  Graph g;
  Builder b(g);
  const SourceLoc forward("model.cpp", 42);
  const Value x = b.arg(0, f64({3}));
  b.loc = forward;
  const Value y = b.unary(OpKind::tanh, x);
  b.loc = SourceLoc("loss.cpp", 7);
  g.outputs = {sum_all(b, y)};
  Graph ad = autodiff(g, std::vector<Value>{x});
  verify(ad);
  bool saw_tanh_grad = false;
  for (NodeId id = static_cast<NodeId>(g.size()); id < ad.size(); ++id) {
    const Node& n = ad[id];
    if (n.op == OpKind::arg) continue;
    INFO("node ", id, " ", op_name(n.op), " at ", n.loc.str());
    CHECK((n.loc == forward || n.loc == SourceLoc("loss.cpp", 7)));
    saw_tanh_grad |= n.loc == forward;
  }
  CHECK(saw_tanh_grad);
  CHECK(b.loc == SourceLoc("loss.cpp", 7));
}

TEST_CASE("build_gradients works on a graph being built") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("step.cpp", 3);
  const Value x = b.arg(0, f64({2}));
  const Value loss = sum_all(b, b.mul(b.unary(OpKind::sin, x), x));
  const Value seed = b.ones_like(loss);
  const std::vector<Value> grads =
      build_gradients(b, std::vector<Value>{loss}, std::vector<Value>{seed}, std::vector<Value>{x});
  CHECK(b.loc == SourceLoc("step.cpp", 3));
  g.outputs = {loss, grads[0]};
  verify(g);
  const auto out = interpret(g, std::vector<HostArray>{array_of(f64({2}), {0.5, -1.0})});
  const std::vector<double> gx = values_of(out[1]);
  CHECK(gx[0] == doctest::Approx(std::cos(0.5) * 0.5 + std::sin(0.5)));
  CHECK(gx[1] == doctest::Approx(std::cos(-1.0) * -1.0 + std::sin(-1.0)));
}

TEST_CASE("custom nodes call the caller's CustomVjp with every result and its gradient") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  // A custom function returning (2x, x^2); only the first result is used.
  const NodeId call =
      b.op_multi(OpKind::custom, {x}, Attrs{{AttrKey::fn, int64_t{7}}}, {f64({3}), f64({3})});
  g.outputs = {sum_all(b, b.mul(Value(call, 0), Value(call, 0)))};

  std::vector<Value> seen_outs, seen_grads;
  const CustomVjp custom = [&](Builder& cb, const Node& n, const std::vector<Value>& outs,
                               const std::vector<Value>& grads) {
    seen_outs = outs;
    seen_grads = grads;
    const Value x0 = n.operands[0];
    const Value d0 = cb.mul(grads[0], cb.scalar_like(grads[0], 2.0));
    const Value d1 = cb.mul(grads[1], cb.mul(x0, cb.scalar_like(x0, 2.0)));
    return std::vector<Value>{cb.add(d0, d1)};
  };
  Graph ad = autodiff(g, std::vector<Value>{x}, custom);
  verify(ad);

  REQUIRE(seen_outs.size() == 2);
  CHECK(seen_outs[0] == Value(call, 0));
  CHECK(seen_outs[1] == Value(call, 1));
  REQUIRE(seen_grads.size() == 2);

  InterpretOptions opts;
  opts.custom = [](const Node&, std::span<const HostArray> in) {
    const std::vector<double> v = values_of(in[0]);
    std::vector<double> twice, square;
    for (double e : v) {
      twice.push_back(2 * e);
      square.push_back(e * e);
    }
    return std::vector<HostArray>{array_of(in[0].type, twice), array_of(in[0].type, square)};
  };
  std::vector<HostArray> params;
  const auto out = interpret(
      ad, std::vector<HostArray>{array_of(f64({3}), {1.0, -2.0, 0.5}), array_of(f64({}), {1.0})},
      params, opts);
  // d/dx sum((2x)^2) = 8x; the unused result's gradient is zeros.
  CHECK(values_of(out[1]) == std::vector<double>{8.0, -16.0, 4.0});
}

TEST_CASE("a custom node differentiated without a CustomVjp is an error naming its line") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  b.loc = SourceLoc("custom.cpp", 11);
  const NodeId call = b.op_multi(OpKind::custom, {x}, Attrs{{AttrKey::fn, int64_t{1}}}, {f64({3})});
  g.outputs = {sum_all(b, Value(call, 0))};
  CHECK_THROWS_WITH_AS(autodiff(g, std::vector<Value>{x}), doctest::Contains("custom.cpp:11"),
                       Error);
}

// ---- Second derivatives: autodiff applied to its own output ----

TEST_CASE("second derivative of sum(x^3) is 6x, by mul and by pow") {
  for (bool use_pow : {false, true}) {
    CAPTURE(use_pow);
    Graph g;
    Builder b(g);
    const Value x = b.arg(0, f64({4}));
    const Value cube =
        use_pow ? b.binary(OpKind::pow, x, b.scalar_like(x, 3.0)) : b.mul(b.mul(x, x), x);
    g.outputs = {sum_all(b, cube)};
    Graph first = autodiff(g, std::vector<Value>{x});  // outputs: loss, 3x^2
    verify(first);
    first.outputs.erase(first.outputs.begin());
    Graph second = autodiff(first, std::vector<Value>{x});  // outputs: 3x^2, 6x * v
    verify(second);
    const std::vector<double> xs{1.0, -2.0, 0.5, 3.0};
    const auto out =
        interpret(second, std::vector<HostArray>{array_of(f64({4}), xs), array_of(f64({}), {1.0}),
                                                 array_of(f64({4}), {1.0, 1.0, 1.0, 1.0})});
    const std::vector<double> d1 = values_of(out[0]), d2 = values_of(out[1]);
    for (size_t i = 0; i < xs.size(); ++i) {
      CHECK(d1[i] == doctest::Approx(3 * xs[i] * xs[i]));
      CHECK(d2[i] == doctest::Approx(6 * xs[i]));
    }
  }
}

TEST_CASE("third derivative of sum(sin(x)) is -cos(x)") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  g.outputs = {sum_all(b, b.unary(OpKind::sin, x))};
  Graph d = g;
  for (int order = 0; order < 3; ++order) {
    d = autodiff(d, std::vector<Value>{x});
    verify(d);
    d.outputs.erase(d.outputs.begin());  // keep only the new derivative
  }
  const std::vector<double> xs{0.3, -1.2, 2.0};
  std::vector<HostArray> args{array_of(f64({3}), xs), array_of(f64({}), {1.0})};
  args.push_back(array_of(f64({3}), {1.0, 1.0, 1.0}));
  args.push_back(array_of(f64({3}), {1.0, 1.0, 1.0}));
  const std::vector<double> d3 = values_of(interpret(d, args)[0]);
  for (size_t i = 0; i < xs.size(); ++i) CHECK(d3[i] == doctest::Approx(-std::cos(xs[i])));
}

TEST_CASE("Hessian-vector product of sum(tanh(x @ W)) matches finite differences") {
  const GradCase c{"sum(tanh(x @ W))",
                   OpKind::matmul,
                   {InputSpec{{3, 4}}, InputSpec{{4, 2}}},
                   [](Builder& b, const std::vector<Value>& v) {
                     return b.unary(OpKind::tanh, b.matmul(v[0], v[1]));
                   }};
  check_gradients(c, /*seed=*/7);
}

TEST_CASE("Hessian-vector product of a small MLP loss matches finite differences") {
  const GradCase c{
      "sum((gelu(x @ W1 + b1) @ W2 - y)^2) / 10",
      OpKind::matmul,
      {InputSpec{{5, 3}}, InputSpec{{3, 4}}, InputSpec{{4}}, InputSpec{{4, 2}}, InputSpec{{5, 2}}},
      [](Builder& b, const std::vector<Value>& v) {
        const Value h = b.unary(OpKind::gelu, b.add(b.matmul(v[0], v[1]), v[2]));
        const Value e = b.sub(b.matmul(h, v[3]), v[4]);
        return b.div(sum_all(b, b.mul(e, e)), b.scalar_like(e, 10.0));
      }};
  check_gradients(c, /*seed=*/3);
}

TEST_CASE("split_forward_backward saves what the gradient reads, and an updated parameter's old value") {
  // loss = sum(exp(x * w)); then w is updated in place to w - 1. The gradient
  // reads exp's result and, through d(x*w)/dx = w, the parameter's old value.
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, f64({3}));
  const Value w = b.param(0, f64({3}), "w");
  const Value e = b.unary(OpKind::exp, b.mul(x, w));
  const Value loss = sum_all(b, e);
  g.updates.push_back({0, b.sub(w, b.scalar_like(w, 1.0))});
  g.outputs = {loss};
  const size_t forward_size = g.size();
  const Value seed = b.arg(1, g.type(loss));
  const std::vector<Value> grads = build_gradients(b, std::vector<Value>{loss},
                                                   std::vector<Value>{seed}, std::vector<Value>{x});
  const ForwardBackward fb = split_forward_backward(g, forward_size, g.outputs,
                                                    std::vector<NodeId>{seed.node}, grads,
                                                    /*n_args=*/1, std::vector<int64_t>{});
  verify(fb.forward);
  verify(fb.backward);
  CHECK(fb.saved == 2);  // exp's result and w's old value
  REQUIRE(fb.forward.outputs.size() == 1 + fb.saved);
  CHECK(fb.forward.updates.size() == 1);
  CHECK(fb.backward.outputs.size() == 1);
  // The backward's args: x, the saved values, then the seed.
  CHECK(fb.backward.args().size() == 1 + fb.saved + 1);
  CHECK(fb.backward.updates.empty());
  // Nothing to strip: no traced custom function.
  CHECK(print_graph(strip_traced_custom(fb.forward)) == print_graph(fb.forward));
}

}  // namespace
}  // namespace kiln::test
