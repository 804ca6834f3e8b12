// Helpers shared by the GPU tests. Tests that launch kernels, call cuBLAS or
// move data to a device begin with KILN_REQUIRE_GPU(): without a driver or a
// device they report why and pass as skipped, so the binary exits 0 on a
// machine with no GPU. Everything else here runs everywhere.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>

#include <kiln/kiln.h>

#include "frontend/test_util.h"
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"

namespace kiln::test {

/// Ends the test case (as skipped) in a build without the CUDA toolkit (no driver table).
#define KILN_REQUIRE_CUDA_BUILD()                                                               \
  do {                                                                                          \
    if (::kiln::cuda::driver_entry_points().empty()) {                                          \
      MESSAGE("skipped: this build has no CUDA support (" << ::kiln::cuda::unavailable_reason() \
                                                          << ")");                              \
      return;                                                                                   \
    }                                                                                           \
  } while (0)

/// Ends the test case (as skipped, with the reason) when there is no CUDA device.
#define KILN_REQUIRE_GPU()                                                               \
  do {                                                                                   \
    if (!::kiln::cuda::available()) {                                                    \
      MESSAGE("skipped: no CUDA device (" << ::kiln::cuda::unavailable_reason() << ")"); \
      return;                                                                            \
    }                                                                                    \
  } while (0)

/// Ends the test case (as skipped) when there is no device or cuBLAS cannot be loaded.
#define KILN_REQUIRE_CUBLAS()                                                        \
  do {                                                                               \
    KILN_REQUIRE_GPU();                                                              \
    if (!::kiln::cublas_available()) {                                               \
      MESSAGE("skipped: no cuBLAS (" << ::kiln::cublas_unavailable_reason() << ")"); \
      return;                                                                        \
    }                                                                                \
  } while (0)

/// a (on any device) and b (on any device) agree elementwise, compared on the host.
inline bool close(const Tensor& a, const Tensor& b, double rtol = 1e-4, double atol = 1e-5) {
  return allclose(a.cpu(), b.cpu(), rtol, atol);
}

}  // namespace kiln::test
