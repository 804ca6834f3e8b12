// The process's LLVM JIT (runtime/llvm_jit.h) as compiles use it: target
// machines made once and lent to one compile at a time, from any thread, and a
// kernel's object the same bytes whichever target machine made it.
#include <doctest/doctest.h>

#include <thread>

#include "codegen/compile.h"
#include "codegen/llvm_codegen.h"
#include "codegen/lower.h"
#include "codegen_test_util.h"
#include "runtime/llvm_jit.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// exp(x) * y + tanh(y) over f32[rows, 40], lowered to kernel IR.
kir::Kernel exp_chain_kernel(int64_t rows) {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(DType::f32, {rows, 40}));
  Value y = b.arg(1, ty(DType::f32, {rows, 40}));
  g.outputs = {b.add(b.mul(b.unary(OpKind::exp, x), y), b.unary(OpKind::tanh, y))};
  return lower_group(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)));
}

// A kernel's object and its assembly.
std::pair<std::string, std::string> compile(const kir::Kernel& k) {
  LlvmEmitOptions o;
  o.want_texts = true;
  LlvmKernelBinary bin = compile_kernel_llvm(k, "kiln_kernel_llvm_jit_test", o);
  return {bin.object, bin.assembly};
}

}  // namespace

TEST_CASE("compiles one after another reuse one target machine, and the code does not change") {
  const kir::Kernel a = exp_chain_kernel(3), b = exp_chain_kernel(1000);
  const auto first = compile(a);
  const size_t made = LlvmJit::get().target_machines();
  CHECK(made >= 1);
  compile(b);
  const auto again = compile(a);
  CHECK(LlvmJit::get().target_machines() == made);
  CHECK(!first.first.empty());
  CHECK(again.first == first.first);    // the object, byte for byte
  CHECK(again.second == first.second);  // and its assembly
}

TEST_CASE("a quick-tier emission leaves its target machine as it was lent") {
  const kir::Kernel a = exp_chain_kernel(9);
  const auto before = compile(a);
  const size_t made = LlvmJit::get().target_machines();
  LlvmEmitOptions quick;
  quick.quick = true;
  const LlvmKernelBinary q = compile_kernel_llvm(a, "kiln_kernel_llvm_jit_test", quick);
  CHECK(LlvmJit::get().target_machines() == made);  // the same machine, lent again
  CHECK(q.object != before.first);                  // -O0 code
  const auto after = compile(a);
  CHECK(after.first == before.first);  // -O3 again, and no FastISel
  CHECK(after.second == before.second);
}

TEST_CASE("a quick-tier kernel's assembly text is its quick code, not the optimised code") {
  const kir::Kernel a = exp_chain_kernel(64);
  const std::string optimised = compile(a).second;
  LlvmEmitOptions quick;
  quick.quick = true;
  quick.want_texts = true;
  const std::string text = compile_kernel_llvm(a, "kiln_kernel_llvm_jit_test", quick).assembly;
  // The optimised loop is vectorised (ymm registers with AVX); the quick tier
  // neither optimises the IR nor vectorises, so its loop works on scalars.
  if (LlvmJit::get().target_description().find("AVX") != std::string::npos)
    CHECK(optimised.find("ymm") != std::string::npos);
  CHECK(text != optimised);
  CHECK(text.find("ymm") == std::string::npos);
  CHECK(text.find("xmm") != std::string::npos);
  // The quick tier selects floats by their bits (runtime/llvm_jit.cpp,
  // select_bits_not_floats): exp's range clamps become integer cmovs there,
  // where the optimising code generator keeps float selects.
  CHECK(text.find("cmov") != std::string::npos);
}

TEST_CASE("compiles on several threads at once each borrow a target machine of their own") {
  const kir::Kernel a = exp_chain_kernel(7);
  const auto alone = compile(a);
  constexpr int kThreads = 4;
  std::vector<std::pair<std::string, std::string>> out(kThreads);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] { out[size_t(t)] = compile(a); });
    for (std::thread& th : threads) th.join();
    for (const auto& o : out) {
      CHECK(o.first == alone.first);
      CHECK(o.second == alone.second);
    }
  }
  // However many compiles, never more target machines than compiles at once
  // (this test's threads, and the thread pool's of other tests).
  CHECK(LlvmJit::get().target_machines() <= size_t(kThreads) + 8);
}

TEST_CASE("the compiler's warm-up starts once per process, and ends with its handle") {
  {
    CompilerWarmUp off(false);
    CHECK_FALSE(off.started());
  }
  bool any = false;
  for (int i = 0; i < 3; ++i) {
    CompilerWarmUp w;
    CHECK_FALSE((any && w.started()));
    any = any || w.started();
  }
  CHECK(LlvmJit::get().target_machines() >= 1);  // the JIT made, with a target machine
}
