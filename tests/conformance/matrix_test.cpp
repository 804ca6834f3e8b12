// The conformance matrix on the CPU backends: every case x every mode x f32/f64,
// traced (LLVM kernels, OpenBLAS), and eager on compiled kernels, against eager
// (the reference kernels), and
// eager gradients against central finite differences in f64. The same matrix
// runs on a real GPU when one is present.
#include <set>

#include "codegen/eager_kernel.h"
#include "conformance.h"
#include "runtime/cuda_driver.h"

using namespace kiln;
using namespace kiln::conformance;

namespace {

// Every mode but Eager, the reference (EagerKernels is eager too, on compiled kernels).
constexpr Mode kTracedModes[] = {Mode::TracedEagerBackward, Mode::BackwardInside,
                                 Mode::CachedSecondCall,    Mode::Unfused,
                                 Mode::DynamicMarked,       Mode::EagerKernels};

double rtol_for(const Case& c, DType dt) {
  return dt == kFloat64 ? 1e-9 : c.f32_tol;
}
double atol_for(const Case& c, DType dt) {
  return dt == kFloat64 ? 1e-11 : c.f32_tol;
}

void run_matrix(Device device) {
  int64_t templated = 0, dynamic_runs = 0;
  for (const Case& c : cases()) {
    for (DType dt : {kFloat32, kFloat64}) {
      for (Mode m : kTracedModes) {
        const std::string what =
            c.name + " [" + dtype_name(dt) + ", " + mode_name(m) + ", " + device.str() + "]";
        INFO(what);
        // An error fails this cell and the matrix goes on: one GPU run shows every failure.
        try {
          const Result want = run_case(c, Mode::Eager, dt, Device(), 7, m);
          const Result got = run_case(c, m, dt, device, 7);
          check_same(got, want, rtol_for(c, dt), atol_for(c, dt), what);
          if (m == Mode::DynamicMarked) {
            templated += got.kernels_templated > 0;
            ++dynamic_runs;
          }
        } catch (const std::exception& e) {
          const std::string failed = what + ": " + e.what();
          FAIL_CHECK(failed);
        }
      }
    }
  }
  // Kernel templates are CPU-only; on the CPU most cases trace at a second batch size.
  MESSAGE("dynamic runs that used kernel templates: ", templated, " of ", dynamic_runs);
  // EagerKernels ran the cases' expensive elementwise ops on compiled kernels.
  MESSAGE("eager kernels compiled: ", eager_cpu_kernels_compiled());
  if (device.is_cpu()) CHECK(eager_cpu_kernels_compiled() >= 10);
  if (device.is_cpu())
    CHECK_MESSAGE(templated * 2 > dynamic_runs, "only ", templated, " of ", dynamic_runs,
                  " dynamic runs used kernel templates");
}

}  // namespace

TEST_CASE("every op of the table is covered by a conformance case") {
  std::set<OpKind> seen;
  for (const Case& c : cases())
    for (DType dt : {kFloat32, kFloat64}) {
      const Graph g = traced_graph(c, dt, /*optimized=*/false, 1);
      for (const Node& n : g.nodes()) seen.insert(n.op);
    }
  std::set<OpKind> exempt;
  for (const auto& [op, why] : uncovered_ops()) {
    exempt.insert(op);
    CHECK_MESSAGE(!seen.count(op), std::string(op_name(op)), " is listed as uncovered (", why,
                  ") but a case covers it");
  }
  // A composite is never a node (its expansion's ops are): its own case covers it.
  std::set<std::string> names;
  for (const Case& c : cases()) names.insert(c.name);
  for (OpKind k : all_ops())
    if (is_composite(k))
      CHECK_MESSAGE(names.count(std::string(op_name(k)) + " (a composite of the table)"),
                    "no conformance case covers ", std::string(op_name(k)));
    else if (!exempt.count(k))
      CHECK_MESSAGE(seen.count(k), "no conformance case covers ", std::string(op_name(k)));
}

TEST_CASE("eager gradients match central finite differences (f64)") {
  for (const Case& c : cases()) {
    if (!c.finite_differences) continue;
    INFO(c.name);
    const Result eager = run_case(c, Mode::Eager, kFloat64, Device(), 7);
    const std::vector<std::vector<double>> fd = finite_difference_grads(c, 7);
    for (size_t i = 0; i < fd.size(); ++i) {
      if (fd[i].empty()) continue;
      CAPTURE(i);
      // No gradient reaches an input used only through comparisons: then the loss does not change
      // with it.
      const std::vector<double> grad =
          eager.grad_defined[i] ? eager.grads[i] : std::vector<double>(fd[i].size(), 0.0);
      REQUIRE(grad.size() == fd[i].size());
      for (size_t k = 0; k < fd[i].size(); ++k)
        CHECK_MESSAGE(std::abs(grad[k] - fd[i][k]) <= 1e-6 + 1e-5 * std::abs(fd[i][k]), "element ",
                      k, ": autograd ", grad[k], ", finite differences ", fd[i][k]);
    }
  }
}

TEST_CASE("traced equals eager in every mode, f32 and f64, on the CPU") {
  run_matrix(Device());
}

TEST_CASE("traced equals eager in every mode on a real GPU") {
  if (!cuda::available()) {
    MESSAGE("skipped: no CUDA device (" << cuda::unavailable_reason() << ")");
    return;
  }
  run_matrix(Device(kCUDA));
}
