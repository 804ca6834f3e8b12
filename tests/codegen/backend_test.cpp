// The backend interface (codegen/backend.h) and the plans compile_graph builds
// through it: which step kinds a CPU plan holds, the one matmul-step builder's
// flags (folded transposes, accumulation), and the errors of unsupported groups.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codegen/backend.h"
#include "codegen/cpu_backend.h"
#include "ir/parser.h"
#include "runtime/cuda_driver.h"
#include "runtime/interpreter.h"

using namespace kiln;

namespace {

std::shared_ptr<Plan> compiled(std::string_view ir, CompileReport* r = nullptr,
                               bool merge_steps = true) {
  CompileOptions opts;
  CpuOptions cpu;
  cpu.merge_steps = merge_steps;
  opts.set_backend_options(cpu);
  return compile_graph(parse_graph(ir), opts, r);
}

// A float32 array of `shape` whose element i is f(i).
template <class F>
HostArray filled(Shape shape, F f) {
  HostArray a = HostArray::make(TensorType{DType::f32, std::move(shape)});
  for (int64_t i = 0; i < a.type.numel(); ++i) a.data<float>()[i] = f(i);
  return a;
}

bool same_bytes(const HostArray& a, const HostArray& b) {
  return std::memcmp(a.data<float>(), b.data<float>(), size_t(a.type.bytes())) == 0;
}

// Runs `ir`'s plan with merge_steps on (`merged`) and off on the same arguments
// (a, b, c: float arrays of these shapes, each element from its index) and checks
// the results are the same bytes; returns the merged plan's result.
HostArray same_as_two_steps(std::string_view ir, const Plan& merged, Shape a_shape, Shape b_shape,
                            Shape c_shape, Shape out_shape) {
  auto two = compiled(ir, nullptr, /*merge_steps=*/false);
  REQUIRE(two->steps.size() == 2);
  HostArray a = filled(a_shape, [](int64_t i) { return float((i * 7) % 13) - 6.f; });
  HostArray b = filled(b_shape, [](int64_t i) { return float((i * 5) % 11) * 0.25f - 1.f; });
  HostArray c = filled(c_shape, [](int64_t i) { return float(i % 3) - 1.f; });
  HostArray one_out = filled(out_shape, [](int64_t) { return 0.f; });
  HostArray two_out = filled(out_shape, [](int64_t) { return 0.f; });
  void* args[] = {a.data<float>(), b.data<float>(), c.data<float>()};
  void* out1[] = {one_out.data<float>()};
  void* out2[] = {two_out.data<float>()};
  execute_cpu_plan(merged, args, nullptr, out1);
  execute_cpu_plan(*two, args, nullptr, out2);
  CHECK(same_bytes(one_out, two_out));
  return one_out;
}

template <class Step>
std::vector<const Step*> steps_of(const Plan& p) {
  std::vector<const Step*> out;
  for (const PlanStep& s : p.steps)
    if (const auto* x = std::get_if<Step>(&s.what)) out.push_back(x);
  return out;
}

}  // namespace

TEST_CASE("backend_for picks the backend of the device's kind") {
  CHECK(&backend_for(Device(kCPU)) == &cpu_backend());
  CHECK(&backend_for(Device(kCUDA, 0)) == &cuda_backend());
  CHECK(cpu_backend().target(Device(kCPU)).name.empty());
  CHECK(cpu_backend().target(Device(kCPU)).arch == 0);
}

TEST_CASE(
    "a CPU plan (merge_steps off): an OpenBLAS step into the raw product, then the epilogue "
    "kernel") {
  CompileReport r;
  auto plan = compiled(
      "%0 = arg {index=0} : f32[4,8]\n"
      "%1 = arg {index=1} : f32[8,3]\n"
      "%2 = matmul %0, %1 : f32[4,3]\n"
      "%3 = relu %2 : f32[4,3]\n"
      "return %3\n",
      &r, /*merge_steps=*/false);
  REQUIRE(plan->steps.size() == 2);
  const auto* mm = std::get_if<step::Matmul>(&plan->steps[0].what);
  REQUIRE(mm);
  CHECK_FALSE(mm->trans_a);
  CHECK_FALSE(mm->trans_b);
  CHECK(mm->alpha == 1);
  CHECK(mm->beta == 0);
  CHECK(plan->slots[plan->steps[0].slots[2]].kind == PlanSlot::Temp);
  CHECK(std::holds_alternative<step::CpuKernel>(plan->steps[1].what));
  // The report's records parallel the steps; the gemm's flops are its own.
  REQUIRE(r.kernels.size() == 2);
  CHECK(r.kernels[0].name == plan->steps[0].name);
  CHECK(r.kernels[0].flops == 2 * 4 * 3 * 8);
  CHECK(r.kernels[1].flops < r.kernels[0].flops);
  CHECK(steps_of<step::CudaKernel>(*plan).empty());
}

TEST_CASE("a CPU plan: the epilogue runs inside the OpenBLAS step, on each block of rows") {
  CompileReport r;
  const char* ir =
      "%0 = arg {index=0} : f32[64,32]\n"
      "%1 = arg {index=1} : f32[32,16]\n"
      "%2 = arg {index=2} : f32[16]\n"
      "%3 = matmul %0, %1 : f32[64,16]\n"
      "%4 = expand %2 {shape=[64, 16]} : f32[64,16]\n"
      "%5 = add %3, %4 : f32[64,16]\n"
      "%6 = relu %5 : f32[64,16]\n"
      "return %6\n";
  auto plan = compiled(ir, &r);
  REQUIRE(plan->steps.size() == 1);
  const auto* mm = std::get_if<step::Matmul>(&plan->steps[0].what);
  REQUIRE(mm);
  REQUIRE((mm->epilogue.fn != nullptr));
  // Slots a, b, the raw product, then the epilogue's: the product again, the bias, the result.
  const std::vector<int32_t>& slots = plan->steps[0].slots;
  REQUIRE(slots.size() == 6);
  CHECK(slots[3] == slots[2]);
  CHECK(plan->slots[slots[4]].kind == PlanSlot::Arg);
  CHECK(plan->slots[slots[5]].kind == PlanSlot::Output);
  CHECK(mm->epilogue.range % 64 == 0);  // whole rows of the product
  // One record: the product's flops and the epilogue's; it writes both.
  REQUIRE(r.kernels.size() == 1);
  CHECK(r.kernels[0].flops > 2 * 64 * 16 * 32);
  CHECK(r.step_values[0].size() == 2);
  // The same values as the two steps of merge_steps off, bit for bit.
  HostArray one_out = same_as_two_steps(ir, *plan, {64, 32}, {32, 16}, {16}, {64, 16});
  float any = 0;
  for (int64_t i = 0; i < one_out.type.numel(); ++i) any = std::max(any, one_out.data<float>()[i]);
  CHECK(any > 0);
}

TEST_CASE("a product kept as an update runs its epilogue on each block of rows, written in place") {
  // A weight gradient kept in `.grad` (param 1) that the weight's update reads:
  // BLAS writes the product into the gradient's buffer, and the update is
  // stored over the weight (param 0) block by block.
  const char* ir =
      "%0 = arg {index=0} : f32[64,32]\n"
      "%1 = arg {index=1} : f32[32,16]\n"
      "%2 = param {index=0} : f32[64,16]\n"
      "%3 = param {index=1} : f32[64,16]\n"
      "%4 = matmul %0, %1 : f32[64,16]\n"
      "%5 = constant {value=0.5} : f32[]\n"
      "%6 = mul %4, %5 : f32[64,16]\n"
      "%7 = sub %2, %6 : f32[64,16]\n"
      "return %0\n"
      "update 0 = %7\n"
      "update 1 = %4\n";
  auto plan = compiled(ir);
  const auto mms = steps_of<step::Matmul>(*plan);
  REQUIRE(mms.size() == 1);
  CHECK((mms[0]->epilogue.fn != nullptr));
  CHECK(steps_of<step::CpuKernel>(*plan).empty());
  auto apart = compiled(ir, nullptr, /*merge_steps=*/false);
  CHECK(steps_of<step::CpuKernel>(*apart).size() == 1);
  HostArray a = filled({64, 32}, [](int64_t i) { return float((i * 7) % 13) - 6.f; });
  HostArray b = filled({32, 16}, [](int64_t i) { return float((i * 5) % 11) * 0.25f - 1.f; });
  auto run = [&](const Plan& p) {
    std::vector<HostArray> params = {filled({64, 16}, [](int64_t i) { return float(i % 9); }),
                                     filled({64, 16}, [](int64_t) { return 7.f; })};
    HostArray out = filled({64, 32}, [](int64_t) { return 0.f; });
    void* args[] = {a.data<float>(), b.data<float>()};
    void* ps[] = {params[0].data<float>(), params[1].data<float>()};
    void* outs[] = {out.data<float>()};
    execute_cpu_plan(p, args, ps, outs);
    return params;
  };
  const std::vector<HostArray> one = run(*plan), two = run(*apart);
  CHECK(same_bytes(one[0], two[0]));
  CHECK(same_bytes(one[1], two[1]));
  // Element (1, 2): the product, and the weight less half of it.
  float d = 0;
  for (int64_t k = 0; k < 32; ++k) d += a.data<float>()[32 + k] * b.data<float>()[k * 16 + 2];
  CHECK(one[1].data<float>()[16 + 2] == doctest::Approx(d));
  CHECK(one[0].data<float>()[16 + 2] == doctest::Approx(float(18 % 9) - 0.5f * d));
}

TEST_CASE("an epilogue whose output is a reshape of the product runs on each block of rows") {
  // conv2d's per-image product [N, O, H'W'] plus the bias, written as [N, O, H', W'].
  const char* ir =
      "%0 = arg {index=0} : f32[4,18]\n"
      "%1 = arg {index=1} : f32[3,18,20]\n"
      "%2 = arg {index=2} : f32[4,1]\n"
      "%3 = matmul %0, %1 : f32[3,4,20]\n"
      "%4 = expand %2 {shape=[3, 4, 20]} : f32[3,4,20]\n"
      "%5 = add %3, %4 : f32[3,4,20]\n"
      "%6 = reshape %5 {shape=[3, 4, 4, 5]} : f32[3,4,4,5]\n"
      "return %6\n";
  auto plan = compiled(ir);
  REQUIRE(plan->steps.size() == 1);
  const auto* mm = std::get_if<step::Matmul>(&plan->steps[0].what);
  REQUIRE(mm);
  CHECK((mm->epilogue.fn != nullptr));
  same_as_two_steps(ir, *plan, {4, 18}, {3, 18, 20}, {4, 1}, {3, 4, 4, 5});
}

TEST_CASE("the kernel writing a batched product's right operand runs inside its step, by image") {
  // conv2d's patches [N, K, H'W'] (here a square of the input, 1.1 MiB), the
  // per-image product with its bias epilogue: the patch kernel is the product's
  // prologue, run on each block of images just before their products.
  const char* ir =
      "%0 = arg {index=0} : f32[4,18]\n"
      "%1 = arg {index=1} : f32[800,18,20]\n"
      "%2 = arg {index=2} : f32[4,1]\n"
      "%3 = mul %1, %1 : f32[800,18,20]\n"
      "%4 = matmul %0, %3 : f32[800,4,20]\n"
      "%5 = expand %2 {shape=[800, 4, 20]} : f32[800,4,20]\n"
      "%6 = add %4, %5 : f32[800,4,20]\n"
      "%7 = reshape %6 {shape=[800, 4, 4, 5]} : f32[800,4,4,5]\n"
      "return %7\n";
  auto plan = compiled(ir);
  REQUIRE(plan->steps.size() == 2);
  const auto* k = std::get_if<step::CpuKernel>(&plan->steps[0].what);
  const auto* mm = std::get_if<step::Matmul>(&plan->steps[1].what);
  REQUIRE(k);
  REQUIRE(mm);
  CHECK(k->deferred);
  CHECK(mm->prologue == 0);
  CHECK((mm->epilogue.fn != nullptr));
  auto three = compiled(ir, nullptr, /*merge_steps=*/false);
  REQUIRE(three->steps.size() == 3);
  for (const step::Matmul* m : steps_of<step::Matmul>(*three)) CHECK(m->prologue == -1);
  HostArray a = filled({4, 18}, [](int64_t i) { return float((i * 7) % 13) - 6.f; });
  HostArray b = filled({800, 18, 20}, [](int64_t i) { return float((i * 5) % 11) * 0.25f - 1.f; });
  HostArray c = filled({4, 1}, [](int64_t i) { return float(i % 3) - 1.f; });
  HostArray merged = filled({800, 4, 4, 5}, [](int64_t) { return 0.f; });
  HostArray apart = filled({800, 4, 4, 5}, [](int64_t) { return 0.f; });
  void* args[] = {a.data<float>(), b.data<float>(), c.data<float>()};
  void* out1[] = {merged.data<float>()};
  void* out2[] = {apart.data<float>()};
  execute_cpu_plan(*plan, args, nullptr, out1);
  execute_cpu_plan(*three, args, nullptr, out2);
  CHECK(same_bytes(merged, apart));
  // And the values: sum over k of a[o, k] b[n, k, j]^2, plus the bias.
  double worst = 0;
  for (int64_t n = 0; n < 800; ++n)
    for (int64_t o = 0; o < 4; ++o)
      for (int64_t j = 0; j < 20; ++j) {
        double want = c.data<float>()[o];
        for (int64_t q = 0; q < 18; ++q) {
          const double x = b.data<float>()[(n * 18 + q) * 20 + j];
          want += double(a.data<float>()[o * 18 + q]) * x * x;
        }
        worst = std::max(worst, std::abs(want - merged.data<float>()[(n * 4 + o) * 20 + j]));
      }
  CHECK(worst < 1e-3);
}

TEST_CASE("a right operand shared by the batch, of 1 MiB or less, or too large a block, has no prologue") {
  // A matmul of a [n, k] by b = x * x for x [k, m] or [batch, k, m].
  auto plan_of = [](const std::string& a, const std::string& x, const std::string& out) {
    return compiled("%0 = arg {index=0} : f32" + a + "\n%1 = arg {index=1} : f32" + x +
                    "\n%2 = mul %1, %1 : f32" + x + "\n%3 = matmul %0, %2 : f32" + out +
                    "\nreturn %3\n");
  };
  const std::shared_ptr<Plan> plans[] = {
      // b broadcast over the batch: its kernel writes no block per image.
      plan_of("[6,4,18]", "[18,20]", "[6,4,20]"),
      // All of b within 1 MiB (digits conv2's patches): it stays in cache written whole.
      plan_of("[4,18]", "[6,18,20]", "[6,4,20]"),
      // One image's block of b over 512 KiB (a 64-channel conv's patches).
      plan_of("[4,576]", "[2,576,1024]", "[2,4,1024]")};
  for (const std::shared_ptr<Plan>& p : plans) {
    for (const step::Matmul* m : steps_of<step::Matmul>(*p)) CHECK(m->prologue == -1);
    for (const step::CpuKernel* k : steps_of<step::CpuKernel>(*p)) CHECK_FALSE(k->deferred);
  }
}

TEST_CASE(
    "an epilogue that writes a matmul operand, or reads the product elsewhere, is a step of its "
    "own") {
  // The update is stored over the parameter that BLAS reads whole as b.
  auto over_b = compiled(
      "%0 = arg {index=0} : f32[8,8]\n"
      "%1 = param {index=0} : f32[8,8]\n"
      "%2 = matmul %0, %1 : f32[8,8]\n"
      "%3 = add %1, %2 : f32[8,8]\n"
      "update 0 = %3\n");
  for (const step::Matmul* mm : steps_of<step::Matmul>(*over_b))
    CHECK((mm->epilogue.fn == nullptr));
  // An output reading the product transposed (rows of it are columns of the product):
  // fusion keeps the permute out of the matmul's group, and were it in, the
  // epilogue could not run per block of rows (cpu_compile.cpp's epilogue_by_rows).
  auto across = compiled(
      "%0 = arg {index=0} : f32[8,8]\n"
      "%1 = arg {index=1} : f32[8,8]\n"
      "%2 = matmul %0, %1 : f32[8,8]\n"
      "%3 = permute %2 {perm=[1, 0]} : f32[8,8]\n"
      "%4 = add %2, %3 : f32[8,8]\n"
      "return %4\n");
  for (const step::Matmul* mm : steps_of<step::Matmul>(*across))
    CHECK((mm->epilogue.fn == nullptr));
  CHECK(steps_of<step::CpuKernel>(*across).size() == 1);
}

TEST_CASE("updates running the same code on other parameters are one foreach step") {
  // Three parameters' updates (one family: the same kernel at other sizes),
  // then one that reads another's result.
  const char* ir =
      "%0 = param {index=0} : f32[64]\n"
      "%1 = param {index=1} : f32[256]\n"
      "%2 = param {index=2} : f32[100]\n"
      "%3 = arg {index=0} : f32[64]\n"
      "%4 = arg {index=1} : f32[256]\n"
      "%5 = arg {index=2} : f32[100]\n"
      "%6 = constant {value=0.5} : f32[64]\n"
      "%7 = mul %3, %6 : f32[64]\n"
      "%8 = sub %0, %7 : f32[64]\n"
      "%9 = constant {value=0.5} : f32[256]\n"
      "%10 = mul %4, %9 : f32[256]\n"
      "%11 = sub %1, %10 : f32[256]\n"
      "%12 = constant {value=0.5} : f32[100]\n"
      "%13 = mul %5, %12 : f32[100]\n"
      "%14 = sub %2, %13 : f32[100]\n"
      "update 0 = %8\n"
      "update 1 = %11\n"
      "update 2 = %14\n";
  CompileReport r;
  auto plan = compiled(ir, &r);
  const auto kernels = steps_of<step::CpuKernel>(*plan);
  REQUIRE(kernels.size() == 1);
  CHECK(kernels[0]->more.size() == 2);
  CHECK(kernels[0]->own_slots == 3);
  CHECK(plan->steps.size() == 1);
  REQUIRE(r.kernels.size() == 1);
  CHECK(r.kernels[0].range == 64 + 256 + 100);
  CHECK(r.step_values[0].size() == 3);
  auto apart = compiled(ir, nullptr, /*merge_steps=*/false);
  CHECK(steps_of<step::CpuKernel>(*apart).size() == 3);

  // Values: the foreach step updates every parameter as the three steps do.
  std::vector<HostArray> p1, p2, g;
  for (int64_t n : {64, 256, 100}) {
    p1.push_back(filled({n}, [](int64_t i) { return float(i % 9); }));
    p2.push_back(filled({n}, [](int64_t i) { return float(i % 9); }));
    g.push_back(filled({n}, [n](int64_t i) { return float(i % 5) - float(n % 7); }));
  }
  void* args[] = {g[0].data<float>(), g[1].data<float>(), g[2].data<float>()};
  void* params1[] = {p1[0].data<float>(), p1[1].data<float>(), p1[2].data<float>()};
  void* params2[] = {p2[0].data<float>(), p2[1].data<float>(), p2[2].data<float>()};
  execute_cpu_plan(*plan, args, params1, nullptr);
  execute_cpu_plan(*apart, args, params2, nullptr);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(same_bytes(p1[i], p2[i]));
    CHECK(p1[i].data<float>()[1] == 1.f - 0.5f * g[i].data<float>()[1]);
  }
}

TEST_CASE("a transpose only matmuls read is a flag on the matmul step, not a copy") {
  auto plan = compiled(
      "%0 = arg {index=0} : f32[4,8]\n"
      "%1 = arg {index=1} : f32[3,8]\n"
      "%2 = permute %1 {perm=[1, 0]} : f32[8,3]\n"
      "%3 = matmul %0, %2 : f32[4,3]\n"
      "return %3\n");
  const auto mms = steps_of<step::Matmul>(*plan);
  REQUIRE(mms.size() == 1);
  CHECK(mms[0]->trans_b);
  CHECK_FALSE(mms[0]->trans_a);
  const PlanSlot& b = plan->slots[plan->steps[0].slots[1]];
  CHECK(b.kind == PlanSlot::Arg);
  CHECK(b.index == 1);
  CHECK(steps_of<step::CpuKernel>(*plan).empty());
}

TEST_CASE("an SGD update through a matmul is one accumulating BLAS step into the parameter") {
  auto plan = compiled(
      "%0 = arg {index=0} : f32[4,8]\n"
      "%1 = arg {index=1} : f32[8,3]\n"
      "%2 = param {index=0} : f32[4,3]\n"
      "%3 = matmul %0, %1 : f32[4,3]\n"
      "%4 = constant {value=0.25} : f32[4,3]\n"
      "%5 = mul %3, %4 : f32[4,3]\n"
      "%6 = sub %2, %5 : f32[4,3]\n"
      "update 0 = %6\n");
  REQUIRE(plan->steps.size() == 1);
  const auto* mm = std::get_if<step::Matmul>(&plan->steps[0].what);
  REQUIRE(mm);
  CHECK(mm->alpha == -0.25);
  CHECK(mm->beta == 1);
  const PlanSlot& out = plan->slots[plan->steps[0].slots[2]];
  CHECK(out.kind == PlanSlot::Param);
  CHECK(out.index == 0);
}

TEST_CASE("a group no backend compiles is an error naming the op") {
  const Graph g = parse_graph(
      "%0 = arg {index=0} : f32[4]\n"
      "%1 = custom %0 {fn=1} : f32[4]\n"
      "return %1\n");
  for (const FusionGroup& grp : plan_fusion(g)) {
    std::string why;
    CHECK_FALSE(cpu_backend().supports(g, grp, &why));
    CHECK(why.find("cannot compile 'custom'") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(compile_graph(g, CompileOptions{}),
                       doctest::Contains("cannot compile 'custom' in a traced function"), Error);
}

TEST_CASE("the CPU executor refuses a CUDA step, and the CUDA backend checks for CUDA first") {
  Plan p;
  PlanStep s;
  s.name = "k0_gpu";
  s.what = step::CudaKernel{};
  p.steps.push_back(s);
  CHECK_THROWS_WITH_AS(cpu_backend().execute(p, nullptr, nullptr, nullptr),
                       doctest::Contains("a CPU plan holds a CUDA step ('k0_gpu')"), Error);
  if (!cuda::available()) CHECK_THROWS_AS(cuda_backend().target(Device(kCUDA, 0)), Error);
}
