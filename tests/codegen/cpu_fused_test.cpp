// Multi-op groups: elementwise chains with broadcasts and views inside the
// group, pad, row-wise reductions with producers and epilogues (softmax,
// log-softmax, layer norm in one kernel), several outputs, random fused graphs
// against the interpreter, and whole graphs grouped by plan_fusion.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tuple>

#include "codegen/lower.h"
#include "codegen_test_util.h"
#include "ir/parser.h"
#include "op_table_util.h"
#include "runtime/interpreter.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Attrs dims_attr(std::vector<int64_t> d, bool keep) {
  return Attrs{{AttrKey::dims, std::move(d)}, {AttrKey::keepdim, int64_t(keep)}};
}

}  // namespace

TEST_CASE("elementwise chain with broadcasting inputs and odd sizes") {
  for (DType dt : {DType::f32, DType::f64}) {
    for (Shape s :
         {Shape{}, Shape{1}, Shape{13}, Shape{7, 1, 33}, Shape{64, 100}, Shape{3, 5, 17}}) {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(dt, s));
      Shape row = s.empty() ? Shape{} : Shape{s.back()};
      Value bias = b.arg(1, ty(dt, row));
      Value scale = b.arg(2, ty(dt, {}));
      Value y = b.unary(OpKind::sigmoid, b.add(b.mul(x, scale), bias));
      y = b.mul(y, b.unary(OpKind::tanh, x));
      g.outputs = {b.sub(y, b.scalar_like(y, 0.25))};
      CAPTURE(shape_str(s));
      check_whole_graph(g, GroupKind::Elementwise, 11);
    }
  }
}

TEST_CASE("views inside a group: permute, slice, expand, reshape compose into index maps") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {24, 30}));
  Value y = b.arg(1, ty(DType::f32, {30, 24}));
  Value z = b.arg(2, ty(DType::f32, {6, 4, 30}));
  Value xt = b.permute(b.unary(OpKind::exp, x), {1, 0});  // [30, 24]
  Value s = b.op(OpKind::slice, {y},
                 Attrs{{AttrKey::dim, int64_t{1}},
                       {AttrKey::start, int64_t{0}},
                       {AttrKey::end, int64_t{24}},
                       {AttrKey::step, int64_t{1}}});
  Value zr = b.permute(b.reshape(z, {24, 30}), {1, 0});  // [30, 24]
  Value sum = b.add(b.add(xt, s), zr);
  Value sl = b.op(OpKind::slice, {sum},
                  Attrs{{AttrKey::dim, int64_t{0}},
                        {AttrKey::start, int64_t{2}},
                        {AttrKey::end, int64_t{29}},
                        {AttrKey::step, int64_t{3}}});  // [9, 24]
  g.outputs = {b.mul(sl, b.scalar_like(sl, 3.0))};
  check_whole_graph(g, GroupKind::Elementwise, 12);
}

TEST_CASE("pad inside a group reads zero outside the copied range") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f64, {5, 17}));
  Value p = b.op(OpKind::pad, {b.unary(OpKind::exp, x)},
                 Attrs{{AttrKey::dim, int64_t{1}},
                       {AttrKey::low, int64_t{2}},
                       {AttrKey::high, int64_t{3}},
                       {AttrKey::interior, int64_t{1}}});  // [5, 38]
  Value q = b.op(OpKind::pad, {p},
                 Attrs{{AttrKey::dim, int64_t{0}},
                       {AttrKey::low, int64_t{1}},
                       {AttrKey::high, int64_t{0}},
                       {AttrKey::interior, int64_t{0}}});  // [6, 38]
  g.outputs = {b.add(q, b.arg(1, ty(DType::f64, {38})))};
  check_whole_graph(g, GroupKind::Elementwise, 13);
}

TEST_CASE("rows cut at a pad's edges match the interpreter, whatever their length") {
  // The taps of a row padded on both sides: the row is cut where the guards
  // change, and short pieces run as whole vectors, the last overlapping
  // (codegen/llvm_codegen.cpp, overlap_cut): lengths on and off a vector's lanes.
  for (DType dt : {DType::f32, DType::f64})
    for (int64_t w : {int64_t(3), int64_t(7), int64_t(9), int64_t(16), int64_t(17), int64_t(30),
                      int64_t(45), int64_t(70)}) {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(dt, {6, w}));
      Value p = b.op(OpKind::pad, {x},
                     Attrs{{AttrKey::dim, int64_t{1}},
                           {AttrKey::low, int64_t{2}},
                           {AttrKey::high, int64_t{1}},
                           {AttrKey::interior, int64_t{0}}});  // [6, w + 3]
      Value sum;
      for (int64_t k = 0; k < 4; ++k) {
        Value tap = b.op(OpKind::slice, {p},
                         Attrs{{AttrKey::dim, int64_t{1}},
                               {AttrKey::start, k},
                               {AttrKey::end, k + w},
                               {AttrKey::step, int64_t{1}}});
        tap = b.mul(tap, b.scalar_like(tap, 0.5 + double(k)));
        sum = k == 0 ? tap : b.add(sum, tap);
      }
      g.outputs = {b.add(sum, b.arg(1, ty(dt, {w})))};
      CAPTURE(dtype_name(dt));
      CAPTURE(w);
      check_whole_graph(g, GroupKind::Elementwise, 15 + uint64_t(w));
    }
}

namespace {

// A copy of `b` in pages between two PROT_NONE pages, flush against the one
// after it (at_end) or the one before: a read outside it faults.
Buf fenced(const Buf& b, bool at_end) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = b.storage->bytes();
  const size_t pages = (bytes + page - 1) / page, len = (pages + 2) * page;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  char* base = static_cast<char*>(m);
  REQUIRE(mprotect(base, page, PROT_NONE) == 0);
  REQUIRE(mprotect(base + (pages + 1) * page, page, PROT_NONE) == 0);
  char* data = at_end ? base + (pages + 1) * page - bytes : base + page;
  std::memcpy(data, b.data(), bytes);
  Buf out = b;
  out.storage = Storage::wrap(data, bytes, {}, [base, len](void*) { munmap(base, len); });
  return out;
}

// check_whole_graph, and the group run again on inputs flush against unmapped
// pages on either side (fenced), where a read out of bounds faults.
CpuKernel check_fenced_graph(const Graph& g, GroupKind kind, uint64_t seed) {
  CpuKernel k = check_whole_graph(g, kind, seed);
  std::mt19937_64 rng(seed);
  std::vector<Buf> args;
  for (NodeId id : g.args()) {
    args.push_back(make_buf(g.node(id).type()));
    fill_random(args.back(), rng);
  }
  const std::vector<Buf> vals = reference_eval(g, args);
  const FusionGroup grp = make_group(g, kind, all_compute_nodes(g));
  for (bool at_end : {false, true}) {
    CAPTURE(at_end);
    std::vector<Buf> in = vals;
    for (NodeId id : g.args()) in[id] = fenced(vals[id], at_end);
    check_group(g, grp, in);
  }
  return k;
}

}  // namespace

TEST_CASE("images cut at their pads' edges in rows and columns match the interpreter") {
  // A conv's k x k taps of [n, h, w] images padded on both dims, rows and
  // columns loops of their own, each cut at the pads' edges
  // (codegen/lower_map.cpp, loop_segments): 4 images read through the input's
  // [4, h w] reshape, or 64 images as they are (lower.cpp's image form); with
  // 5 x 5 taps there are too many bodies and only the outer loop's longest
  // segment is split off. 64 images of rows of 16 or more: the plane form,
  // one loop over each image's plane, its reads unclamped where proven in
  // bounds (so the inputs are also fenced by unmapped pages).
  struct Case {
    int64_t h, w, k, low;
    bool reshaped = true;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (Case c : {Case{5, 7, 3, 1}, Case{9, 30, 3, 1}, Case{3, 3, 3, 1}, Case{12, 17, 5, 2},
                   Case{6, 40, 5, 1}, Case{8, 9, 3, 0}, Case{5, 7, 3, 1, false},
                   Case{6, 19, 5, 2, false}, Case{32, 32, 3, 1, false}, Case{7, 16, 3, 1, false},
                   Case{10, 20, 5, 2, false}, Case{4, 17, 3, 0, false}, Case{1, 24, 3, 1, false}}) {
      const Graph g = padded_taps(dt, c.reshaped ? 4 : 64, c.h, c.w, c.k, c.low, c.reshaped);
      CAPTURE(dtype_name(dt));
      CAPTURE(c.h);
      CAPTURE(c.w);
      CAPTURE(c.k);
      CAPTURE(c.low);
      CAPTURE(c.reshaped);
      check_fenced_graph(g, GroupKind::Elementwise, 90 + uint64_t(c.h * c.w));
      if (c.h == 32) {  // the plane form: a column guard's table
        const kir::Kernel k =
            lower_group(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)));
        CHECK(!k.tables.empty());
      }
    }
}

TEST_CASE("several outputs of different shapes from one elementwise group") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {8, 40}));
  Value v = b.arg(1, ty(DType::f32, {40}));
  Value ev = b.unary(OpKind::exp, v);  // [40], an output too
  Value y = b.mul(x, ev);              // [8, 40]
  Value t = b.permute(y, {1, 0});      // [40, 8], an output
  g.outputs = {ev, b.add(y, b.scalar_like(y, 1.0)), b.unary(OpKind::neg, t)};
  CpuKernel k = check_whole_graph(g, GroupKind::Elementwise, 14);
  CHECK(k.buffers.size() == 5);
}

TEST_CASE("softmax, log-softmax and layer norm are one kernel each") {
  for (DType dt : {DType::f32, DType::f64}) {
    // {5, 2051}: rows long enough for the next row's prefetch, blocks with a remainder.
    for (Shape s : {Shape{4, 7}, Shape{64, 1000}, Shape{3, 1}, Shape{2, 3, 33}, Shape{5, 2051}}) {
      const int64_t last = int64_t(s.size()) - 1;
      {
        Graph g;
        Builder b(g);
        Value x = b.arg(0, ty(dt, s));
        Value m = b.op(OpKind::max, {x}, dims_attr({last}, true));
        Value e = b.unary(OpKind::exp, b.sub(x, m));
        g.outputs = {b.div(e, b.sum(e, {last}, true))};
        CAPTURE(shape_str(s));
        CpuKernel k = check_whole_graph(g, GroupKind::Reduction, 21, {{-10, 10}});
        CHECK(k.info.range == numel(s) / s.back());
      }
      {
        Graph g;
        Builder b(g);
        Value x = b.arg(0, ty(dt, s));
        Value m = b.op(OpKind::max, {x}, dims_attr({last}, false));
        Value xs = b.sub(x, b.reshape(m, [&] {
          Shape r = s;
          r.back() = 1;
          return r;
        }()));
        Value lse = b.unary(OpKind::log, b.sum(b.unary(OpKind::exp, xs), {last}, true));
        g.outputs = {b.sub(xs, lse), m};
        check_whole_graph(g, GroupKind::Reduction, 22, {{-10, 10}});
      }
      {
        Graph g;
        Builder b(g);
        Value x = b.arg(0, ty(dt, s));
        Value gamma = b.arg(1, ty(dt, {s.back()}));
        const double inv_n = 1.0 / double(s.back());
        Value mean = b.mul(b.sum(x, {last}, true), b.constant(inv_n, dt));
        Value xc = b.sub(x, mean);
        Value var = b.mul(b.sum(b.mul(xc, xc), {last}, true), b.constant(inv_n, dt));
        Value y = b.mul(b.mul(xc, b.unary(OpKind::rsqrt, b.add(var, b.constant(1e-5, dt)))), gamma);
        g.outputs = {y, mean};
        check_whole_graph(g, GroupKind::Reduction, 23);
      }
    }
  }
}

TEST_CASE(
    "exp of x less its row's max skips exp's upper clamp; less another row's max it keeps it") {
  auto buf = [](DType dt, Shape s, std::vector<double> v) {
    Buf b = make_buf(ty(dt, std::move(s)));
    visit_dtype(dt, [&](auto t) {
      using T = decltype(t);
      for (size_t i = 0; i < v.size(); ++i) static_cast<T*>(b.data())[i] = static_cast<T>(v[i]);
    });
    return b;
  };
  const double inf = INFINITY, nan = NAN;
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    // Softmax's rows: extremes, infinities and a NaN give the reference's values.
    const std::vector<double> rows = {200,  -200,  0,   88,   -inf, -inf, -inf,  -inf,
                                      -inf, 1,     inf, 2,    3,    nan,  4,     -900,
                                      1e30, -1e30, 720, -750, 0.5,  0.25, 0.125, -0.5};
    {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(dt, {6, 4}));
      Value m = b.op(OpKind::max, {x}, dims_attr({1}, true));
      Value e = b.unary(OpKind::exp, b.sub(x, m));
      g.outputs = {b.div(e, b.sum(e, {1}, true))};
      check_group(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)),
                  reference_eval(g, {buf(dt, {6, 4}, rows)}));
    }
    // The max of another buffer bounds nothing: x - max(y) may be large, and exp
    // of it overflows to inf as exp does.
    {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(dt, {2, 4}));
      Value y = b.arg(1, ty(dt, {2, 4}));
      Value m = b.op(OpKind::max, {y}, dims_attr({1}, true));
      g.outputs = {b.unary(OpKind::exp, b.sub(x, m))};
      check_group(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)),
                  reference_eval(g, {buf(dt, {2, 4}, {200, 1000, 1e6, 3000, 95, 2, 1e5, 4}),
                                     buf(dt, {2, 4}, {0, -1, -2, -3, 1, 0, 0, 0})}));
    }
  }
}

TEST_CASE(
    "a division by a row's value is a multiplication by its reciprocal; by a constant it is not") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    // Layer norm dividing by sqrt(var + eps): within an ulp and a half of the quotient.
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(dt, {37, 1000}));
    const double inv_n = 1.0 / 1000;
    Value xc = b.sub(x, b.mul(b.sum(x, {1}, true), b.constant(inv_n, dt)));
    Value var = b.mul(b.sum(b.mul(xc, xc), {1}, true), b.constant(inv_n, dt));
    g.outputs = {b.div(xc, b.unary(OpKind::sqrt, b.add(var, b.constant(1e-5, dt))))};
    check_whole_graph(g, GroupKind::Reduction, 24);
    // x / 3 and x / y are divisions, bit for bit.
    Graph h;
    Builder c(h);
    Value u = c.arg(0, ty(dt, {5, 67}));
    Value v = c.arg(1, ty(dt, {5, 67}));
    h.outputs = {c.div(u, c.constant(3.0, dt)), c.div(u, v)};
    check_whole_graph(h, GroupKind::Elementwise, 25, {}, Tolerance{0, 0});
  }
}

TEST_CASE("reductions with producers, epilogues and non-trailing dims") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {6, 20, 9}));
  Value w = b.arg(1, ty(DType::f32, {20, 1}));
  Value p = b.mul(b.unary(OpKind::exp, b.mul(x, b.scalar_like(x, 0.1))), w);
  Value s = b.sum(p, {1}, false);  // [6, 9]
  Value mx = b.op(OpKind::max, {p}, dims_attr({1}, false));
  Value am = b.op(OpKind::argmax, {p}, Attrs{{AttrKey::dim, int64_t{1}}});
  g.outputs = {b.div(s, mx), am, p};
  check_whole_graph(g, GroupKind::Reduction, 31);
}

TEST_CASE("a full reduction to a scalar, and a reduction of a permuted input") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f64, {33, 65}));
  Value l = b.sum(b.mul(x, x), {0, 1}, false);
  g.outputs = {b.unary(OpKind::sqrt, l)};
  check_whole_graph(g, GroupKind::Reduction, 32);

  Graph g2;
  Builder b2(g2);
  Value y = b2.arg(0, ty(DType::f32, {40, 12}));
  Value t = b2.permute(y, {1, 0});
  g2.outputs = {b2.sum(t, {1}, true)};
  check_whole_graph(g2, GroupKind::Reduction, 33);
}

TEST_CASE("a sum over windows folding its rows' taps together matches the interpreter") {
  // A depthwise conv's weight gradient: x times the windows of padded dY, summed
  // over batch and pixels, kept [C, kH, kW] (lowered with one accumulator per
  // tap); the pad inside the kernel, and 3x2 windows of dilation 2.
  for (const char* ir : {"%0 = arg {index=0} : f32[2,3,12,12]\n"
                         "%1 = arg {index=1} : f32[2,3,12,12]\n"
                         "%2 = pad %0 {dim=2, low=1, high=1, interior=0} : f32[2,3,14,12]\n"
                         "%3 = pad %2 {dim=3, low=1, high=1, interior=0} : f32[2,3,14,14]\n"
                         "%4 = unfold %3 {dim=2, size=3, step=1, dilation=1} : f32[2,3,12,14,3]\n"
                         "%5 = unfold %4 {dim=3, size=3, step=1, dilation=1} : f32[2,3,12,12,3,3]\n"
                         "%6 = permute %5 {perm=[0,1,4,5,2,3]} : f32[2,3,3,3,12,12]\n"
                         "%7 = reshape %1 {shape=[2,3,1,1,12,12]} : f32[2,3,1,1,12,12]\n"
                         "%8 = mul %6, %7 : f32[2,3,3,3,12,12]\n"
                         "%9 = sum %8 {dims=[0,4,5], keepdim=0} : f32[3,3,3]\n"
                         "%10 = mul %9, %9 : f32[3,3,3]\n"
                         "return %9, %10\n",
                         "%0 = arg {index=0} : f64[2,3,16,14]\n"
                         "%1 = arg {index=1} : f64[2,3,12,12]\n"
                         "%2 = unfold %0 {dim=2, size=3, step=1, dilation=2} : f64[2,3,12,14,3]\n"
                         "%3 = unfold %2 {dim=3, size=2, step=1, dilation=2} : f64[2,3,12,12,3,2]\n"
                         "%4 = permute %3 {perm=[0,1,4,5,2,3]} : f64[2,3,3,2,12,12]\n"
                         "%5 = reshape %1 {shape=[2,3,1,1,12,12]} : f64[2,3,1,1,12,12]\n"
                         "%6 = mul %4, %5 : f64[2,3,3,2,12,12]\n"
                         "%7 = sum %6 {dims=[0,4,5], keepdim=0} : f64[3,3,2]\n"
                         "return %7\n"}) {
    CAPTURE(ir);
    Graph g = parse_graph(ir);
    const kir::Kernel k = lower_group(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)));
    CHECK(k.range == 3);
    check_whole_graph(g, GroupKind::Reduction, 41);
  }
}

TEST_CASE("a sum over windows of a padded input read in place matches the interpreter") {
  // lower_reduce.cpp: the plane's loop cut where the reads come into bounds,
  // read unclamped there. The inputs also sit flush against unmapped pages
  // on either side, where a read out of bounds faults.
  uint64_t seed = 140;
  for (const PaddedWindows& p : padded_window_cases()) {
    CAPTURE(p.h);
    CAPTURE(p.w);
    CAPTURE(p.kh);
    CAPTURE(p.top);
    CAPTURE(p.dilation);
    check_fenced_graph(padded_window_sum(p), GroupKind::Reduction, seed++);
  }
}

namespace {

// A seeded random graph of elementwise ops over a few broadcastable args, maybe
// with one row reduction and a broadcast back.
Graph random_graph(std::mt19937_64& rng, DType dt, bool with_reduction, Shape* shape) {
  std::uniform_int_distribution<int> pick(0, 1000);
  const Shape s = {int64_t(1 + pick(rng) % 9), int64_t(1 + pick(rng) % 70)};
  *shape = s;
  Graph g;
  Builder b(g);
  std::vector<Value> pool = {b.arg(0, ty(dt, s)), b.arg(1, ty(dt, {s[1]})),
                             b.arg(2, ty(dt, {s[0], 1}))};
  static const std::vector<OpKind> unary = random_graph_ops(1), binary = random_graph_ops(2);
  const int n = 3 + pick(rng) % 10;
  for (int i = 0; i < n; ++i) {
    Value a = pool[size_t(pick(rng)) % pool.size()];
    Value v;
    switch (pick(rng) % 5) {
      case 0:
      case 1:
        v = b.unary(unary[size_t(pick(rng)) % unary.size()], a);
        break;
      case 2: {
        // Keep magnitudes tame: squash before exp-like growth.
        v = b.unary(OpKind::tanh, b.binary(binary[size_t(pick(rng)) % binary.size()], a,
                                           pool[size_t(pick(rng)) % pool.size()]));
        break;
      }
      case 3:
        v = b.binary(binary[size_t(pick(rng)) % binary.size()], a,
                     pool[size_t(pick(rng)) % pool.size()]);
        break;
      default:
        v = b.where(b.binary(OpKind::gt, a, b.scalar_like(a, 0.0)), a, b.unary(OpKind::sigmoid, a));
    }
    pool.push_back(v);
  }
  Value out = pool.back();
  if (g.type(out).shape != s) out = b.add(out, pool[0]);
  if (with_reduction) {
    Value m = b.op(OpKind::max, {out}, dims_attr({1}, true));
    Value e = b.unary(OpKind::exp, b.sub(out, m));
    out = b.mul(e, b.unary(OpKind::log, b.sum(e, {1}, true)));
  }
  g.outputs = {out};
  return g;
}

}  // namespace

// The random graphs' ops come from the table (op_table_util.h): the ones the
// hand-kept lists had, the newer smooth ones, and no step function.
TEST_CASE("random fused graphs draw every smooth elementwise op of the table") {
  const std::vector<OpKind> unary = random_graph_ops(1), binary = random_graph_ops(2);
  auto has = [](const std::vector<OpKind>& v, OpKind k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  for (OpKind k :
       {OpKind::exp, OpKind::tanh, OpKind::sigmoid, OpKind::neg, OpKind::abs, OpKind::relu,
        OpKind::sin, OpKind::gelu, OpKind::cos, OpKind::erf, OpKind::expm1})
    CHECK_MESSAGE(has(unary, k), op_name(k));
  for (OpKind k : {OpKind::add, OpKind::sub, OpKind::mul, OpKind::maximum, OpKind::minimum,
                   OpKind::logaddexp, OpKind::atan2, OpKind::hypot})
    CHECK_MESSAGE(has(binary, k), op_name(k));
  // Steps, partial domains, bool results.
  for (OpKind k : {OpKind::sign, OpKind::floor, OpKind::ceil, OpKind::round, OpKind::trunc,
                   OpKind::log, OpKind::sqrt, OpKind::logical_not, OpKind::cast})
    CHECK_MESSAGE(!has(unary, k), op_name(k));
  for (OpKind k : {OpKind::fmod, OpKind::remainder, OpKind::div, OpKind::pow, OpKind::gt})
    CHECK_MESSAGE(!has(binary, k), op_name(k));
  CHECK_FALSE(continuous_on_default_range(OpKind::floor));
  CHECK(continuous_on_default_range(OpKind::exp));
}

TEST_CASE("random fused graphs match the interpreter") {
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 40; ++i) {
    const DType dt = i % 3 == 0 ? DType::f64 : DType::f32;
    Shape s;
    Graph g = random_graph(rng, dt, i % 2 == 1, &s);
    CAPTURE(i);
    CAPTURE(g.str());
    std::vector<HostArray> args;
    std::vector<Buf> bufs;
    for (NodeId id : g.args()) {
      HostArray a = HostArray::make(g.node(id).type());
      Buf bb;
      bb.storage = a.storage;
      bb.type = a.type;
      fill_random(bb, rng, {-2, 2});
      args.push_back(a);
      bufs.push_back(bb);
    }
    std::vector<HostArray> want = interpret(g, args);
    FusionGroup grp = make_group(g, i % 2 == 1 ? GroupKind::Reduction : GroupKind::Elementwise,
                                 all_compute_nodes(g));
    CpuKernel k = compile_cpu_kernel(g, grp, {});
    std::vector<Buf> vals(g.size());
    for (NodeId id : g.args()) vals[id] = bufs[size_t(g.node(id).attrs.i(AttrKey::index))];
    auto outs = run_kernel(g, k, vals, grp, 0.5);
    const Buf& got = outs.at({g.outputs[0].node, g.outputs[0].index});
    CHECK(all_close(got.view(), want[0].view(), Tolerance{dt == DType::f32 ? 2e-5 : 1e-11, 1e-5}));
  }
}

TEST_CASE("graphs grouped by plan_fusion compile group by group and match the interpreter") {
  // A small MLP step with softmax: matmul epilogues, a softmax group, elementwise tails.
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("mlp.cpp", 7);
  Value x = b.arg(0, ty(DType::f32, {16, 24}));
  Value w1 = b.arg(1, ty(DType::f32, {24, 32}));
  Value b1 = b.arg(2, ty(DType::f32, {32}));
  Value w2 = b.arg(3, ty(DType::f32, {32, 10}));
  Value h = b.unary(OpKind::relu, b.add(b.matmul(x, w1), b1));
  b.loc = SourceLoc("mlp.cpp", 8);
  Value z = b.matmul(h, w2);
  Value m = b.op(OpKind::max, {z}, dims_attr({1}, true));
  Value e = b.unary(OpKind::exp, b.sub(z, m));
  Value p = b.div(e, b.sum(e, {1}, true));
  Value loss = b.sum(b.mul(p, p), {0, 1}, false);
  g.outputs = {p, loss, b.transpose_last(h)};

  std::mt19937_64 rng(77);
  std::vector<HostArray> args;
  for (NodeId id : g.args()) {
    HostArray a = HostArray::make(g.node(id).type());
    Buf bb{a.storage, a.type};
    fill_random(bb, rng, {-1, 1});
    args.push_back(a);
  }
  std::vector<HostArray> want = interpret(g, args);

  std::vector<FusionGroup> groups = plan_fusion(g);
  MESSAGE(fusion_plan_str(g, groups));
  std::vector<Buf> vals(g.size());
  for (NodeId id : g.args()) {
    const HostArray& a = args[size_t(g.node(id).attrs.i(AttrKey::index))];
    vals[id] = Buf{a.storage, a.type};
  }
  int kernels = 0;
  for (const FusionGroup& grp : groups) {
    CAPTURE(group_kind_name(grp.kind));
    CpuKernel k = compile_cpu_kernel(g, grp, {});
    CHECK(!k.info.sources.empty());
    if (grp.kind == GroupKind::Matmul) {
      const Node& mm = g.node(grp.nodes[0]);
      Buf r = make_buf(mm.type());
      std::vector<View> ins = {vals[mm.operands[0].node].view(), vals[mm.operands[1].node].view()};
      reference_kernel(OpKind::matmul, mm.attrs, ins, r.view());
      vals[grp.nodes[0]] = r;
    }
    if (!k.fn) continue;
    ++kernels;
    std::vector<void*> ptrs;
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const Value v = k.buffers[i];
      const bool produced =
          std::find(grp.outputs.begin(), grp.outputs.end(), v) != grp.outputs.end() &&
          !(grp.kind == GroupKind::Matmul && i == 0);
      if (produced) vals[v.node] = make_buf(g.type(v));
      ptrs.push_back(vals[v.node].data());
    }
    k.fn(ptrs.data(), 0, k.info.range);
  }
  CHECK(kernels >= 3);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    CAPTURE(i);
    CHECK(all_close(vals[g.outputs[i].node].view(), want[i].view(), Tolerance{1e-5, 1e-6}));
  }
}
