// Streaming (non-temporal) stores (codegen/llvm_codegen.h: streams_stores)
// give the ordinary stores' values bit for bit: eager ops on compiled kernels,
// their kernels called directly on outputs at every alignment, and traced
// elementwise chains and row kernels, each run with streaming forced on (every
// output streams) and off (KILN_NT_STORES=0), at lengths around the vector
// width and on views that start 1 to 7 elements past a block.
#include <doctest/doctest.h>

#include <bit>
#include <cstring>
#include <functional>
#include <vector>

#include "codegen/eager_kernel.h"
#include "frontend/dispatch.h"
#include "frontend/settings.h"
#include "test_util.h"

namespace kiln {
namespace {

// Runs f with outputs streaming from `stream_min_bytes` bytes on (0: never) and
// compiled eager kernels for every size, restoring the settings.
Tensor with_streaming(int64_t stream_min_bytes, const std::function<Tensor()>& f) {
  Settings& s = settings();
  const Settings saved = s;
  s.stream_min_bytes = stream_min_bytes;
  s.eager_kernel_min_elements = 1;
  Tensor r;
  try {
    r = f();
  } catch (...) {
    s = saved;
    throw;
  }
  s = saved;
  return r;
}

// The same bits, element by element (NaNs included).
void check_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.sizes() == want.sizes());
  REQUIRE(got.dtype() == want.dtype());
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (std::bit_cast<uint64_t>(g[i]) != std::bit_cast<uint64_t>(w[i]) && differ++ == 0) first = i;
  CHECK_MESSAGE(differ == 0, differ, " elements differ, the first at ", first, ": ", g[first],
                " streamed vs ", w[first]);
}

const int64_t kLengths[] = {1, 7, 8, 9, 1000003};

TEST_CASE("streaming stores: every eager math op gives the ordinary stores' bits") {
  int checked = 0;
  std::vector<OpKind> ops = {OpKind::div};
  for (OpKind k : all_ops())
    if (is_math(k)) ops.push_back(k);
  for (OpKind k : ops) {
    ++checked;
    const Domain& d = op_info(k).domain;
    for (DType dt : {kFloat32, kFloat64})
      for (int64_t n : kLengths) {
        // Views 0 to 7 elements past their block; the longest length at a few only.
        for (int64_t offset = 0; offset<8; offset += n> 100 ? 3 : 1) {
          CAPTURE(op_name(k));
          CAPTURE(dtype_name(dt));
          CAPTURE(n);
          CAPTURE(offset);
          manual_seed(uint64_t(n + offset));
          std::vector<Tensor> args;
          for (size_t i = 0; i < size_t(op_info(k).arity); ++i) {
            const Tensor block = (rand({n + offset}) * (d.high(i) - d.low(i)) + d.low(i)).to(dt);
            args.push_back(block.slice(0, offset));
          }
          auto run = [&] { return detail::apply(k, args, {}, SourceLoc{}); };
          check_bits(with_streaming(1, run), with_streaming(0, run));
        }
      }
  }
  CHECK(checked >= 15);
}

TEST_CASE("streaming stores: an eager kernel writes any range of an output at any alignment") {
  for (OpKind k : {OpKind::exp, OpKind::gelu, OpKind::floor}) {
    CpuCompileOptions streamed, ordinary;
    streamed.stream_all = true;
    const auto fast = eager_cpu_kernel(k, {}, {kFloat32}, kFloat32, streamed);
    const auto plain = eager_cpu_kernel(k, {}, {kFloat32}, kFloat32, ordinary);
    REQUIRE(fast);
    REQUIRE(plain);
    CHECK(fast->streams);
    CHECK_FALSE(plain->streams);
    const int64_t n = 1000;
    std::vector<float> input(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) input[size_t(i)] = float(i) * 0.013f - 6.5f;
    for (int64_t offset = 0; offset < 8; ++offset)
      for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, n},
                                {3, n - 2},
                                {5, 12},
                                {9, 9},
                                {1, 2},
                                {0, 8},
                                {17, 900}}) {
        CAPTURE(op_name(k));
        CAPTURE(offset);
        CAPTURE(begin);
        CAPTURE(end);
        // Outputs in blocks with guards around them: only [begin, end) is written.
        std::vector<float> a(size_t(n + 16), -1.25f), b(size_t(n + 16), -1.25f);
        void* fast_bufs[] = {input.data(), a.data() + offset};
        void* plain_bufs[] = {input.data(), b.data() + offset};
        fast->fn(fast_bufs, begin, end);
        plain->fn(plain_bufs, begin, end);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        for (int64_t i = 0; i < int64_t(a.size()); ++i)
          if (i < offset + begin || i >= offset + end) REQUIRE(a[size_t(i)] == -1.25f);
      }
  }
}

Tensor rows_layer_norm(const Tensor& x) {
  Tensor mu = x.mean(1, true);
  Tensor dev = x - mu;
  return dev / ((dev * dev).mean(1, true) + 1e-5).sqrt();
}

TEST_CASE("streaming stores: traced chains and row kernels give the ordinary stores' bits") {
  using Fn = Tensor (*)(const Tensor&);
  const std::pair<const char*, Fn> cases[] = {
      {"gelu", [](const Tensor& x) { return x.gelu(); }},
      {"chain",
       [](const Tensor& x) { return ((x * 1.5f + 2) - x * x).abs().clamp(0.5, 4) * 0.25f; }},
      {"transcendental",
       [](const Tensor& x) { return (x.tanh().exp() - x.sigmoid()).relu() / (x * x + 1); }},
      {"log of a shifted view", [](const Tensor& x) { return (x.abs() + 1e-3).log(); }},
  };
  for (const auto& [name, f] : cases)
    for (int64_t n : kLengths)
      for (int64_t offset : {0, 1, 5, 7}) {
        CAPTURE(name);
        CAPTURE(n);
        CAPTURE(offset);
        manual_seed(uint64_t(n));
        const Tensor x = (randn({n + offset}) * 3).slice(0, offset);
        TraceStats streamed_stats;
        const Tensor streamed = with_streaming(1, [&, f = f] {
          auto traced = jit([f](Tensor t) { return f(t); }, "streamed");
          Tensor r = traced(x);
          streamed_stats = traced.stats();
          return r;
        });
        const Tensor ordinary = with_streaming(0, [&, f = f] {
          auto traced = jit([f](Tensor t) { return f(t); }, "ordinary");
          Tensor r = traced(x);
          CHECK(traced.stats().kernels_streaming == 0);
          return r;
        });
        CHECK(streamed_stats.kernels_streaming >= 1);
        check_bits(streamed, ordinary);
      }
  // Layer norm's output pass streams; rows of odd lengths start at every alignment.
  for (int64_t cols : {1, 7, 9, 1003})
    for (int64_t rows : {1, 5}) {
      CAPTURE(cols);
      CAPTURE(rows);
      manual_seed(uint64_t(cols));
      const Tensor x = randn({rows, cols}) * 2 + 0.5;
      TraceStats stats;
      const Tensor streamed = with_streaming(1, [&] {
        auto traced = jit(rows_layer_norm, "layer_norm");
        Tensor r = traced(x);
        stats = traced.stats();
        return r;
      });
      const Tensor ordinary =
          with_streaming(0, [&] { return jit(rows_layer_norm, "layer_norm")(x); });
      if (cols > 1) CHECK(stats.kernels_streaming == 1);  // one column: no reduction left
      check_bits(streamed, ordinary);
    }
}

TEST_CASE(
    "streaming stores: outputs under the threshold, and outputs read back, keep ordinary stores") {
  const Tensor x = randn({1000});
  auto small = jit([](Tensor t) { return t.exp(); }, "small");
  with_streaming(4001, [&] { return small(x); });  // 4000 bytes
  CHECK(small.stats().kernels_streaming == 0);
  auto large = jit([](Tensor t) { return t.exp(); }, "large");
  with_streaming(4000, [&] { return large(x); });
  CHECK(large.stats().kernels_streaming == 1);
  // Softmax keeps exp(x - max) in its output and reads it back in its last pass.
  auto softmax = jit([](Tensor t) { return t.softmax(1); }, "softmax");
  auto plain_softmax = jit([](Tensor t) { return t.softmax(1); }, "softmax");
  const Tensor rows = randn({4, 1000});
  check_bits(with_streaming(1, [&] { return softmax(rows); }),
             with_streaming(0, [&] { return plain_softmax(rows); }));
  CHECK(softmax.stats().kernels_streaming == 0);
}

}  // namespace
}  // namespace kiln
