// The interpreter: a small hand-built graph, parameter updates applied after
// the outputs, custom ops through the callback, and bounded memory on long chains.
#include <doctest/doctest.h>

#include "ir/builder.h"
#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/interpreter.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

HostArray host(DType dt, const Shape& shape, const std::vector<double>& v) {
  HostArray h = HostArray::make(TensorType{dt, shape, {}});
  copy_to(arr(dt, shape, v).v, h.view());
  return h;
}

TensorType f32t(Shape s) {
  return TensorType{DType::f32, std::move(s), {}};
}

}  // namespace

TEST_CASE("interpret: a small MLP step with a parameter update") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, f32t({2, 3}));
  Value w = b.param(0, f32t({3, 2}), "w");
  Value y = b.matmul(x, w);  // [2,2]
  Value h = b.add(b.unary(OpKind::relu, y), b.constant(1.0, DType::f32));
  Value s = b.sum(h, {0, 1}, false);
  Value w_new = b.sub(w, b.mul(b.constant(0.5, DType::f32), w));
  g.outputs = {h, s, w};
  g.updates = {ParamUpdate{0, w_new}};

  std::vector<HostArray> args = {host(DType::f32, {2, 3}, {1, 2, 3, -4, -5, -6})};
  std::vector<HostArray> params = {host(DType::f32, {3, 2}, {1, 0, 0, 1, 1, 1})};
  auto old_w = params[0].storage;
  std::vector<HostArray> out = interpret(g, args, params);
  REQUIRE(out.size() == 3);
  // y = [[4, 5], [-10, -11]] -> relu + 1 = [[5, 6], [1, 1]]
  CHECK(values(out[0].view()) == std::vector<double>{5, 6, 1, 1});
  CHECK(values(out[1].view()) == std::vector<double>{13});
  // Outputs see the parameter before the update; the update replaces the entry.
  CHECK(values(out[2].view()) == std::vector<double>{1, 0, 0, 1, 1, 1});
  CHECK(params[0].storage != old_w);
  CHECK(values(params[0].view()) == std::vector<double>{0.5, 0, 0, 0.5, 0.5, 0.5});
}

TEST_CASE("interpret: updates read values computed before any update") {
  Graph g;
  Builder b(g);
  Value p0 = b.param(0, f32t({2}));
  Value p1 = b.param(1, f32t({2}));
  g.updates = {ParamUpdate{0, p1}, ParamUpdate{1, b.add(p0, p1)}};  // swap-ish
  std::vector<HostArray> params = {host(DType::f32, {2}, {1, 2}), host(DType::f32, {2}, {10, 20})};
  interpret(g, {}, params);
  CHECK(values(params[0].view()) == std::vector<double>{10, 20});
  CHECK(values(params[1].view()) == std::vector<double>{11, 22});
}

TEST_CASE("interpret: custom ops run through the callback, or fail clearly") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, f32t({3}));
  NodeId call =
      b.op_multi(OpKind::custom, {x}, Attrs{{AttrKey::fn, int64_t{1}}}, {f32t({3}), f32t({})});
  g.outputs = {Value(call, 0), Value(call, 1)};
  std::vector<HostArray> args = {host(DType::f32, {3}, {1, 2, 3})};

  InterpretOptions opts;
  opts.custom = [](const Node& n, std::span<const HostArray> in) {
    CHECK(n.attrs.i(AttrKey::fn) == 1);
    HostArray twice = HostArray::make(in[0].type);
    reference_kernel(OpKind::add, {}, std::vector<View>{in[0].view(), in[0].view()}, twice.view());
    HostArray total = HostArray::make(TensorType{DType::f32, {}, {}});
    reference_kernel(OpKind::sum, Attrs{{AttrKey::dims, std::vector<int64_t>{0}}},
                     std::vector<View>{in[0].view()}, total.view());
    return std::vector<HostArray>{twice, total};
  };
  std::vector<HostArray> params;
  auto out = interpret(g, args, params, opts);
  CHECK(values(out[0].view()) == std::vector<double>{2, 4, 6});
  CHECK(values(out[1].view()) == std::vector<double>{6});
  CHECK_THROWS_AS(interpret(g, args), Error);
}

TEST_CASE("interpret: argument mismatches are errors naming what was expected") {
  Graph g;
  Builder b(g);
  g.outputs = {b.unary(OpKind::neg, b.arg(0, f32t({2})))};
  CHECK_THROWS_AS(interpret(g, {}), Error);
  std::vector<HostArray> wrong = {host(DType::f32, {3}, {1, 2, 3})};
  try {
    interpret(g, wrong);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("f32[2]") != std::string::npos);
  }
}

TEST_CASE("interpret: intermediates are freed after their last use") {
  const int64_t n = 1 << 20;  // 4 MiB per value
  Graph g;
  Builder b(g);
  Value v = b.arg(0, f32t({n}));
  Value one = b.constant(1.0, DType::f32);
  for (int i = 0; i < 40; ++i) v = b.add(v, one);
  // A probe in the middle of the chain records how much memory is live there.
  NodeId probe = b.op_multi(OpKind::custom, {v}, Attrs{{AttrKey::fn, int64_t{0}}}, {f32t({n})});
  v = Value(probe, 0);
  for (int i = 0; i < 40; ++i) v = b.add(v, one);
  g.outputs = {v};

  size_t live_at_probe = 0;
  InterpretOptions opts;
  opts.custom = [&](const Node&, std::span<const HostArray> in) {
    live_at_probe = cpu_allocator_stats().bytes_in_use;
    return std::vector<HostArray>{in[0]};
  };
  std::vector<HostArray> args = {HostArray::make(f32t({n}))};
  std::fill(args[0].data<float>(), args[0].data<float>() + n, 0.0f);
  const size_t before = cpu_allocator_stats().bytes_in_use;
  std::vector<HostArray> params;
  auto out = interpret(g, args, params, opts);
  CHECK(out[0].data<float>()[n - 1] == 80.0f);
  // The argument, the probe's input and the scalar constant: nowhere near 40 values.
  CHECK(live_at_probe - before <= size_t(3) * n * 4);
}
