// The backend interface (codegen/backend.h) and the plans compile_graph builds
// through it: which step kinds a CPU plan holds, the one matmul-step builder's
// flags (folded transposes, accumulation), and the errors of unsupported groups.
#include <doctest/doctest.h>

#include "codegen/backend.h"
#include "ir/parser.h"
#include "runtime/cuda_driver.h"

using namespace kiln;

namespace {

std::shared_ptr<Plan> compiled(std::string_view ir, CompileReport* r = nullptr) {
  return compile_graph(parse_graph(ir), CompileOptions{}, r);
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

TEST_CASE("a CPU plan: an OpenBLAS step into the raw product, then the epilogue kernel") {
  CompileReport r;
  auto plan = compiled(
      "%0 = arg {index=0} : f32[4,8]\n"
      "%1 = arg {index=1} : f32[8,3]\n"
      "%2 = matmul %0, %1 : f32[4,3]\n"
      "%3 = relu %2 : f32[4,3]\n"
      "return %3\n",
      &r);
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
  if (!cuda::available())
    CHECK_THROWS_AS(cuda_backend().target(Device(kCUDA, 0)), Error);
}
