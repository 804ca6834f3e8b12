// grad_analysis: the gradient analyses on IR text, checked node by node
// against what eager mode's tape does with the same ops.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/grad_analysis.h"

using namespace kiln;
using passtest::ir;

namespace {

// The ids of the marked nodes, as text ("0 2 3").
std::string marked(const std::vector<char>& m) {
  std::string s;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i]) s += (s.empty() ? "" : " ") + std::to_string(i);
  return s;
}

std::vector<Value> outputs(const Graph& g) {
  return g.outputs;
}

}  // namespace

TEST_CASE("gradient_reach follows differentiable float ops only") {
  // %4 = lt (a bool), %5 = cast to i32, %6 = detach: a gradient reaches them
  // and stops there (y, %1, is reached through none of them).
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %w = param {index=0} : f32[3]
    %a = mul %x, %w
    %c = lt %a, %y
    %i = cast %a {dtype=i32}
    %d = detach %y
    %f = cast %c {dtype=f32}
    %e = exp %a
    %s = add %e, %f
    %t = add %s, %d
    return %t, %i
  )");
  CHECK(marked(gradient_reach(g, {&g.outputs[0], 1})) == "0 2 3 4 6 7 8 9 10");
  // From an integer result nothing flows on.
  CHECK(marked(gradient_reach(g, {&g.outputs[1], 1})) == "5");
  CHECK(marked(gradient_reach(g, outputs(g))) == "0 2 3 4 5 6 7 8 9 10");
}

TEST_CASE("requiring_grad marks what depends on a flagged input through tape ops") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %w = param {index=0} : f32[3]
    %a = mul %x, %y
    %b = mul %y, %w
    %d = detach %a
    %c = gt %b, %x
    %e = exp %d
    return %a, %b, %c, %e
  )");
  // x requires grad: a does; detach, a comparison and what follows do not.
  CHECK(marked(requiring_grad(g, {1, 0}, {0})) == "0 3");
  // w (a captured tensor) requires grad: b does.
  CHECK(marked(requiring_grad(g, {0, 0}, {1})) == "2 4");
  // Indices beyond the flags require no grad (the backward's seeds are such args).
  CHECK(marked(requiring_grad(g, {}, {})) == "");
  CHECK(marked(requiring_grad(g, {0, 1}, {})) == "1 3 4");
}

TEST_CASE("vjp_reads says which operands and results a VJP saves") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %m = mul %x, %y
    %a = add %x, %y
    %e = exp %x
    %r = relu %x
    %s = sum %x {dims=[0], keepdim=0}
    return %m, %a, %e, %r, %s
  )");
  // mul: x's gradient reads y and y's reads x; none reads the product.
  CHECK(vjp_reads(g, 2, {true, true}, 0));
  CHECK(vjp_reads(g, 2, {true, true}, 1));
  CHECK_FALSE(vjp_reads(g, 2, {true, true}, -1));
  CHECK_FALSE(vjp_reads(g, 2, {true, false}, 0));  // only x's gradient: reads y alone
  CHECK(vjp_reads(g, 2, {true, false}, 1));
  // add reads nothing; exp reads its result, not its operand.
  for (int64_t w : {-1, 0, 1}) CHECK_FALSE(vjp_reads(g, 3, {true, true}, w));
  CHECK(vjp_reads(g, 4, {true}, -1));
  CHECK_FALSE(vjp_reads(g, 4, {true}, 0));
  // sum reads neither (its gradient is an expand of the seed).
  CHECK_FALSE(vjp_reads(g, 6, {true}, 0));
  CHECK_FALSE(vjp_reads(g, 6, {true}, -1));
  // The op form gives the same answers, and a custom op is assumed to read everything.
  CHECK(vjp_reads(OpKind::mul, {}, {g.type(Value(0)), g.type(Value(1))}, {true, true}, 1));
  CHECK(vjp_reads(OpKind::custom, {}, {g.type(Value(0))}, {true}, 0));
}

TEST_CASE("freed_read finds the first node whose saved values a backward reads") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %a = add %x, %y
    %m = mul %a, %y
    %e = exp %a
    %s = add %m, %e
    return %s, %a
  )");
  const std::vector<char> rg = requiring_grad(g, {1, 1}, {});
  CHECK(marked(rg) == "0 1 2 3 4 5");
  // Freed or not, the first node on the way that saves something: the mul (%3).
  CHECK(freed_read(g, {&g.outputs[0], 1}, rg) == 3);
  // Only the exp (%4) was freed by an earlier backward: that is the one found.
  std::vector<char> freed(g.size(), 0);
  freed[4] = 1;
  CHECK(freed_read(g, {&g.outputs[0], 1}, rg, &freed) == 4);
  // From %a only the add is reached, and it saves nothing.
  CHECK(freed_read(g, {&g.outputs[1], 1}, rg) == kNoNode);
  // Nothing freed: nothing found; and a node that requires no grad is no tape node.
  const std::vector<char> none;
  CHECK(freed_read(g, {&g.outputs[0], 1}, rg, &none) == kNoNode);
  CHECK(freed_read(g, {&g.outputs[0], 1}, requiring_grad(g, {}, {})) == kNoNode);
  // With only y requiring grad, mul still reads a (for y's gradient), exp saves its result.
  const std::vector<char> rg_y = requiring_grad(g, {0, 1}, {});
  CHECK(freed_read(g, {&g.outputs[0], 1}, rg_y) == 3);
}

TEST_CASE("saved_values_read: what a backward from the roots reads of what the ops saved") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %m = mul %x, %y
    %e = exp %m
    %s = sum %e {dims=[0], keepdim=0}
    %t = tanh %y
    return %s, %t
  )");
  const std::vector<SavedValue> saved = {
      {2, 0, {true, true}},   // 0: mul's x, read for y's gradient
      {2, 1, {true, true}},   // 1: mul's y, read for x's gradient
      {2, -1, {true, true}},  // 2: mul's result: its VJP does not read it
      {2, 1, {false, true}},  // 3: mul's y when only y needs a gradient: not read
      {3, 0, {true}},         // 4: exp's operand: its VJP reads its result instead
      {3, -1, {true}},        // 5: exp's result
      {5, -1, {true}},        // 6: tanh's result, which a gradient of %s does not reach
  };
  CHECK(saved_values_read(g, {&g.outputs[0], 1}, saved) == std::vector<size_t>{0, 1, 5});
  CHECK(saved_values_read(g, {&g.outputs[1], 1}, saved) == std::vector<size_t>{6});
  CHECK(saved_values_read(g, g.outputs, {}).empty());
}
