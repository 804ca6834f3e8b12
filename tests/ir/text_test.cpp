// The canonical IR text: printing, parsing, exact round trips and parse errors.
#include <doctest/doctest.h>

#include <cmath>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_test_util.h"

using namespace kiln;
using test::ty;

namespace {

std::string parse_error(std::string_view text) {
  try {
    parse_graph(text, "test.ir");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void check_same_graph(const Graph& a, const Graph& b) {
  REQUIRE(a.size() == b.size());
  for (NodeId i = 0; i < a.size(); ++i) {
    CAPTURE(print_node(a, i));
    CHECK(a[i].op == b[i].op);
    CHECK(a[i].operands == b[i].operands);
    CHECK(a[i].attrs == b[i].attrs);
    CHECK(a[i].results == b[i].results);
  }
  CHECK(a.outputs == b.outputs);
  CHECK(a.updates == b.updates);
}

}  // namespace

TEST_CASE("the printer writes the canonical text") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("/home/me/mlp.cpp", 12);
  Value x = b.arg(0, ty(DType::f32, {64, 1000}));
  Value w = b.param(0, ty(DType::f32, {1000, 100}), "w1");
  Value h = b.matmul(x, w);
  Value r = b.binary(OpKind::maximum, h, b.scalar_like(h, 0.0));
  Value s = b.sum(r, {1}, false);
  NodeId c = b.op_multi(OpKind::custom, {s}, Attrs{{AttrKey::fn, int64_t{3}}},
                        {ty(DType::f32, {64}), ty(DType::f32, {64}, Device(kCUDA))});
  g.outputs = {r, Value(c, 1)};
  g.updates = {{0, b.sub(w, b.scalar_like(w, 1e-5))}};
  const char* want =
      "%0 = arg {index=0} : f32[64,1000]\n"
      "%1 = param {index=0, name=\"w1\"} : f32[1000,100]\n"
      "%2 = matmul %0, %1 : f32[64,100]\n"
      "%3 = constant {value=0.0} : f32[]\n"
      "%4 = maximum %2, %3 : f32[64,100]\n"
      "%5 = sum %4 {dims=[1], keepdim=0} : f32[64]\n"
      "%6, %7 = custom %5 {fn=3} : f32[64], cuda:f32[64]\n"
      "%8 = constant {value=9.999999747378752e-06} : f32[]\n"
      "%9 = sub %1, %8 : f32[1000,100]\n"
      "return %4, %7\n"
      "update 0 = %9\n";
  CHECK(print_graph(g) == want);
  CHECK(print_node(g, 2, PrintOptions{true}) == "%2 = matmul %0, %1 : f32[64,100]  @ mlp.cpp:12");
  CHECK(g.str(true).find("%4 = maximum %2, %3 : f32[64,100]  @ mlp.cpp:12\n") != std::string::npos);
  CHECK(print_graph(Graph{}) == "return\n");
}

TEST_CASE("print -> parse -> print is exact for a graph using every op") {
  Graph g = test::every_op_graph();
  verify(g);
  std::set<OpKind> used = test::ops_used(g);
  // Composites are expanded when built (decompose_test.cpp): no graph holds one.
  for (OpKind k : all_ops()) {
    CAPTURE(op_name(k));
    CHECK(used.count(k) == !is_composite(k));
  }
  for (bool locations : {false, true}) {
    PrintOptions opts{locations};
    std::string text = print_graph(g, opts);
    Graph back = parse_graph(text);
    CHECK(print_graph(back, opts) == text);
    check_same_graph(g, back);
  }
  Graph back = parse_graph(print_graph(g, PrintOptions{true}));
  for (NodeId i = 0; i < g.size(); ++i) {
    CAPTURE(print_node(g, i));
    CHECK(back[i].loc.line == g[i].loc.line);
    CHECK(back[i].loc.str() == g[i].loc.str());
  }
}

TEST_CASE("awkward floats and strings survive the round trip") {
  Graph g = parse_graph(
      "%a = literal {data=[nan,-nan,inf,-inf,-0.0,0.0,5e-324,1.7976931348623157e+308,0.1]} : "
      "f64[9]\n"
      "%b = param {index=0, name=\"a\\\"b\\\\c\\nd\\te\\x01\"} : f64[9]\n"
      "%c = constant {value=-0.0} : f32[]\n"
      "return %a\n");
  std::vector<double> d = g[0].attrs.floats(AttrKey::data);
  CHECK(std::isnan(d[0]));
  CHECK_FALSE(std::signbit(d[0]));
  CHECK(std::isnan(d[1]));
  CHECK(std::signbit(d[1]));
  CHECK(d[2] == INFINITY);
  CHECK(d[3] == -INFINITY);
  CHECK(std::signbit(d[4]));
  CHECK_FALSE(std::signbit(d[5]));
  CHECK(d[6] == 5e-324);
  CHECK(d[8] == 0.1);
  CHECK(g[1].attrs.str(AttrKey::name) == "a\"b\\c\nd\te\x01");
  CHECK(std::signbit(g[2].attrs.f(AttrKey::value)));
  std::string text = print_graph(g);
  CHECK(print_graph(parse_graph(text)) == text);
  CHECK(text.find("name=\"a\\\"b\\\\c\\nd\\te\\x01\"") != std::string::npos);
}

TEST_CASE("the parser renumbers, infers omitted types and reads locations") {
  Graph g = parse_graph(R"(
    // a comment line
    %x = arg {index=0} : f32[2,3]     // trailing comment
    %y = arg {index=1} : cuda:1:f64[3]
    %s = exp %x  @ /deep/dir/net.cpp:77
    %t = sum %s {keepdim=1, dims=[-1]}
    %u = tanh %y : cuda:1:f64[3]
    return %t, %u
  )");
  CHECK(g.size() == 5);
  CHECK(g.type(Value(2)) == ty(DType::f32, {2, 3}));
  CHECK(g.type(Value(3)) == ty(DType::f32, {2, 1}));
  CHECK(g.type(Value(4)) == ty(DType::f64, {3}, Device(kCUDA, 1)));
  CHECK(g[2].loc.line == 77);
  CHECK(std::string(g[2].loc.file) == "/deep/dir/net.cpp");
  CHECK(g[2].loc.str() == "net.cpp:77");
  CHECK(g.outputs == std::vector<Value>{Value(3), Value(4)});
  CHECK(print_graph(g, PrintOptions{true}) ==
        "%0 = arg {index=0} : f32[2,3]\n"
        "%1 = arg {index=1} : cuda:1:f64[3]\n"
        "%2 = exp %0 : f32[2,3]  @ net.cpp:77\n"
        "%3 = sum %2 {dims=[-1], keepdim=1} : f32[2,1]\n"
        "%4 = tanh %1 : cuda:1:f64[3]\n"
        "return %3, %4\n");
  CHECK(parse_graph("").size() == 0);
  CHECK(parse_graph("return\n").outputs.empty());
}

TEST_CASE("multi-result nodes name consecutive values") {
  Graph g = parse_graph(
      "%0 = arg {index=0} : f32[3]\n"
      "%1, %2 = custom %0 {fn=3} : f32[3], i64[]\n"
      "%3 = add %2, %0 : f32[3]\n"
      "custom %3 {fn=4}\n"
      "return %2, %1\n");
  CHECK(g.outputs == std::vector<Value>{Value(1, 1), Value(1, 0)});
  CHECK(g[2].operands == std::vector<Value>{Value(1, 1), Value(0)});
  CHECK(g[3].results.empty());
  std::string text = print_graph(g);
  CHECK(text.find("custom %3 {fn=4}\n") != std::string::npos);
  CHECK(print_graph(parse_graph(text)) == text);
}

TEST_CASE("a graph without a return line is an error only where one is required") {
  const char* text = "%0 = arg {index=0} : f32[3]\n%1 = exp %0\n";
  CHECK(parse_graph(text, "t.ir").outputs.empty());
  CHECK_THROWS_WITH_AS(parse_graph(text, "t.ir", true),
                       doctest::Contains("t.ir:3:1: expected a 'return' line"), Error);
  CHECK(parse_graph(std::string(text) + "return %1\n", "t.ir", true).outputs.size() == 1);
}

TEST_CASE("parse errors say where, what was expected and what came") {
  struct Row {
    const char* text;
    const char* want;
  };
  const Row rows[] = {
      {"%0 = arg {index=0} f32[3]\n",
       "test.ir:1:20: expected ':' and the result types, or end of line, got 'f32'"},
      {"%0 = frobnicate : f32[3]\n", "test.ir:1:6: expected an op name, got 'frobnicate'"},
      {"%0 = arg {index=0} : f32[3]\n%1 = exp %9\n",
       "test.ir:2:10: value %9 is not defined before use"},
      {"%0 = arg {index=0} : f32[3]\n%0 = arg {index=1} : f32[3]\n",
       "test.ir:2:1: value %0 is defined twice"},
      {"%0 = arg {index=0} : f33[3]\n",
       "test.ir:1:22: expected a type such as f32[64,100], got 'f33'"},
      {"%0 = arg {index=0} : f32[3\n", "test.ir:1:27: expected ',', got end of line"},
      {"%0 = arg {indx=0} : f32[3]\n", "test.ir:1:11: expected an attribute name, got 'indx'"},
      {"%0 = arg {index=0, index=1} : f32[3]\n", "attribute 'index' is given twice"},
      {"%0 = arg {index=0} : f32[3]\n%1 = exp %0 : f64[3]\n",
       "test.ir:2:6: exp: expected result type f32[3] (from the op's rules), got f64[3]"},
      {"%0 = arg {index=0} : f32[3]\n%1 = add %0 : f32[3]\n",
       "test.ir:2:6: add: expected 2 operands, got 1"},
      {"%0 = arg {index=0} : f32[3]\n%1 = arg {index=1} : f32[4]\n%2 = add %0, %1\n",
       "test.ir:3:6: add: shapes [3] and [4] cannot be broadcast"},
      {"%0 = arg {index=0}\n",
       "test.ir:1:6: arg: expected ':' and the result type (the type of Input ops is given"},
      {"%0 = arg {index=0} : f32[3], f32[3]\n",
       "expected 1 result types after ':' (one per result name), got 2"},
      {"%0 = arg {index=0} : f32[3] f32\n", "test.ir:1:29: expected end of line, got 'f32'"},
      // Types a buffer cannot have (#32): too many elements, bytes or strides for 64 bits.
      {"%0 = arg {index=0} : f32[4611686018427387904,4]\n",
       "test.ir:1:22: type f32[4611686018427387904,4]: shape [4611686018427387904,4] is too large: "
       "its element count does not fit in 64 bits"},
      {"%0 = arg {index=0} : f64[2305843009213693952]\n",
       "test.ir:1:22: type f64[2305843009213693952]: shape [2305843009213693952] is too large: its "
       "byte size does not fit in 64 bits"},
      {"%0 = arg {index=0} : f32[0,4611686018427387904,4]\n",
       "test.ir:1:22: type f32[0,4611686018427387904,4]: shape [0,4611686018427387904,4] is too "
       "large: its element count does not fit in 64 bits"},
      {"%0 = param {index=0, name=\"abc} : f32[3]\n", "expected a closing '\"' for the string"},
      {"%0 = arg {index=0} : f32[3]  @ nowhere\n",
       "expected a location such as 'file.cpp:12' after '@'"},
      {"return\nreturn\n", "test.ir:2:1: expected one 'return' line, got a second"},
      {"%0 = arg {index=0} : f32[3]\nupdate x = %0\n",
       "test.ir:2:8: expected a parameter index, got 'x'"},
      {"%0 = arg {index=0} : f32[3]\n%1 = arg {index=0} : f32[3]\n",
       "test.ir: invalid graph: invalid node `%1 = arg {index=0} : f32[3]`: a second arg with "
       "index 0"},
      {"%0 = arg {index=99999999999999999999} : f32[3]\n",
       "integer 99999999999999999999 is out of range"},
      {"%0 = arg {index=0} : f32[-1]\n", "expected a dimension size >= 0, got -1"},
      {"%0, %1 = exp %0\n", "value %0 is not defined before use"},
  };
  for (const Row& r : rows) {
    std::string text = r.text;
    CAPTURE(text);
    std::string msg = parse_error(r.text);
    CHECK_MESSAGE(msg.find(r.want) != std::string::npos, msg);
  }
}

TEST_CASE("philox draws print and parse with their dtype and the whole int64 range") {
  const std::string text =
      "%0 = arg {index=0} : i64[]\n"
      "%1 = arg {index=1} : i64[5]\n"
      "%2 = philox %0, %1 : f32[5]\n"
      "%3 = philox %0, %1 {dtype=f64} : f64[5]\n"
      "%4 = philox %0, %1 {dtype=i64} : i64[5]\n"
      "%5 = philox %0, %1 {dtype=i64, low=-9223372036854775808, high=9223372036854775807} : "
      "i64[5]\n"
      "return %2, %3, %4, %5\n";
  Graph g = parse_graph(text, "test.ir");
  verify(g);
  CHECK(g[5].attrs.i(AttrKey::low) == INT64_MIN);
  CHECK(g[5].attrs.i(AttrKey::high) == INT64_MAX);
  CHECK(print_graph(g) == text);
  check_same_graph(parse_graph(print_graph(g), "again.ir"), g);
}

TEST_CASE("small integer types in the text: promotion, sums into i64") {
  Graph g = parse_graph(R"(
    %a = arg {index=0} : u8[4]
    %b = arg {index=1} : i8[4]
    %c = add %a, %b
    %d = sum %a {dims=[0]}
    %e = cast %c {dtype=i16}
    %f = arg {index=2} : i16[4]
    return %c, %d, %e, %f
  )");
  CHECK(g.type(Value(2)) == ty(DType::i16, {4}));
  CHECK(g.type(Value(3)) == ty(DType::i64, {}));
  CHECK(print_graph(g) == print_graph(parse_graph(print_graph(g))));
  CHECK(print_graph(g).find("%0 = arg {index=0} : u8[4]") != std::string::npos);
}
