// Multi-op groups on the CUDA backend: softmax, log-softmax and layer norm as
// one kernel each (short rows, rows longer than a block, rows of length 1),
// matmul epilogues (also in place), chains with broadcast, permute, slice and
// pad views, several outputs, random fused graphs from seeds, and graphs
// grouped by plan_fusion; each compiled by NVRTC and emulated on the host.
#include <doctest/doctest.h>

#include <sstream>

#include "cuda_test_util.h"
#include "ir/parser.h"
#include "op_table_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Attrs dims_attr(std::vector<int64_t> d, bool keep) {
  return Attrs{{AttrKey::dims, std::move(d)}, {AttrKey::keepdim, int64_t(keep)}};
}

Attrs slice_attr(int64_t dim, int64_t start, int64_t end, int64_t step) {
  return Attrs{
      {AttrKey::dim, dim}, {AttrKey::start, start}, {AttrKey::end, end}, {AttrKey::step, step}};
}

Attrs pad_attr(int64_t dim, int64_t low, int64_t high, int64_t interior) {
  return Attrs{{AttrKey::dim, dim},
               {AttrKey::low, low},
               {AttrKey::high, high},
               {AttrKey::interior, interior}};
}

Graph softmax_graph(DType dt, const Shape& s) {
  const int64_t last = int64_t(s.size()) - 1;
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(dt, s));
  Value m = b.op(OpKind::max, {x}, dims_attr({last}, true));
  Value e = b.unary(OpKind::exp, b.sub(x, m));
  g.outputs = {b.div(e, b.sum(e, {last}, true))};
  return g;
}

Graph log_softmax_graph(DType dt, const Shape& s) {
  const int64_t last = int64_t(s.size()) - 1;
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(dt, s));
  Value m = b.op(OpKind::max, {x}, dims_attr({last}, false));
  Shape r = s;
  r.back() = 1;
  Value xs = b.sub(x, b.reshape(m, r));
  Value lse = b.unary(OpKind::log, b.sum(b.unary(OpKind::exp, xs), {last}, true));
  g.outputs = {b.sub(xs, lse), m};
  return g;
}

Graph layer_norm_graph(DType dt, const Shape& s) {
  const int64_t last = int64_t(s.size()) - 1;
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
  return g;
}

const std::vector<Shape> kRowShapes = {{4, 7}, {64, 1000}, {3, 1}, {2, 3, 33}, {5, 300}, {1, 64}};

}  // namespace

TEST_CASE("softmax, log-softmax and layer norm are one kernel each") {
  CudaCodegenOptions small_blocks;
  small_blocks.block_per_row_min_extent = 0;
  small_blocks.max_block = 128;
  CudaBatch batch;
  uint64_t seed = 20;
  for (const CudaCodegenOptions* opts : {static_cast<const CudaCodegenOptions*>(nullptr),
                                         static_cast<const CudaCodegenOptions*>(&small_blocks)}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Shape& s : kRowShapes) {
        const std::string l = std::string(dtype_name(dt)) + shape_str(s);
        const CudaKernelSource& k = batch.add_graph(softmax_graph(dt, s), GroupKind::Reduction,
                                                    seed++, {{-10, 10}}, {}, "softmax " + l, opts);
        CHECK(k.info.range == numel(s) / s.back());
        CHECK(k.launch.range == numel(s) / s.back());
        if (opts || s.back() >= 64) CHECK(k.launch.kind == CudaLaunch::BlockPerRow);
        batch.add_graph(log_softmax_graph(dt, s), GroupKind::Reduction, seed++, {{-10, 10}}, {},
                        "log_softmax " + l, opts);
        batch.add_graph(layer_norm_graph(dt, s), GroupKind::Reduction, seed++, {}, {},
                        "layer_norm " + l, opts);
      }
    }
  }
  batch.run();
}

TEST_CASE("the softmax kernel: three block reductions, row values broadcast, PTX with shuffles") {
  CudaBatch batch;
  const CudaKernelSource& k =
      batch.add_graph(softmax_graph(DType::f32, {64, 1000}), GroupKind::Reduction, 1, {{-10, 10}});
  CHECK(k.launch.kind == CudaLaunch::BlockPerRow);
  CHECK(k.launch.block == 256);
  CHECK(k.launch.range == 64);
  CHECK(k.needs_kernel);
  CHECK(k.name.rfind("kiln_cuda_", 0) == 0);
  CHECK(k.source.find("extern \"C\" __global__ void " + k.name +
                      "(void* const* buffers, long long begin, long long end)") !=
        std::string::npos);
  CHECK(k.source.find("const float* __restrict__ b0") != std::string::npos);
  // The row's max and sum combine in a block with their reductions' combine ops.
  CHECK(k.source.find("return kiln_max(x, y);") != std::string::npos);
  CHECK(k.source.find("return (x + y);") != std::string::npos);
  CHECK(k.source.find(k.name + "_combine0()") != std::string::npos);
  CHECK(k.source.find("expf(") != std::string::npos);
  CHECK(k.kernel_ir.find("parallel i0 in [0, 64)") != std::string::npos);
  // The same kernel from another graph has the same source and name.
  const CudaKernelSource& again =
      batch.add_graph(softmax_graph(DType::f32, {64, 1000}), GroupKind::Reduction, 2, {{-10, 10}});
  CHECK(again.name == k.name);
  CHECK(again.source == k.source);

  batch.run();
  if (nvrtc_version().empty()) return;  // built without the CUDA toolkit
  const CudaBinary bin = nvrtc_compile(k.source, k.name, 80, true);
  const std::string& ptx = bin.ptx;
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = ptx.find(what); p != std::string::npos; p = ptx.find(what, p + 1)) ++n;
    return n;
  };
  CHECK(count("shfl.sync.down") > 0);
  CHECK(count("shfl.sync.bfly") > 0);
  CHECK(count("bar.sync") >= 4);
  CHECK(count("ex2.approx") > 0);
  size_t instructions = 0;
  std::istringstream lines(ptx);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find_first_not_of(" \t");
    if (at == std::string::npos) continue;
    const char c = line[at];
    if (c == '/' || c == '.' || c == '$' || c == '{' || c == '}' || c == '(' || c == ')') continue;
    if (line.find(';') != std::string::npos) ++instructions;
  }
  MESSAGE("softmax f32[64,1000] for sm_80: PTX "
          << ptx.size() << " bytes, ~" << instructions << " instructions, "
          << count("shfl.sync.down") << " shfl.sync.down, " << count("shfl.sync.bfly")
          << " shfl.sync.bfly, " << count("bar.sync") << " bar.sync, " << count("ex2.approx")
          << " ex2.approx; cubin " << bin.cubin.size() << " bytes");
}

TEST_CASE("reductions with producers, epilogues, non-trailing dims, full reductions") {
  CudaCodegenOptions blocks;
  blocks.block_per_row_min_extent = 0;
  blocks.max_block = 64;
  CudaBatch batch;
  for (const CudaCodegenOptions* opts : {static_cast<const CudaCodegenOptions*>(nullptr),
                                         static_cast<const CudaCodegenOptions*>(&blocks)}) {
    {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(DType::f32, {6, 20, 9}));
      Value w = b.arg(1, ty(DType::f32, {20, 1}));
      Value p = b.mul(b.unary(OpKind::exp, b.mul(x, b.scalar_like(x, 0.1))), w);
      Value s = b.sum(p, {1}, false);  // [6, 9]
      Value mx = b.op(OpKind::max, {p}, dims_attr({1}, false));
      Value am = b.op(OpKind::argmax, {p}, Attrs{{AttrKey::dim, int64_t{1}}});
      g.outputs = {b.div(s, mx), am, p};
      batch.add_graph(g, GroupKind::Reduction, 31, {}, {}, "producers", opts);
    }
    {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(DType::f64, {33, 65}));
      g.outputs = {b.unary(OpKind::sqrt, b.sum(b.mul(x, x), {0, 1}, false))};
      batch.add_graph(g, GroupKind::Reduction, 32, {}, {}, "norm", opts);
    }
    {
      Graph g;
      Builder b(g);
      Value y = b.arg(0, ty(DType::f32, {40, 12}));
      g.outputs = {b.sum(b.permute(y, {1, 0}), {1}, true)};
      batch.add_graph(g, GroupKind::Reduction, 33, {}, {}, "permuted", opts);
    }
    {
      // argmax ties: integers on a tiny grid, rows longer than the block.
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(DType::i32, {7, 333}));
      g.outputs = {
          b.op(OpKind::argmax, {x}, Attrs{{AttrKey::dim, int64_t{1}}}),
          b.op(OpKind::argmin, {b.unary(OpKind::neg, x)}, Attrs{{AttrKey::dim, int64_t{1}}})};
      batch.add_graph(g, GroupKind::Reduction, 34, {{-1, 1}}, {}, "argmax ties", opts);
    }
    {
      // A sum over windows, nine rows a pass (a depthwise conv's weight
      // gradient: lower_reduce.cpp's unrolled_rows).
      Graph g = parse_graph(
          "%0 = arg {index=0} : f32[2,3,14,14]\n"
          "%1 = arg {index=1} : f32[2,3,12,12]\n"
          "%2 = unfold %0 {dim=2, size=3, step=1, dilation=1} : f32[2,3,12,14,3]\n"
          "%3 = unfold %2 {dim=3, size=3, step=1, dilation=1} : f32[2,3,12,12,3,3]\n"
          "%4 = permute %3 {perm=[0,1,4,5,2,3]} : f32[2,3,3,3,12,12]\n"
          "%5 = reshape %1 {shape=[2,3,1,1,12,12]} : f32[2,3,1,1,12,12]\n"
          "%6 = mul %4, %5 : f32[2,3,3,3,12,12]\n"
          "%7 = sum %6 {dims=[0,4,5], keepdim=0} : f32[3,3,3]\n"
          "return %7\n");
      batch.add_graph(g, GroupKind::Reduction, 35, {}, {}, "window taps", opts);
    }
    // The same with its pads in the kernel, read in place (lower_reduce.cpp).
    uint64_t seed = 140;
    for (const PaddedWindows& p : padded_window_cases())
      batch.add_graph(padded_window_sum(p), GroupKind::Reduction, seed++, {}, {},
                      "padded windows " + std::to_string(p.h) + "x" + std::to_string(p.w), opts);
  }
  batch.run();
}

TEST_CASE("reductions over rows of many lengths and block sizes") {
  CudaBatch batch;
  uint64_t seed = 900;
  for (int block : {32, 64, 256}) {
    CudaCodegenOptions opts;
    opts.block_per_row_min_extent = 0;
    opts.max_block = block;
    for (int64_t len : {1, 2, 31, 32, 33, 63, 65, 100, 257, 1000}) {
      for (OpKind k : table_reductions()) {
        for (DType dt : {DType::f32, DType::i64}) {
          Graph g;
          Builder b(g);
          Value x = b.arg(0, ty(dt, {3, len}));
          const bool arg = is_arg_reduction(k);
          g.outputs = {
              b.op(k, {x}, arg ? Attrs{{AttrKey::dim, int64_t{1}}} : dims_attr({1}, false))};
          const std::string l = std::string(op_name(k)) + " " + dtype_name(dt) + " len " +
                                std::to_string(len) + " block " + std::to_string(block);
          const CudaKernelSource& src =
              batch.add_graph(g, GroupKind::Reduction, seed++, {{-3, 3}}, {}, l, &opts);
          CHECK(src.launch.block == std::min<int64_t>(block, (len + 31) / 32 * 32));
        }
      }
    }
  }
  batch.run();
}

TEST_CASE("padded images' taps: rows, the image form and the plane form") {
  // lower.cpp's forms of a conv's taps: rows cut at the pads' edges (4
  // images), the image form (64 of 8x9) and the plane form (64 of 32x32 and
  // 17x20: reads unclamped where proven in bounds, column guards as tables).
  CudaBatch batch;
  uint64_t seed = 700;
  for (auto [n, h, w, k, low] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{4, 9, 30, 3, 1},
        {64, 8, 9, 3, 1},
        {64, 32, 32, 3, 1},
        {64, 17, 20, 5, 2}})
    batch.add_graph(
        padded_taps(DType::f32, n, h, w, k, low, false), GroupKind::Elementwise, seed++, {}, {},
        "taps " + std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w));
  batch.run();
}

TEST_CASE("elementwise chains with broadcasting, views inside the group, pad, several outputs") {
  CudaBatch batch;
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
      batch.add_graph(g, GroupKind::Elementwise, 11, {}, {}, "chain " + shape_str(s));
    }
  }
  {
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(DType::f32, {24, 30}));
    Value y = b.arg(1, ty(DType::f32, {30, 24}));
    Value z = b.arg(2, ty(DType::f32, {6, 4, 30}));
    Value xt = b.permute(b.unary(OpKind::exp, x), {1, 0});  // [30, 24]
    Value s = b.op(OpKind::slice, {y}, slice_attr(1, 0, 24, 1));
    Value zr = b.permute(b.reshape(z, {24, 30}), {1, 0});
    Value sum = b.add(b.add(xt, s), zr);
    Value sl = b.op(OpKind::slice, {sum}, slice_attr(0, 2, 29, 3));  // [9, 24]
    g.outputs = {b.mul(sl, b.scalar_like(sl, 3.0))};
    batch.add_graph(g, GroupKind::Elementwise, 12, {}, {}, "views");
  }
  {
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(DType::f64, {5, 17}));
    Value p = b.op(OpKind::pad, {b.unary(OpKind::exp, x)}, pad_attr(1, 2, 3, 1));  // [5, 38]
    Value q = b.op(OpKind::pad, {p}, pad_attr(0, 1, 0, 0));                        // [6, 38]
    g.outputs = {b.add(q, b.arg(1, ty(DType::f64, {38})))};
    batch.add_graph(g, GroupKind::Elementwise, 13, {}, {}, "pad");
  }
  {
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(DType::f32, {8, 40}));
    Value v = b.arg(1, ty(DType::f32, {40}));
    Value ev = b.unary(OpKind::exp, v);
    Value y = b.mul(x, ev);
    Value t = b.permute(y, {1, 0});
    g.outputs = {ev, b.add(y, b.scalar_like(y, 1.0)), b.unary(OpKind::neg, t)};
    const CudaKernelSource& k = batch.add_graph(g, GroupKind::Elementwise, 14, {}, {}, "outputs");
    CHECK(k.buffers.size() == 5);
  }
  {
    // A broadcast row times a long inner dim: the kernel is flattened over rows x inner.
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(DType::f32, {3, 4, 50}));
    Value r = b.arg(1, ty(DType::f32, {3, 1}));
    g.outputs = {b.add(b.permute(x, {1, 0, 2}), r)};
    const CudaKernelSource& k = batch.add_graph(g, GroupKind::Elementwise, 15, {}, {}, "rows");
    CHECK(k.launch.kind == CudaLaunch::GridStride);
    CHECK(k.launch.range == 600);
    CHECK(k.launch.inner == 50);
  }
  batch.run();
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
  Value lit_b = b.op_typed(OpKind::literal, {},
                           Attrs{{AttrKey::data, std::vector<int64_t>{1, 0, 0, 1, 1, 0}}},
                           ty(DType::b8, {6}));
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
  g.outputs = {b.where(lit_b, y, b.unary(OpKind::neg, y))};
  CudaBatch batch;
  const CudaKernelSource& k = batch.add_graph(g, GroupKind::Elementwise, 800);
  CHECK(k.source.find("_t0[") != std::string::npos);
  batch.run();
}
