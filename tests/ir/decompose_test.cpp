// Composite ops (ops.def's decomp): the Builder expands them into their ops,
// their type is their expansion's, and no graph may hold one.
#include <doctest/doctest.h>

#include "ir/decompose.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_test_util.h"

using namespace kiln;
using test::ty;

TEST_CASE("the builder expands a composite into its expansion's ops") {
  Graph g;
  Builder b(g);
  const Value x = b.arg(0, ty(DType::f32, {2, 3}));
  g.outputs = {b.unary(OpKind::softsign, x)};
  verify(g);
  CHECK(print_graph(g) ==
        "%0 = arg {index=0} : f32[2,3]\n"
        "%1 = abs %0 : f32[2,3]\n"
        "%2 = constant {value=1.0} : f32[]\n"
        "%3 = add %2, %1 : f32[2,3]\n"
        "%4 = div %0, %3 : f32[2,3]\n"
        "return %4\n");
  // An integer operand: the number is a float constant, as 1 + x.abs() makes it.
  Graph h;
  Builder c(h);
  h.outputs = {c.unary(OpKind::softsign, c.arg(0, ty(DType::i32, {4})))};
  CHECK(print_graph(h).find("%2 = constant {value=1.0} : f32[]") != std::string::npos);
  CHECK(h.type(h.outputs[0]) == ty(DType::f32, {4}));
}

TEST_CASE("every composite's type is its expansion's, and it needs nothing else") {
  int composites = 0;
  for (OpKind k : all_ops()) {
    if (!is_composite(k)) continue;
    ++composites;
    CAPTURE(op_name(k));
    const OpInfo& info = op_info(k);
    CHECK(info.differentiable);             // through its expansion
    CHECK(info.scalar == ScalarRule::decomp);
    CHECK(is_elementwise(k));
    for (DType dt : {DType::f32, DType::f64, DType::i32}) {
      std::vector<TensorType> in(size_t(info.arity), ty(dt, {2, 3}));
      Graph g;
      Builder b(g);
      std::vector<Value> args;
      for (size_t i = 0; i < in.size(); ++i) args.push_back(b.arg(int64_t(i), in[i]));
      const Value v = b.op(k, args);
      verify(g);
      CHECK(g.type(v) == infer_type(k, in, {}));
      CHECK(is_floating(g.type(v).dtype));
      for (const Node& n : g.nodes()) CHECK_FALSE(is_composite(n.op));
    }
  }
  CHECK(composites >= 2);
}

TEST_CASE("a composite's errors name it and the op of its expansion that refused") {
  const std::vector<TensorType> in = {ty(DType::b8, {3})};
  CHECK_THROWS_WITH_AS(infer_type(OpKind::softsign, in, {}),
                       doctest::Contains("softsign: abs: expected a numeric tensor, got bool"),
                       Error);
}

TEST_CASE("no graph holds a composite: the verifier rejects a parsed one") {
  CHECK_THROWS_WITH_AS(parse_graph("%0 = arg {index=0} : f32[3]\n"
                                   "%1 = mish %0 : f32[3]\n"
                                   "return %1\n"),
                       doctest::Contains("expected no composite op"), Error);
}
