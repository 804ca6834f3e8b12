// The verifier rejects malformed graphs with a message naming the node.
#include <doctest/doctest.h>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "ir_test_util.h"

using namespace kiln;
using test::ty;

namespace {

std::string verify_error(const Graph& g) {
  try {
    verify(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// x: f32[3] (arg 0), w: f32[3] (param 0), s = add x w.
Graph small() {
  return parse_graph(
      "%0 = arg {index=0} : f32[3]\n"
      "%1 = param {index=0} : f32[3]\n"
      "%2 = add %0, %1 : f32[3]  @ net.cpp:7\n"
      "return %2\n");
}

#define CHECK_VERIFY_FAILS(g, substr)                            \
  do {                                                           \
    std::string msg_ = verify_error(g);                          \
    CHECK_MESSAGE(msg_.find(substr) != std::string::npos, msg_); \
  } while (0)

}  // namespace

TEST_CASE("well-formed graphs verify") {
  verify(small());
  verify(test::every_op_graph());
  verify(Graph{});
}

TEST_CASE("the verifier checks operands") {
  Graph g = small();
  g.node(2).operands[1] = Value(7);
  CHECK_VERIFY_FAILS(g,
                     "invalid node `%2 = add %0, %?7.0 : f32[3]`: operand 1 (node 7 result 0) is "
                     "not a value defined by an earlier node\n  recorded at net.cpp:7");
  g = small();
  g.node(2).operands[0] = Value(0, 1);
  CHECK_VERIFY_FAILS(g, "operand 0 (node 0 result 1) is not a value defined by an earlier node");
  g = small();
  g.node(2).operands[0] = Value(2);
  CHECK_VERIFY_FAILS(g, "operand 0 (node 2 result 0) is not a value defined by an earlier node");
}

TEST_CASE("the verifier checks arity and result types") {
  Graph g = small();
  g.node(2).operands.push_back(Value(0));
  CHECK_VERIFY_FAILS(g, "add %0, %1, %0 : f32[3]`: expected 2 operands, got 3");
  g = small();
  g.node(2).results[0] = ty(DType::f64, {3});
  CHECK_VERIFY_FAILS(g,
                     "invalid node `%2 = add %0, %1 : f64[3]`: expected result type f32[3] (from "
                     "the op's rules), got f64[3]");
  g = small();
  g.node(2).results.push_back(ty(DType::f32, {3}));
  CHECK_VERIFY_FAILS(g, "expected 1 result, got 2");
  g = small();
  g.node(1).results[0] = ty(DType::f32, {4});
  CHECK_VERIFY_FAILS(g, "add: shapes [3] and [4] cannot be broadcast");
  g = small();
  g.node(1).results[0].device = Device(kCUDA);
  CHECK_VERIFY_FAILS(
      g, "expected all operands on one device, got cpu (operand 0) and cuda:0 (operand 1)");
  g = small();
  g.node(0).operands.push_back(Value(1));
  CHECK_VERIFY_FAILS(g, "expected 0 operands, got 1");
}

TEST_CASE("the verifier checks inputs and creation attributes") {
  Graph g = small();
  Node dup = g[0];
  g.add(dup);
  CHECK_VERIFY_FAILS(g, "invalid node `%3 = arg {index=0} : f32[3]`: a second arg with index 0");
  g = small();
  Node p = g[1];
  g.add(p);
  CHECK_VERIFY_FAILS(g, "a second param with index 0");
  g = small();
  g.node(0).attrs = Attrs{};
  CHECK_VERIFY_FAILS(g, "attribute 'index' is missing");
  g = small();
  g.node(0).attrs = Attrs{{AttrKey::index, 1.0}};
  CHECK_VERIFY_FAILS(g, "attribute 'index' is a float, expected an int");
  g = small();
  g.node(0).attrs = Attrs{{AttrKey::index, int64_t{-1}}};
  CHECK_VERIFY_FAILS(g, "expected index >= 0, got -1");

  Graph c = parse_graph("%0 = constant {value=1.0} : f32[2]\n%1 = literal {data=[1,2]} : i32[2]\n");
  c.node(0).attrs = Attrs{};
  CHECK_VERIFY_FAILS(c, "invalid node `%0 = constant : f32[2]`: attribute 'value' is missing");
  c = parse_graph("%0 = literal {data=[1,2]} : i32[2]\n");
  c.node(0).results[0].shape = {3};
  CHECK_VERIFY_FAILS(c, "expected 3 data elements for i32[3], got 2");
  c = parse_graph("%0 = arg {index=0} : f32[2]\n%1 = cast %0 {dtype=i64} : i64[2]\n");
  c.node(1).attrs = Attrs{};
  CHECK_VERIFY_FAILS(c, "attribute 'dtype' is missing");
  c = parse_graph("%0 = arg {index=0} : i64[]\n%1 = arg {index=1} : i64[2]\n%2 = philox %0, %1\n");
  c.node(2).results[0].dtype = DType::f64;
  CHECK_VERIFY_FAILS(c, "expected result type f32[2] (from the op's rules), got f64[2]");
  c = parse_graph("%0 = arange {start=0, step=1} : i64[4]\n");
  c.node(0).results[0].shape = {2, 2};
  CHECK_VERIFY_FAILS(c, "expected a result of rank 1");
  // Given types a buffer cannot have (#32).
  g = small();
  g.node(0).results[0].dtype = static_cast<DType>(17);
  CHECK_VERIFY_FAILS(g,
                     "result type: expected a dtype (bool, u8, i8, i16, i32, i64, f32 or f64), got DType(17)");
  g = small();
  g.node(1).results[0].shape = {int64_t(1) << 62, 4};
  CHECK_VERIFY_FAILS(g, "is too large: its element count does not fit in 64 bits");
  c = parse_graph("%0 = arg {index=0} : f32[2]\n%1 = cast %0 {dtype=i64} : i64[2]\n");
  c.node(1).attrs = Attrs{{AttrKey::dtype, static_cast<DType>(17)}};
  CHECK_VERIFY_FAILS(c, "cast: expected a dtype (bool, u8, i8, i16, i32, i64, f32 or f64), got DType(17)");
}

TEST_CASE("the verifier checks outputs and updates") {
  Graph g = small();
  g.outputs.push_back(Value(9));
  CHECK_VERIFY_FAILS(g, "output 1 (node 9 result 0) is not a value of the graph");
  g = small();
  g.updates = {{3, Value(2)}};
  CHECK_VERIFY_FAILS(g, "invalid update of param 3: the graph has no param with that index");
  g = small();
  g.updates = {{0, Value(5)}};
  CHECK_VERIFY_FAILS(g, "invalid update of param 0: node 5 result 0 is not a value of the graph");
  g = small();
  g.updates = {{0, Value(2)}, {0, Value(2)}};
  CHECK_VERIFY_FAILS(g, "invalid update of param 0: it is updated twice");
  Graph t = parse_graph(
      "%0 = param {index=0} : f32[3]\n"
      "%1 = cast %0 {dtype=f64} : f64[3]\n"
      "return\n");
  t.updates = {{0, Value(1)}};
  CHECK_VERIFY_FAILS(t, "invalid update of param 0: expected a value of type f32[3], got f64[3]");
  t.updates = {{0, Value(0)}};
  verify(t);
}

TEST_CASE("the parser runs the verifier on what it read") {
  try {
    parse_graph("%0 = param {index=0} : f32[3]\nreturn\nupdate 1 = %0\n", "upd.ir");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(
        std::string(e.what()) ==
        "upd.ir: invalid graph: invalid update of param 1: the graph has no param with that index");
  }
}
