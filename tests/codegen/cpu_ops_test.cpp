// Every op that can appear in an Elementwise, Reduction, Copy or Matmul group,
// compiled alone by the CPU backend over several shapes and dtypes, against
// the reference kernels (each run also split into two ranges).
#include <doctest/doctest.h>

#include "codegen_test_util.h"
#include "op_table_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Input ranges that keep each op in its domain (and away from overflow).
const std::vector<Shape> kUnaryShapes = {{}, {1}, {7}, {33}, {3, 17}, {64, 100}, {2, 3, 40}};

const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {{{}, {}},
                                                            {{7}, {7}},
                                                            {{33}, {}},
                                                            {{3, 17}, {17}},
                                                            {{3, 17}, {3, 1}},
                                                            {{4, 1, 5}, {1, 6, 1}},
                                                            {{64, 100}, {64, 100}},
                                                            {{64, 100}, {100}},
                                                            {{1}, {5, 1, 40}},
                                                            {{2, 1, 24}, {2, 3, 1}}};

}  // namespace

TEST_CASE("every unary op compiles and matches the reference (f32, f64)") {
  uint64_t seed = 1;
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Unary || k == OpKind::cast) continue;
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Shape& s : kUnaryShapes) {
        CAPTURE(std::string(op_name(k)));
        CAPTURE(std::string(dtype_name(dt)));
        CAPTURE(shape_str(s));
        Graph g = unary_graph(k, dt, s);
        check_whole_graph(g, GroupKind::Elementwise, seed++, {domain_range(k)});
      }
    }
  }
}

TEST_CASE("unary ops on integers and bools") {
  uint64_t seed = 100;
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Unary || k == OpKind::cast) continue;
    for (DType dt : {DType::u8, DType::i8, DType::i16, DType::i32, DType::i64, DType::b8}) {
      if (dt == DType::b8 && !takes_bool(k)) continue;
      CAPTURE(std::string(op_name(k)));
      CAPTURE(std::string(dtype_name(dt)));
      const Range r = integer_domain_range(k);
      Graph g = unary_graph(k, dt, {5, 37});
      check_whole_graph(g, GroupKind::Elementwise, seed++, {r});
    }
  }
}

TEST_CASE("cast between every pair of dtypes") {
  uint64_t seed = 200;
  const DType all[] = {DType::b8,  DType::u8,  DType::i8,  DType::i16,
                       DType::i32, DType::i64, DType::f32, DType::f64};
  for (DType from : all) {
    for (DType to : all) {
      CAPTURE(std::string(dtype_name(from)));
      CAPTURE(std::string(dtype_name(to)));
      Graph g = unary_graph(OpKind::cast, from, {3, 45}, Attrs{{AttrKey::dtype, to}});
      check_whole_graph(g, GroupKind::Elementwise, seed++, {{-100, 100}});
      // Small values and exact zeros, where float -> bool and float -> int matter.
      check_whole_graph(g, GroupKind::Elementwise, seed++, {{-1.5, 1.5}});
    }
  }
}

TEST_CASE("every binary op compiles and matches the reference with broadcasting (f32, f64)") {
  uint64_t seed = 300;
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Binary) continue;
    for (DType dt : {DType::f32, DType::f64}) {
      for (const auto& [sa, sb] : kBinaryShapes) {
        CAPTURE(std::string(op_name(k)));
        CAPTURE(std::string(dtype_name(dt)));
        CAPTURE(shape_str(sa));
        CAPTURE(shape_str(sb));
        Graph g = binary_graph(k, dt, sa, dt, sb);
        const std::vector<Range> ranges = domain_ranges(k);
        // Comparisons on a coarse grid so equal pairs occur.
        check_whole_graph(g, GroupKind::Elementwise, seed++, ranges);
      }
    }
  }
}

TEST_CASE("binary ops on integers, bools and mixed dtypes") {
  uint64_t seed = 400;
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::i32, DType::i32}, {DType::i64, DType::i64}, {DType::b8, DType::b8},
      {DType::i32, DType::i64}, {DType::i32, DType::f32}, {DType::b8, DType::f64},
      {DType::f32, DType::f64}, {DType::i64, DType::f32}, {DType::u8, DType::u8},
      {DType::i8, DType::i8},   {DType::i16, DType::i16}, {DType::u8, DType::i8},
      {DType::u8, DType::i16},  {DType::i8, DType::i32},  {DType::u8, DType::f32},
      {DType::i16, DType::i64}, {DType::b8, DType::u8}};
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Binary) continue;
    for (const auto& [da, db] : pairs) {
      CAPTURE(std::string(op_name(k)));
      CAPTURE(std::string(dtype_name(da)));
      CAPTURE(std::string(dtype_name(db)));
      Graph g = binary_graph(k, da, {4, 33}, db, {33});
      std::vector<Range> ranges = {{-6, 6}, {-6, 6}};
      if (k == OpKind::pow) ranges = {{-4, 4}, {-2, 6}};
      if (k == OpKind::pow && (is_floating(da) || is_floating(db))) ranges = {{0.1, 4}, {-2, 6}};
      check_whole_graph(g, GroupKind::Elementwise, seed++, ranges);
    }
  }
}

TEST_CASE("philox draws of every dtype and range give the reference's bits") {
  uint64_t seed = 450;
  for (int64_t n : {1, 7, 1000, 4099}) {
    CAPTURE(n);
    check_whole_graph(philox_graph(n), GroupKind::Elementwise, seed++, kPhiloxRanges,
                      Tolerance{0, 0});
  }
}

TEST_CASE("pow special cases: negative bases, integral exponents, zeros, infinities, NaN") {
  for (DType dt : {DType::f32, DType::f64}) {
    Graph g = binary_graph(OpKind::pow, dt, {11, 13}, dt, {13});
    std::vector<Buf> args = {make_buf(ty(dt, {11, 13})), make_buf(ty(dt, {13}))};
    const double xs[] = {-8, -2.5, -1, -0.5, -0.0, 0.0, 0.5, 1, 2, INFINITY, -INFINITY};
    const double ys[] = {-3, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 1.0 / 3, INFINITY, -INFINITY, NAN};
    visit_dtype(dt, [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_floating_point_v<T>) {
        for (int i = 0; i < 11; ++i)
          for (int j = 0; j < 13; ++j) static_cast<T*>(args[0].data())[i * 13 + j] = T(xs[i]);
        for (int j = 0; j < 13; ++j) static_cast<T*>(args[1].data())[j] = T(ys[j]);
      }
    });
    std::vector<Buf> vals = reference_eval(g, args);
    CAPTURE(std::string(dtype_name(dt)));
    check_group(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)), vals);
  }
}

TEST_CASE("where with broadcasting and mixed value dtypes") {
  uint64_t seed = 500;
  const std::vector<std::array<Shape, 3>> shapes = {{Shape{5, 20}, Shape{5, 20}, Shape{5, 20}},
                                                    {Shape{20}, Shape{5, 20}, Shape{}},
                                                    {Shape{5, 1}, Shape{1, 20}, Shape{5, 20}},
                                                    {Shape{}, Shape{3}, Shape{3}}};
  for (const auto& s : shapes) {
    for (auto [da, db] : {std::pair{DType::f32, DType::f32}, std::pair{DType::f64, DType::i32},
                          std::pair{DType::i64, DType::i64}, std::pair{DType::b8, DType::b8}}) {
      Graph g;
      Builder b(g);
      Value c = b.arg(0, ty(DType::b8, s[0]));
      Value x = b.arg(1, ty(da, s[1]));
      Value y = b.arg(2, ty(db, s[2]));
      g.outputs = {b.where(c, x, y)};
      check_whole_graph(g, GroupKind::Elementwise, seed++);
    }
  }
}

TEST_CASE("every reduction over several dims, keepdim, dtypes") {
  uint64_t seed = 600;
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {{}, {}},         {{7}, {0}},         {{5, 7}, {1}},       {{5, 7}, {0}},
      {{5, 7}, {0, 1}}, {{3, 4, 5}, {1}},   {{3, 4, 5}, {0, 2}}, {{3, 4, 5}, {2}},
      {{64, 100}, {1}}, {{2, 1, 300}, {2}}, {{6, 9}, {}}};
  for (OpKind k : table_reductions()) {
    for (DType dt : {DType::f32, DType::f64, DType::u8, DType::i8, DType::i16, DType::i32,
                     DType::i64, DType::b8}) {
      if (dt == DType::b8 && is_arg_reduction(k)) continue;
      for (const Case& c : cases) {
        for (int keep : {0, 1}) {
          const bool arg = is_arg_reduction(k);
          if (arg && c.dims.size() != 1) continue;
          CAPTURE(std::string(op_name(k)));
          CAPTURE(std::string(dtype_name(dt)));
          CAPTURE(shape_str(c.shape));
          CAPTURE(keep);
          Graph g;
          Builder b(g);
          Value x = b.arg(0, ty(dt, c.shape));
          Attrs a = arg ? Attrs{{AttrKey::dim, c.dims[0]}, {AttrKey::keepdim, int64_t(keep)}}
                        : Attrs{{AttrKey::dims, c.dims}, {AttrKey::keepdim, int64_t(keep)}};
          g.outputs = {b.op(k, {x}, a)};
          // Integers on a small grid, so ties (and first-index argmax) are exercised.
          check_whole_graph(g, GroupKind::Reduction, seed++, {{-4, 4}},
                            Tolerance{dt == DType::f32 ? 1e-5 : 1e-12, 1e-5});
        }
      }
    }
  }
}

TEST_CASE("max, min and argmax propagate NaN like the reference") {
  for (OpKind k : table_reductions()) {
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(DType::f32, {4, 50}));
    const bool arg = is_arg_reduction(k);
    g.outputs = {b.op(
        k, {x},
        arg ? Attrs{{AttrKey::dim, int64_t{1}}} : Attrs{{AttrKey::dims, std::vector<int64_t>{1}}})};
    Buf in = make_buf(ty(DType::f32, {4, 50}));
    std::mt19937_64 rng(9);
    fill_random(in, rng);
    float* p = static_cast<float*>(in.data());
    p[17] = NAN;      // row 0: one NaN
    p[50 + 3] = NAN;  // row 1: two NaNs
    p[50 + 40] = NAN;
    p[100 + 7] = INFINITY;  // row 2: infinities
    p[100 + 9] = -INFINITY;
    std::vector<Buf> vals = reference_eval(g, {in});
    CAPTURE(std::string(op_name(k)));
    check_group(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)), vals);
  }
}

TEST_CASE("movement ops as copy groups") {
  uint64_t seed = 700;
  struct Case {
    OpKind op;
    Shape in;
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {OpKind::reshape, {6, 20}, Attrs{{AttrKey::shape, std::vector<int64_t>{4, 30}}}},
      {OpKind::reshape, {2, 3, 4}, Attrs{{AttrKey::shape, std::vector<int64_t>{24}}}},
      {OpKind::reshape, {}, Attrs{{AttrKey::shape, std::vector<int64_t>{1, 1}}}},
      {OpKind::expand, {1, 20}, Attrs{{AttrKey::shape, std::vector<int64_t>{7, 20}}}},
      {OpKind::expand, {5, 1}, Attrs{{AttrKey::shape, std::vector<int64_t>{3, 5, 33}}}},
      {OpKind::expand, {}, Attrs{{AttrKey::shape, std::vector<int64_t>{4, 4}}}},
      {OpKind::permute, {30, 40}, Attrs{{AttrKey::perm, std::vector<int64_t>{1, 0}}}},
      {OpKind::permute, {2, 3, 20}, Attrs{{AttrKey::perm, std::vector<int64_t>{2, 0, 1}}}},
      {OpKind::slice,
       {10, 40},
       Attrs{{AttrKey::dim, int64_t{1}},
             {AttrKey::start, int64_t{3}},
             {AttrKey::end, int64_t{37}},
             {AttrKey::step, int64_t{2}}}},
      {OpKind::slice,
       {10, 40},
       Attrs{{AttrKey::dim, int64_t{0}},
             {AttrKey::start, int64_t{1}},
             {AttrKey::end, int64_t{9}},
             {AttrKey::step, int64_t{3}}}},
      {OpKind::slice,
       {10, 4},
       Attrs{{AttrKey::dim, int64_t{0}},
             {AttrKey::start, int64_t{5}},
             {AttrKey::end, int64_t{5}},
             {AttrKey::step, int64_t{1}}}},
      {OpKind::unfold,
       {6, 20},
       Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::size, int64_t{4}}, {AttrKey::step, int64_t{3}}}},
      {OpKind::unfold,
       {9, 5},
       Attrs{{AttrKey::dim, int64_t{0}},
             {AttrKey::size, int64_t{3}},
             {AttrKey::step, int64_t{1}},
             {AttrKey::dilation, int64_t{2}}}},
      {OpKind::pad,
       {6, 20},
       Attrs{{AttrKey::dim, int64_t{1}},
             {AttrKey::low, int64_t{3}},
             {AttrKey::high, int64_t{5}},
             {AttrKey::interior, int64_t{0}}}},
      {OpKind::pad,
       {6, 20},
       Attrs{{AttrKey::dim, int64_t{0}},
             {AttrKey::low, int64_t{0}},
             {AttrKey::high, int64_t{2}},
             {AttrKey::interior, int64_t{2}}}},
      {OpKind::pad,
       {7},
       Attrs{{AttrKey::dim, int64_t{0}},
             {AttrKey::low, int64_t{2}},
             {AttrKey::high, int64_t{1}},
             {AttrKey::interior, int64_t{1}}}},
  };
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64, DType::i64, DType::b8}) {
      CAPTURE(std::string(op_name(c.op)));
      CAPTURE(attrs_str(c.attrs));
      CAPTURE(std::string(dtype_name(dt)));
      Graph g = unary_graph(c.op, dt, c.in, c.attrs);
      check_whole_graph(g, GroupKind::Copy, seed++);
    }
  }
}

TEST_CASE("creation ops inside a group: constant, literal, arange") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {4, 6}));
  Value c = b.constant(2.5, DType::f32);
  Value shaped = b.constant(-1.0, DType::f32, {4, 1});
  Value lit = b.op_typed(OpKind::literal, {},
                         Attrs{{AttrKey::data, std::vector<double>{1.5, -2, 0.25, 8, 1e-3, 3}}},
                         ty(DType::f32, {6}));
  Value lit_i =
      b.op_typed(OpKind::literal, {}, Attrs{{AttrKey::data, std::vector<int64_t>{1, -2, 3, 4}}},
                 ty(DType::i64, {4, 1}));
  Value ar =
      b.op_typed(OpKind::arange, {}, Attrs{{AttrKey::start, 0.5}, {AttrKey::step, int64_t{2}}},
                 ty(DType::f32, {6}));
  Value ar_i = b.op_typed(OpKind::arange, {},
                          Attrs{{AttrKey::start, int64_t{-3}}, {AttrKey::step, int64_t{1}}},
                          ty(DType::i32, {4, 1}));
  Value y = b.add(b.mul(x, c), shaped);
  y = b.add(b.mul(y, lit), ar);
  y = b.add(y, lit_i);
  y = b.mul(y, ar_i);
  g.outputs = {y};
  CpuKernel k = check_whole_graph(g, GroupKind::Elementwise, 800);
  CHECK(k.info.flops > 0);
}

TEST_CASE("matmul groups: the epilogue only, a lone matmul has no kernel, in-place epilogue") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {8, 32}));
  Value w = b.arg(1, ty(DType::f32, {32, 20}));
  Value bias = b.arg(2, ty(DType::f32, {20}));
  Value mm = b.matmul(x, w);
  Value y = b.unary(OpKind::relu, b.add(mm, bias));
  g.outputs = {y};
  std::mt19937_64 rng(5);
  std::vector<Buf> args;
  for (NodeId id : g.args()) {
    args.push_back(make_buf(g.node(id).type()));
    fill_random(args.back(), rng);
  }
  std::vector<Buf> vals = reference_eval(g, args);
  std::vector<NodeId> nodes = all_compute_nodes(g);
  FusionGroup grp = make_group(g, GroupKind::Matmul, nodes);
  CpuKernel k = check_group(g, grp, vals);
  REQUIRE(k.buffers.size() == 3);
  CHECK(k.buffers[0] == mm);
  CHECK(k.buffers[1] == bias);
  CHECK(k.buffers[2] == y);
  CHECK(k.info.flops >= 2 * 8 * 32 * 20);

  // In place: the epilogue overwrites the matmul result.
  CpuCompileOptions inplace;
  inplace.epilogue_in_place = true;
  CpuKernel ki = compile_cpu_kernel(g, grp, inplace);
  Buf acc = make_buf(g.type(mm));
  std::memcpy(acc.data(), vals[mm.node].data(), acc.storage->bytes());
  void* ptrs[] = {acc.data(), vals[bias.node].data(), acc.data()};
  ki.fn(ptrs, 0, ki.info.range / 2);
  ki.fn(ptrs, ki.info.range / 2, ki.info.range);
  CHECK(all_close(acc.view(), vals[y.node].view()));

  // A lone matmul: BLAS does everything.
  Graph g2;
  Builder b2(g2);
  Value mm2 = b2.matmul(b2.arg(0, ty(DType::f32, {8, 32})), b2.arg(1, ty(DType::f32, {32, 20})));
  g2.outputs = {mm2};
  CpuKernel lone = compile_cpu_kernel(g2, make_group(g2, GroupKind::Matmul, {mm2.node}), {});
  CHECK(static_cast<bool>(lone.fn) == false);
  REQUIRE(lone.buffers.size() == 1);
  CHECK(lone.buffers[0] == mm2);
  CHECK(lone.info.flops == 2 * 8 * 32 * 20);
}

TEST_CASE("an in-place epilogue that reads other elements is refused") {
  Graph g;
  Builder b(g);
  Value mm = b.matmul(b.arg(0, ty(DType::f32, {8, 8})), b.arg(1, ty(DType::f32, {8, 8})));
  g.outputs = {b.add(mm, b.permute(mm, {1, 0}))};
  CpuCompileOptions inplace;
  inplace.epilogue_in_place = true;
  FusionGroup grp = make_group(g, GroupKind::Matmul, all_compute_nodes(g));
  CHECK_THROWS_WITH_AS(compile_cpu_kernel(g, grp, inplace),
                       doctest::Contains("cannot run in place"), Error);
}
