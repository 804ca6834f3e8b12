// Builder: type inference, hash-consing, locations in errors, and its helpers.
#include <doctest/doctest.h>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_test_util.h"

using namespace kiln;
using test::ty;

TEST_CASE("the builder hash-conses pure nodes") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {3}));
  Value y = b.arg(1, ty(DType::f32, {3}));
  Value s1 = b.add(x, y);
  Value s2 = b.add(x, y);
  CHECK(s1 == s2);
  CHECK(b.add(y, x) != s1);  // operand order matters
  CHECK(b.unary(OpKind::exp, s1) == b.unary(OpKind::exp, s2));
  CHECK(b.constant(2.0, DType::f32) == b.constant(2.0, DType::f32));
  CHECK(b.constant(2.0, DType::f32) != b.constant(2.0, DType::f64));
  CHECK(b.constant(0.0, DType::f32) != b.constant(-0.0, DType::f32));
  CHECK(b.constant(2.7, DType::i32) ==
        b.constant(2.0, DType::i32));  // stored as the dtype holds it
  CHECK(b.constant(0.1, DType::f32) == b.constant(static_cast<float>(0.1), DType::f32));
  CHECK(b.sum(x, {0}, false) == b.sum(x, {-1}, false));
  CHECK(b.sum(x, {0}, false) != b.sum(x, {0}, true));
  size_t before = g.size();
  (void)b.mul(s1, s2);
  (void)b.mul(s1, s2);
  CHECK(g.size() == before + 1);
}

TEST_CASE("inputs and custom calls are never merged; random draws by their counters") {
  Graph g;
  Builder b(g);
  TensorType t = ty(DType::f32, {3});
  CHECK(b.arg(0, t) != b.arg(0, t));
  CHECK(b.param(0, t) != b.param(0, t));
  // A draw is philox(key, counter), a pure function: the same counters are the
  // same numbers, and two draws differ by their counters (the generator's offset
  // advanced in between), never by the node's identity.
  Value key = b.param(1, ty(DType::i64, {}));
  Value counters = b.op_typed(OpKind::arange, {},
                              Attrs{{AttrKey::start, int64_t{0}}, {AttrKey::step, int64_t{1}}},
                              ty(DType::i64, {3}));
  Value next = b.binary(OpKind::add, counters, b.constant(3.0, DType::i64));
  CHECK(b.binary(OpKind::philox, key, counters) == b.binary(OpKind::philox, key, counters));
  CHECK(b.binary(OpKind::philox, key, counters) != b.binary(OpKind::philox, key, next));
  Value x = b.arg(5, t);
  Attrs fn{{AttrKey::fn, int64_t{1}}};
  CHECK(b.op_multi(OpKind::custom, {x}, fn, {t}) != b.op_multi(OpKind::custom, {x}, fn, {t}));
}

TEST_CASE("a builder over an existing graph indexes its nodes") {
  Graph g;
  Value x, e;
  {
    Builder b(g);
    x = b.arg(0, ty(DType::f32, {3}));
    e = b.unary(OpKind::exp, x);
  }
  Builder again(g);
  CHECK(again.unary(OpKind::exp, x) == e);
  CHECK(again.arg(0, ty(DType::f32, {3})) != x);
}

TEST_CASE("builder errors name the op and the recording line") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("/src/mlp.cpp", 12);
  Value x = b.arg(0, ty(DType::f32, {3}));
  Value y = b.arg(1, ty(DType::f32, {4}));
  CHECK_THROWS_WITH_AS(
      b.add(x, y), "add: shapes [3] and [4] cannot be broadcast\n  recorded at mlp.cpp:12", Error);
  Value m = b.arg(2, ty(DType::f32, {64, 100}));
  Value n = b.arg(3, ty(DType::f32, {50, 10}));
  CHECK_THROWS_WITH_AS(b.matmul(m, n),
                       "matmul: expected a.shape[-1] == b.shape[-2], got [64,100] and [50,10]\n  "
                       "recorded at mlp.cpp:12",
                       Error);
  try {
    b.add(x, y);
  } catch (const Error& e) {
    CHECK(e.where().line == 12);
    CHECK(e.message() == "add: shapes [3] and [4] cannot be broadcast");
  }
  CHECK_THROWS_WITH_AS(b.op(OpKind::arg, {}, {}), doctest::Contains("must be given"), Error);
  CHECK_THROWS_WITH_AS(
      b.op_typed(OpKind::arg, {x}, Attrs{{AttrKey::index, int64_t{9}}}, ty(DType::f32, {3})),
      doctest::Contains("arg: expected 0 operands, got 1"), Error);
  CHECK_THROWS_WITH_AS(
      b.op_typed(OpKind::exp, {x}, {}, ty(DType::f64, {3})),
      doctest::Contains("op_typed was given f64[3] but the op's rules give f32[3]"), Error);
  CHECK_THROWS_WITH_AS(b.reshape(x, {2, 2}),
                       doctest::Contains("reshape: cannot reshape [3] to [2,2]"), Error);
  CHECK_THROWS_WITH_AS(b.sum(x, {1}, false), doctest::Contains("sum: dim 1 is out of range"),
                       Error);
  CHECK_THROWS_AS(b.op(OpKind::neg, {Value()}), Error);
}

TEST_CASE("nodes carry the builder's location") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("a.cpp", 3);
  Value x = b.arg(0, ty(DType::f32, {3}));
  b.loc = SourceLoc("b.cpp", 4);
  Value y = b.unary(OpKind::exp, x);
  CHECK(g[x.node].loc == SourceLoc("a.cpp", 3));
  CHECK(g[y.node].loc == SourceLoc("b.cpp", 4));
  b.loc = SourceLoc("c.cpp", 5);
  CHECK(b.unary(OpKind::exp, x) == y);  // merged: keeps the first location
  CHECK(g[y.node].loc.line == 4);
}

TEST_CASE("LocScope sets the builder's location for its scope, also when building throws") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("outer.cpp", 1);
  const Value x = b.arg(0, ty(DType::f32, {3}));
  {
    LocScope at(b, SourceLoc("inner.cpp", 2));
    CHECK(g[b.unary(OpKind::exp, x).node].loc == SourceLoc("inner.cpp", 2));
  }
  CHECK(b.loc == SourceLoc("outer.cpp", 1));
  try {
    LocScope at(b, SourceLoc("inner.cpp", 3));
    (void)b.op(OpKind::neg, {Value()});
  } catch (const Error&) {
  }
  CHECK(b.loc == SourceLoc("outer.cpp", 1));
}

TEST_CASE("builder helpers fold no-ops away") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {2, 3}, Device(kCUDA)));
  CHECK(b.cast(x, DType::f32) == x);
  CHECK(b.type(b.cast(x, DType::f64)) == ty(DType::f64, {2, 3}, Device(kCUDA)));
  CHECK(b.sum(x, {}, false) == x);
  CHECK(b.reshape(x, {2, 3}) == x);
  CHECK(b.reshape(x, {-1, 3}) == x);
  CHECK(b.type(b.reshape(x, {-1})).shape == Shape{6});
  CHECK(g[b.reshape(x, {3, -1}).node].attrs.ints(AttrKey::shape) == std::vector<int64_t>{3, 2});
  CHECK(b.expand(x, {2, 3}) == x);
  CHECK(b.expand(x, {-1, -1}) == x);
  CHECK(b.type(b.expand(x, {4, -1, 3})).shape == Shape{4, 2, 3});
  CHECK(b.permute(x, {0, 1}) == x);
  CHECK(b.permute(x, {-2, -1}) == x);
  CHECK(b.type(b.permute(x, {1, 0})).shape == Shape{3, 2});
  CHECK(b.transpose_last(x) == b.permute(x, {1, 0}));
  CHECK_THROWS_AS(b.transpose_last(b.sum(x, {0, 1}, false)), Error);

  Value s = b.scalar_like(x, 2.0);
  CHECK(b.type(s) == ty(DType::f32, {}, Device(kCUDA)));
  CHECK(g[s.node].attrs.f(AttrKey::value) == 2.0);
  Value z = b.zeros_like(x);
  CHECK(b.type(z) == b.type(x));
  CHECK(g[z.node].attrs.f(AttrKey::value) == 0.0);
  CHECK(g[b.ones_like(x).node].attrs.f(AttrKey::value) == 1.0);
  CHECK(b.type(b.mul(x, s)) == b.type(x));
  verify(g);
}

TEST_CASE("sum_to reverses broadcasting") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {4, 2, 3}));
  CHECK(b.sum_to(x, {4, 2, 3}) == x);

  Value to3 = b.sum_to(x, {3});
  CHECK(b.type(to3).shape == Shape{3});
  CHECK(g[to3.node].op == OpKind::sum);
  CHECK(g[to3.node].attrs.ints(AttrKey::dims) == std::vector<int64_t>{0, 1});

  Value to13 = b.sum_to(x, {1, 3});
  CHECK(b.type(to13).shape == Shape{1, 3});
  CHECK(g[to13.node].op == OpKind::reshape);
  Value inner = g[to13.node].operands[0];
  CHECK(g[inner.node].attrs.ints(AttrKey::dims) == std::vector<int64_t>{0, 1});

  Value to21 = b.sum_to(x, {2, 1});
  CHECK(b.type(to21).shape == Shape{2, 1});
  CHECK(b.type(b.sum_to(x, {})).shape == Shape{});

  Value ones = b.arg(1, ty(DType::f32, {1, 3}));
  CHECK(b.type(b.sum_to(ones, {3})).shape == Shape{3});  // only a reshape is needed
  CHECK(g[b.sum_to(ones, {3}).node].op == OpKind::reshape);

  CHECK_THROWS_WITH_AS(b.sum_to(x, {5}), doctest::Contains("cannot sum [4,2,3] down to [5]"),
                       Error);
  verify(g);
}

TEST_CASE("graph queries") {
  Graph g;
  Builder b(g);
  Value p1 = b.param(1, ty(DType::f32, {3}));
  Value a1 = b.arg(1, ty(DType::f32, {3}));
  Value a0 = b.arg(0, ty(DType::f32, {3}));
  Value p0 = b.param(0, ty(DType::f32, {3}), "w");
  Value s = b.add(a0, a0);
  Value t = b.mul(s, p0);
  g.outputs = {t, s};
  g.updates = {{1, t}};
  CHECK(g.args() == std::vector<NodeId>{a0.node, a1.node});
  CHECK(g.params() == std::vector<NodeId>{p0.node, p1.node});
  // param_value: the first param node of an index (a later one of the same
  // index, a traced re-read, does not replace it); none for an unused index.
  b.hash_cons = false;
  const Value p1_again = b.param(1, ty(DType::f32, {3}));
  CHECK(p1_again != p1);
  CHECK(g.param_value(1) == p1);
  CHECK(g.param_value(0) == p0);
  CHECK(!g.param_value(2).valid());
  b.hash_cons = true;
  // is_zero_constant: a constant 0, through expands and reshapes; not another
  // constant, nor a computed value.
  const Graph z = parse_graph(R"(
    %x = arg {index=0} : f32[2,3]
    %zero = constant {value=0.0} : f32[]
    %one = constant {value=1.0} : f32[3]
    %e = expand %zero {shape=[2, 3]}
    %r = reshape %e {shape=[6]}
    %o = expand %one {shape=[2, 3]}
    %m = mul %x, %e
    return %r, %o, %m
  )");
  CHECK(z.is_zero_constant(Value(1)));
  CHECK(z.is_zero_constant(Value(3)));
  CHECK(z.is_zero_constant(Value(4)));
  CHECK_FALSE(z.is_zero_constant(Value(2)));
  CHECK_FALSE(z.is_zero_constant(Value(5)));
  CHECK_FALSE(z.is_zero_constant(Value(6)));
  CHECK_FALSE(z.is_zero_constant(Value(0)));
  std::vector<uint32_t> uses = g.use_counts();
  CHECK(uses[a0.node] == 2);
  CHECK(uses[s.node] == 2);
  CHECK(uses[t.node] == 2);
  CHECK(uses[a1.node] == 0);
  CHECK(g.type(t) == ty(DType::f32, {3}));
  std::ostringstream os;
  os << g;
  CHECK(os.str() == g.str());
  CHECK(os.str() == print_graph(g));

  ValueMap map(g);
  CHECK_FALSE(map.has(s));
  map.set(s, Value(7, 0));
  map.set(Value(t.node, 2), Value(9, 1));
  CHECK(map.has(s));
  CHECK(map(s) == Value(7, 0));
  CHECK(map(Value(t.node, 2)) == Value(9, 1));
  CHECK_FALSE(map.has(t));
  CHECK_THROWS_AS(map(t), Error);
}
