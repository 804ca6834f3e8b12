// The CUDA backend around the kernels: matmul epilogues (in place too) and lone
// matmuls, groups made by plan_fusion, random fused graphs with views, NVRTC's
// disk cache and errors, and the host emulation's own checks (any grid, and
// divergence reported instead of hanging).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "codegen/cuda_codegen.h"
#include "codegen/lower.h"
#include "cuda_test_util.h"
#include "op_table_util.h"
#include "runtime/object_cache.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Attrs dims_attr(std::vector<int64_t> d, bool keep) {
  return Attrs{{AttrKey::dims, std::move(d)}, {AttrKey::keepdim, int64_t(keep)}};
}

// Every node's reference value for random args.
std::vector<Buf> random_reference(const Graph& g, uint64_t seed, Range r = {-1, 1}) {
  std::mt19937_64 rng(seed);
  std::vector<Buf> args;
  for (NodeId id : g.args()) {
    args.push_back(make_buf(g.node(id).type()));
    fill_random(args.back(), rng, r);
  }
  return reference_eval(g, args);
}

// A seeded random graph of elementwise ops over broadcast, permuted, sliced and
// padded arguments, maybe ending in a softmax-like row reduction.
Graph random_graph(std::mt19937_64& rng, DType dt, bool with_reduction) {
  std::uniform_int_distribution<int> pick(0, 1000);
  const Shape s = {int64_t(1 + pick(rng) % 9), int64_t(1 + pick(rng) % 90)};
  Graph g;
  Builder b(g);
  Value permuted = b.permute(b.arg(3, ty(dt, {s[1], s[0]})), {1, 0});
  Value sliced = b.op(OpKind::slice, {b.arg(4, ty(dt, {s[0], 2 * s[1] + 1}))},
                      Attrs{{AttrKey::dim, int64_t{1}},
                            {AttrKey::start, int64_t{1}},
                            {AttrKey::end, 2 * s[1] + 1},
                            {AttrKey::step, int64_t{2}}});
  Value padded = b.op(OpKind::pad, {b.arg(5, ty(dt, {s[0], s[1] > 2 ? s[1] - 2 : 1}))},
                      Attrs{{AttrKey::dim, int64_t{1}},
                            {AttrKey::low, int64_t{s[1] > 2 ? 1 : 0}},
                            {AttrKey::high, int64_t{s[1] > 2 ? 1 : s[1] - 1}},
                            {AttrKey::interior, int64_t{0}}});
  std::vector<Value> pool = {b.arg(0, ty(dt, s)),
                             b.arg(1, ty(dt, {s[1]})),
                             b.arg(2, ty(dt, {s[0], 1})),
                             permuted,
                             sliced,
                             padded};
  static const std::vector<OpKind> unary = random_graph_ops(1), binary = random_graph_ops(2);
  const int n = 3 + pick(rng) % 10;
  for (int i = 0; i < n; ++i) {
    Value a = pool[size_t(pick(rng)) % pool.size()];
    Value c = pool[size_t(pick(rng)) % pool.size()];
    Value v;
    switch (pick(rng) % 5) {
      case 0:
      case 1:
        v = b.unary(unary[size_t(pick(rng)) % unary.size()], a);
        break;
      case 2:
        v = b.unary(OpKind::tanh, b.binary(binary[size_t(pick(rng)) % binary.size()], a, c));
        break;
      case 3:
        v = b.binary(binary[size_t(pick(rng)) % binary.size()], a, c);
        break;
      default:
        v = b.where(b.binary(OpKind::gt, a, b.scalar_like(a, 0.0)), a, b.unary(OpKind::sigmoid, a));
    }
    pool.push_back(v);
  }
  Value out = pool.back();
  if (g.type(out).shape != s) out = b.add(out, pool[0]);
  for (size_t i = 3; i < 6; ++i) out = b.add(out, pool[i]);  // every view is used
  if (with_reduction) {
    Value m = b.op(OpKind::max, {out}, dims_attr({1}, true));
    Value e = b.unary(OpKind::exp, b.sub(out, m));
    out = b.mul(e, b.unary(OpKind::log, b.sum(e, {1}, true)));
  }
  g.outputs = {out};
  return g;
}

}  // namespace

TEST_CASE("matmul groups: the epilogue only, in place, and a lone matmul needs no kernel") {
  auto g = std::make_shared<Graph>();
  Builder b(*g);
  Value x = b.arg(0, ty(DType::f32, {8, 32}));
  Value w = b.arg(1, ty(DType::f32, {32, 20}));
  Value bias = b.arg(2, ty(DType::f32, {20}));
  Value mm = b.matmul(x, w);
  Value y = b.unary(OpKind::relu, b.add(mm, bias));
  g->outputs = {y};
  std::vector<Buf> vals = random_reference(*g, 5);
  FusionGroup grp = make_group(*g, GroupKind::Matmul, all_compute_nodes(*g));
  CudaBatch batch;
  const CudaKernelSource& k = batch.add(g, grp, vals, {}, "matmul + bias + relu");
  REQUIRE(k.buffers.size() == 3);
  CHECK(k.buffers[0] == mm);
  CHECK(k.buffers[1] == bias);
  CHECK(k.buffers[2] == y);
  CHECK(k.info.flops >= 2 * 8 * 32 * 20);
  batch.run();

  // In place: the epilogue overwrites the product, through the product's pointer.
  CudaCodegenOptions inplace;
  inplace.epilogue_in_place = true;
  const CudaKernelSource ki = generate_cuda_kernel(*g, grp, inplace);
  CHECK(ki.source.find("float* __restrict__ b0 = (float*)buffers[0]") != std::string::npos);
  CudaHostModule m({ki.source});
  Buf acc = make_buf(g->type(mm));
  std::memcpy(acc.data(), vals[mm.node].data(), acc.storage->bytes());
  void* ptrs[] = {acc.data(), vals[bias.node].data(), acc.data()};
  m.launch(ki, ptrs, 0, ki.launch.range);
  CHECK(all_close(acc.view(), vals[y.node].view()));
  if (!nvrtc_version().empty()) CHECK_NOTHROW(nvrtc_compile(ki.source, ki.name, 80, false));

  // A lone matmul: cuBLAS does everything.
  Graph g2;
  Builder b2(g2);
  Value mm2 = b2.matmul(b2.arg(0, ty(DType::f32, {8, 32})), b2.arg(1, ty(DType::f32, {32, 20})));
  g2.outputs = {mm2};
  const CudaKernelSource lone =
      generate_cuda_kernel(g2, make_group(g2, GroupKind::Matmul, {mm2.node}));
  CHECK_FALSE(lone.needs_kernel);
  CHECK(lone.source.empty());
  REQUIRE(lone.buffers.size() == 1);
  CHECK(lone.buffers[0] == mm2);
}

TEST_CASE(
    "an output stored in place over an input goes through one pointer, not the read-only cache") {
  // A parameter update p - 0.5 * grad stored over p, as the schedule plans it (p is an
  // argument here, for the reference evaluation).
  auto g = std::make_shared<Graph>();
  Builder b(*g);
  Value grad = b.arg(0, ty(DType::f32, {16, 33}));
  Value p = b.arg(1, ty(DType::f32, {16, 33}));
  Value y = b.sub(p, b.mul(grad, b.scalar_like(grad, 0.5)));
  g->outputs = {y};
  std::vector<Buf> vals = random_reference(*g, 9);
  FusionGroup grp = make_group(*g, GroupKind::Elementwise, all_compute_nodes(*g));
  kir::Kernel lowered = lower_group(*g, grp);
  const auto may = overwritable(grp, lowered);
  REQUIRE(std::find(may.begin(), may.end(), std::pair<Value, Value>{y, p}) != may.end());
  store_in_place(lowered, {{y, p}});
  const CudaKernelSource k = generate_cuda_kernel(*g, grp, std::move(lowered), {});
  int32_t pi = -1;
  for (size_t i = 0; i < k.buffers.size(); ++i)
    if (k.buffers[i] == p) pi = int32_t(i);
  REQUIRE(pi >= 0);
  const std::string bp = "b" + std::to_string(pi);
  CHECK(k.source.find("float* __restrict__ " + bp + " = (float*)") != std::string::npos);
  CHECK(k.source.find("const float* __restrict__ " + bp) == std::string::npos);
  CHECK(k.source.find("__ldg(" + bp) == std::string::npos);
  // Emulated with p's buffer as both the input and the output.
  Buf pbuf = make_buf(g->type(p));
  std::memcpy(pbuf.data(), vals[p.node].data(), pbuf.storage->bytes());
  std::vector<void*> ptrs;
  for (Value v : k.buffers) ptrs.push_back(v == p || v == y ? pbuf.data() : vals[v.node].data());
  CudaHostModule m({k.source});
  m.launch(k, ptrs.data(), 0, k.launch.range);
  CHECK(all_close(pbuf.view(), vals[y.node].view()));
  if (!nvrtc_version().empty()) CHECK_NOTHROW(nvrtc_compile(k.source, k.name, 80, false));
}

TEST_CASE("groups made by plan_fusion: an MLP step with softmax and a loss") {
  auto g = std::make_shared<Graph>();
  Builder b(*g);
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
  g->outputs = {p, loss, b.transpose_last(h)};
  std::vector<Buf> vals = random_reference(*g, 77);
  CudaBatch batch;
  int kernels = 0;
  for (const FusionGroup& grp : plan_fusion(*g)) {
    if (grp.kind == GroupKind::Opaque) continue;
    const CudaKernelSource& k =
        batch.add(g, grp, vals, Tolerance{1e-5, 1e-6}, group_kind_name(grp.kind));
    CHECK(!k.info.sources.empty());
    kernels += k.needs_kernel;
  }
  CHECK(kernels >= 3);
  batch.run();
}

TEST_CASE("random fused graphs with views match the reference") {
  CudaCodegenOptions blocks;
  blocks.block_per_row_min_extent = 0;
  blocks.max_block = 64;
  std::mt19937_64 rng(2024);
  CudaBatch batch;
  for (int i = 0; i < 40; ++i) {
    const DType dt = i % 3 == 0 ? DType::f64 : DType::f32;
    const bool reduce = i % 2 == 1;
    auto g = std::make_shared<Graph>(random_graph(rng, dt, reduce));
    std::vector<Buf> vals = random_reference(*g, 1000 + i, {-2, 2});
    FusionGroup grp = make_group(*g, reduce ? GroupKind::Reduction : GroupKind::Elementwise,
                                 all_compute_nodes(*g));
    batch.add(g, grp, vals, Tolerance{dt == DType::f32 ? 2e-5 : 1e-11, 1e-5},
              "graph " + std::to_string(i) + ":\n" + g->str(), i % 4 == 3 ? &blocks : nullptr);
  }
  batch.run();
}

TEST_CASE("opaque groups have no CUDA kernel") {
  Graph g;
  Builder b(g);
  const Value r(b.op_multi(OpKind::custom, {b.arg(0, ty(DType::f32, {4}))},
                           Attrs{{AttrKey::fn, int64_t{1}}}, {ty(DType::f32, {4})}),
                0);
  g.outputs = {r};
  CHECK_THROWS_AS(generate_cuda_kernel(g, make_group(g, GroupKind::Opaque, {r.node})), Error);
}

TEST_CASE(
    "NVRTC: an entry with a valid header and checksum but another kernel's binary is recompiled "
    "(#32.9)") {
  auto kernel = [](OpKind op) {
    Graph g;
    Builder b(g);
    g.outputs = {b.unary(op, b.arg(0, ty(DType::f32, {100})))};
    return generate_cuda_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)));
  };
  const CudaKernelSource k = kernel(OpKind::gelu), other = kernel(OpKind::exp);
  REQUIRE(k.name != other.name);
  if (nvrtc_version().empty()) return;  // built without the CUDA toolkit
  const auto base =
      std::filesystem::temp_directory_path() / ("kiln-nvrtc-wrong-" + std::to_string(::getpid()));
  const std::string dir = (base / "k").string(), other_dir = (base / "other").string();
  std::filesystem::remove_all(base);
  const CudaBinary first = nvrtc_compile(k.source, k.name, 80, true, dir);
  (void)nvrtc_compile(other.source, other.name, 80, true, other_dir);
  auto only_key = [](const std::string& d) {
    std::string key;
    for (const auto& e : std::filesystem::directory_iterator(d)) key = e.path().stem().string();
    return key;
  };
  const std::string key = only_key(dir);
  const std::optional<std::string> other_payload = ObjectCache(other_dir).load(only_key(other_dir));
  REQUIRE(other_payload.has_value());
  std::string garbage(24, '\0');  // three sizes that add up, then nothing
  for (const std::string& payload : {*other_payload, garbage}) {
    ObjectCache(dir).store(key, payload);
    const CudaBinary again = nvrtc_compile(k.source, k.name, 80, true, dir);
    CHECK_FALSE(again.from_disk_cache);
    CHECK(again.ptx == first.ptx);
    CHECK(again.cubin == first.cubin);
    CHECK(nvrtc_compile(k.source, k.name, 80, true, dir).from_disk_cache);  // stored again
  }
  std::filesystem::remove_all(base);
}

TEST_CASE("NVRTC: version, disk cache hits, damaged entries are recompiled, errors") {
  Graph g;
  Builder b(g);
  g.outputs = {b.unary(OpKind::gelu, b.arg(0, ty(DType::f32, {100})))};
  const CudaKernelSource k =
      generate_cuda_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)));
  if (nvrtc_version().empty()) {  // built without the CUDA toolkit
    CHECK_THROWS_WITH_AS(nvrtc_compile(k.source, k.name, 80, true), doctest::Contains("toolkit"),
                         Error);
    return;
  }
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("kiln-nvrtc-cache-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);

  const CudaBinary first = nvrtc_compile(k.source, k.name, 80, true, dir);
  CHECK_FALSE(first.from_disk_cache);
  CHECK(!first.cubin.empty());
  const CudaBinary second = nvrtc_compile(k.source, k.name, 80, true, dir);
  CHECK(second.from_disk_cache);
  CHECK(second.ptx == first.ptx);
  CHECK(second.cubin == first.cubin);
  CHECK(second.arch == 80);
  // Another architecture, or PTX only, is another entry.
  CHECK_FALSE(nvrtc_compile(k.source, k.name, 90, true, dir).from_disk_cache);
  CHECK_FALSE(nvrtc_compile(k.source, k.name, 80, false, dir).from_disk_cache);
  CHECK(nvrtc_compile(k.source, k.name, 80, false, dir).from_disk_cache);

  // Damage every entry: each is detected, recompiled and rewritten.
  int damaged = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('#');
    ++damaged;
  }
  CHECK(damaged == 3);
  const CudaBinary third = nvrtc_compile(k.source, k.name, 80, true, dir);
  CHECK_FALSE(third.from_disk_cache);
  CHECK(third.ptx == first.ptx);
  CHECK(nvrtc_compile(k.source, k.name, 80, true, dir).from_disk_cache);
  // A truncated entry too.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    std::filesystem::resize_file(e.path(), 10);
  CHECK_FALSE(nvrtc_compile(k.source, k.name, 80, true, dir).from_disk_cache);
  CHECK(nvrtc_compile(k.source, k.name, 80, true, dir).from_disk_cache);
  std::filesystem::remove_all(dir);

  CHECK_THROWS_WITH_AS(
      nvrtc_compile("__global__ void f() { undefined_thing(); }", "broken", 80, false),
      doctest::Contains("undefined_thing"), Error);
  CHECK_THROWS_WITH_AS(nvrtc_compile(k.source, k.name, 10, false), doctest::Contains("sm_10"),
                       Error);
  // A name that is no kernel of the source is an error at once, not a cache entry
  // that every later load would discard as damaged.
  CHECK_THROWS_WITH_AS(nvrtc_compile(k.source, "not_a_kernel", 80, true),
                       doctest::Contains("no entry point"), Error);
}

TEST_CASE(
    "emulation: grid-stride kernels are right on any grid; block reductions use shuffles; both "
    "context switches") {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {5, 70}));
  g.outputs = {b.mul(b.unary(OpKind::exp, x), b.arg(1, ty(DType::f32, {70})))};
  std::vector<Buf> vals = random_reference(g, 3);
  const CudaKernelSource k =
      generate_cuda_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)));
  Graph gs = [] {
    Graph s;
    Builder bs(s);
    Value v = bs.arg(0, ty(DType::f32, {6, 500}));
    s.outputs = {bs.sum(v, {1}, false)};
    return s;
  }();
  std::vector<Buf> svals = random_reference(gs, 4);
  const CudaKernelSource ks =
      generate_cuda_kernel(gs, make_group(gs, GroupKind::Reduction, all_compute_nodes(gs)));
  REQUIRE(ks.launch.kind == CudaLaunch::BlockPerRow);
  CudaHostModule m({k.source, ks.source, k.source});
  for (const char* ucontext : {"0", "1"}) {
    CAPTURE(ucontext);
    ::setenv("KILN_EMU_UCONTEXT", ucontext, 1);
    for (auto [grid, block] :
         {std::pair{1, 1}, std::pair{1, 32}, std::pair{7, 33}, std::pair{100, 256}}) {
      CAPTURE(grid);
      CAPTURE(block);
      Buf out = make_buf(g.type(g.outputs[0]));
      void* ptrs[] = {vals[0].data(), vals[1].data(), out.data()};
      const CudaEmulationStats st = m.launch(k.name, grid, block, ptrs, 0, k.launch.range);
      CHECK(st.blocks == grid);
      CHECK(st.threads == int64_t(grid) * block);
      CHECK(st.barriers == 0);
      CHECK(all_close(out.view(), vals[g.outputs[0].node].view()));
    }
    for (int grid : {1, 2, 6}) {
      Buf out = make_buf(gs.type(gs.outputs[0]));
      void* ptrs[] = {svals[0].data(), out.data()};
      const CudaEmulationStats st =
          m.launch(ks.name, grid, ks.launch.block, ptrs, 0, ks.launch.range);
      CHECK(st.shuffles > 0);
      CHECK(st.barriers > 0);
      CHECK(all_close(out.view(), svals[gs.outputs[0].node].view()));
    }
  }
  ::unsetenv("KILN_EMU_UCONTEXT");
}

TEST_CASE("emulation reports divergent shuffles and barriers, partial masks, compile errors") {
  const std::string src = R"(
extern "C" __global__ void half_warp_shuffle(void* const* b, long long, long long) {
  float v = threadIdx.x;
  if (threadIdx.x < 16) v = __shfl_down_sync(0xffffffffu, v, 1);
  ((float*)b[0])[threadIdx.x] = v;
}
extern "C" __global__ void partial_mask(void* const* b, long long, long long) {
  ((float*)b[0])[threadIdx.x] = __shfl_down_sync(0xffffu, 1.0f, 1);
}
extern "C" __global__ void half_block_barrier(void* const* b, long long, long long) {
  if (threadIdx.x < 32) __syncthreads();
}
extern "C" __global__ void shuffle_rotate(void* const* b, long long, long long) {
  const float v = (float)threadIdx.x;
  const float up = __shfl_down_sync(0xffffffffu, v, 3);
  const float x = __shfl_xor_sync(0xffffffffu, v, 5);
  __syncthreads();
  ((float*)b[0])[threadIdx.x] = up * 100 + x;
}
)";
  CudaHostModule m({src});
  std::vector<float> out(64, 0);
  void* ptrs[] = {out.data()};
  CHECK_THROWS_WITH_AS(m.launch("half_warp_shuffle", 1, 32, ptrs, 0, 1),
                       doctest::Contains("shuffle"), Error);
  CHECK_THROWS_WITH_AS(m.launch("partial_mask", 1, 32, ptrs, 0, 1), doctest::Contains("mask"),
                       Error);
  CHECK_THROWS_WITH_AS(m.launch("half_block_barrier", 1, 64, ptrs, 0, 1),
                       doctest::Contains("__syncthreads"), Error);
  m.launch("shuffle_rotate", 1, 64, ptrs, 0, 1);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, w = t / 32 * 32;
    const float up = float(lane + 3 < 32 ? t + 3 : t);
    CHECK(out[size_t(t)] == up * 100 + float(w + (lane ^ 5)));
  }
  CHECK_THROWS_WITH_AS(CudaHostModule({"this is not C++"}), doctest::Contains("host compiler"),
                       Error);
}
