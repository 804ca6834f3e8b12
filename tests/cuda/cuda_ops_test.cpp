// Every op that can appear in an Elementwise, Reduction, Copy or Matmul group,
// alone in a kernel generated as CUDA C: compiled by NVRTC for sm_80 and sm_90
// (PTX and cubin) and, with the host prelude, run under emulation against the
// reference kernels. Shapes and ranges follow tests/codegen/cpu_ops_test.cpp.
#include <doctest/doctest.h>

#include "cuda_test_util.h"
#include "op_table_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::string label(OpKind k, DType a, const Shape& s) {
  return std::string(op_name(k)) + " " + dtype_name(a) + shape_str(s);
}

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

TEST_CASE("every unary op (f32, f64)") {
  CudaBatch batch;
  uint64_t seed = 1;
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Unary || k == OpKind::cast) continue;
    for (DType dt : {DType::f32, DType::f64})
      for (const Shape& s : kUnaryShapes)
        batch.add_graph(unary_graph(k, dt, s), GroupKind::Elementwise, seed++, {domain_range(k)}, {},
                        label(k, dt, s));
  }
  batch.run();
}

TEST_CASE("unary ops on integers and bools") {
  CudaBatch batch;
  uint64_t seed = 100;
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Unary || k == OpKind::cast) continue;
    for (DType dt : {DType::u8, DType::i8, DType::i16, DType::i32, DType::i64, DType::b8}) {
      if (dt == DType::b8 && !takes_bool(k)) continue;
      const Range r = integer_domain_range(k);
      batch.add_graph(unary_graph(k, dt, {5, 37}), GroupKind::Elementwise, seed++, {r}, {},
                      label(k, dt, {5, 37}));
    }
  }
  batch.run();
}

TEST_CASE("cast between every pair of dtypes") {
  CudaBatch batch;
  uint64_t seed = 200;
  const DType all[] = {DType::b8,  DType::u8,  DType::i8,  DType::i16,
                       DType::i32, DType::i64, DType::f32, DType::f64};
  for (DType from : all) {
    for (DType to : all) {
      const std::string l = std::string(dtype_name(from)) + " -> " + dtype_name(to);
      Graph g = unary_graph(OpKind::cast, from, {3, 45}, Attrs{{AttrKey::dtype, to}});
      batch.add_graph(g, GroupKind::Elementwise, seed++, {{-100, 100}}, {}, l);
      batch.add_graph(g, GroupKind::Elementwise, seed++, {{-1.5, 1.5}}, {}, l + " (small)");
    }
  }
  batch.run();
}

TEST_CASE("every binary op with broadcasting (f32, f64)") {
  CudaBatch batch;
  uint64_t seed = 300;
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Binary) continue;
    for (DType dt : {DType::f32, DType::f64}) {
      for (const auto& [sa, sb] : kBinaryShapes) {
        const std::vector<Range> ranges = domain_ranges(k);
        batch.add_graph(binary_graph(k, dt, sa, dt, sb), GroupKind::Elementwise, seed++, ranges, {},
                        label(k, dt, sa) + " x " + shape_str(sb));
      }
    }
  }
  batch.run();
}

TEST_CASE("binary ops on integers, bools and mixed dtypes") {
  CudaBatch batch;
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
      std::vector<Range> ranges = {{-6, 6}, {-6, 6}};
      if (k == OpKind::pow) ranges = {{-4, 4}, {-2, 6}};
      if (k == OpKind::pow && (is_floating(da) || is_floating(db))) ranges = {{0.1, 4}, {-2, 6}};
      batch.add_graph(binary_graph(k, da, {4, 33}, db, {33}), GroupKind::Elementwise, seed++,
                      ranges, {}, label(k, da, {4, 33}) + " x " + dtype_name(db));
    }
  }
  batch.run();
}

TEST_CASE("philox draws of every dtype and range give the reference's bits") {
  CudaBatch batch;
  uint64_t seed = 450;
  for (int64_t n : {1, 7, 1000, 4099})
    batch.add_graph(philox_graph(n), GroupKind::Elementwise, seed++, kPhiloxRanges,
                    Tolerance{0, 0}, "philox draws, n = " + std::to_string(n));
  batch.run();
}

TEST_CASE("integer arithmetic wraps around; division by zero and -1; powers") {
  CudaBatch batch;
  for (DType dt : {DType::i32, DType::i64}) {
    for (OpKind k : {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div, OpKind::pow}) {
      auto g = std::make_shared<Graph>(binary_graph(k, dt, {9, 9}, dt, {9}));
      std::vector<Buf> args = {make_buf(ty(dt, {9, 9})), make_buf(ty(dt, {9}))};
      const int64_t big = dt == DType::i32 ? std::numeric_limits<int32_t>::max()
                                           : std::numeric_limits<int64_t>::max();
      const int64_t xs[] = {big, -big - 1, -1, 0, 1, 2, -3, big / 2, 7};
      const int64_t ys[] = {big, -1, 0, 1, 2, 3, -2, 62, -big - 1};
      visit_dtype(dt, [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          for (int i = 0; i < 81; ++i) static_cast<T*>(args[0].data())[i] = T(xs[i / 9]);
          for (int j = 0; j < 9; ++j) static_cast<T*>(args[1].data())[j] = T(ys[j]);
        }
      });
      std::vector<Buf> vals = reference_eval(*g, args);
      batch.add(g, make_group(*g, GroupKind::Elementwise, all_compute_nodes(*g)), vals, {},
                label(k, dt, {9, 9}));
    }
  }
  batch.run();
}

TEST_CASE("pow special cases: negative bases, zeros, infinities, NaN") {
  CudaBatch batch;
  for (DType dt : {DType::f32, DType::f64}) {
    auto g = std::make_shared<Graph>(binary_graph(OpKind::pow, dt, {11, 13}, dt, {13}));
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
    std::vector<Buf> vals = reference_eval(*g, args);
    batch.add(g, make_group(*g, GroupKind::Elementwise, all_compute_nodes(*g)), vals, {},
              dtype_name(dt));
  }
  batch.run();
}

TEST_CASE("where with broadcasting and mixed value dtypes") {
  CudaBatch batch;
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
      batch.add_graph(g, GroupKind::Elementwise, seed++, {}, {}, shape_str(s[1]));
    }
  }
  batch.run();
}

TEST_CASE("every reduction over several dims, keepdim, dtypes; short rows and block rows") {
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {{}, {}},         {{7}, {0}},         {{5, 7}, {1}},       {{5, 7}, {0}},
      {{5, 7}, {0, 1}}, {{3, 4, 5}, {1}},   {{3, 4, 5}, {0, 2}}, {{3, 4, 5}, {2}},
      {{64, 100}, {1}}, {{2, 1, 300}, {2}}, {{6, 9}, {}}};
  // Default launches (short rows one thread each), and every row a block of 64.
  CudaCodegenOptions blocks;
  blocks.block_per_row_min_extent = 0;
  blocks.max_block = 64;
  for (const CudaCodegenOptions* opts : {static_cast<const CudaCodegenOptions*>(nullptr),
                                         static_cast<const CudaCodegenOptions*>(&blocks)}) {
    CudaBatch batch;
    uint64_t seed = 600;
    for (OpKind k : table_reductions()) {
      for (DType dt : {DType::f32, DType::f64, DType::u8, DType::i8, DType::i16, DType::i32,
                       DType::i64, DType::b8}) {
        if (dt == DType::b8 && is_arg_reduction(k)) continue;
        for (const Case& c : cases) {
          for (int keep : {0, 1}) {
            const bool arg = is_arg_reduction(k);
            if (arg && c.dims.size() != 1) continue;
            Graph g;
            Builder b(g);
            Value x = b.arg(0, ty(dt, c.shape));
            Attrs a = arg ? Attrs{{AttrKey::dim, c.dims[0]}, {AttrKey::keepdim, int64_t(keep)}}
                          : Attrs{{AttrKey::dims, c.dims}, {AttrKey::keepdim, int64_t(keep)}};
            g.outputs = {b.op(k, {x}, a)};
            const CudaKernelSource& src =
                batch.add_graph(g, GroupKind::Reduction, seed++, {{-4, 4}},
                                Tolerance{dt == DType::f32 ? 1e-5 : 1e-12, 1e-5},
                                label(k, dt, c.shape) + " keep " + std::to_string(keep), opts);
            if (opts) CHECK(src.launch.kind == CudaLaunch::BlockPerRow);
          }
        }
      }
    }
    batch.run();
  }
}

TEST_CASE("max, min and argmax propagate NaN like the reference, in threads and blocks") {
  CudaCodegenOptions blocks;
  blocks.block_per_row_min_extent = 0;
  blocks.max_block = 64;
  CudaBatch batch;
  for (const CudaCodegenOptions* opts : {static_cast<const CudaCodegenOptions*>(nullptr),
                                         static_cast<const CudaCodegenOptions*>(&blocks)}) {
    for (OpKind k : table_reductions()) {
      auto g = std::make_shared<Graph>();
      Builder b(*g);
      Value x = b.arg(0, ty(DType::f32, {4, 150}));
      const bool arg = is_arg_reduction(k);
      g->outputs = {b.op(k, {x},
                         arg ? Attrs{{AttrKey::dim, int64_t{1}}}
                             : Attrs{{AttrKey::dims, std::vector<int64_t>{1}}})};
      Buf in = make_buf(ty(DType::f32, {4, 150}));
      std::mt19937_64 rng(9);
      fill_random(in, rng);
      float* p = static_cast<float*>(in.data());
      p[17] = NAN;       // row 0: one NaN
      p[150 + 3] = NAN;  // row 1: two NaNs, in different threads
      p[150 + 140] = NAN;
      p[300 + 7] = INFINITY;  // row 2: infinities
      p[300 + 9] = -INFINITY;
      p[300 + 100] = INFINITY;
      std::vector<Buf> vals = reference_eval(*g, {in});
      batch.add(g, make_group(*g, GroupKind::Reduction, all_compute_nodes(*g)), vals, {},
                op_name(k), opts);
    }
  }
  batch.run();
}
