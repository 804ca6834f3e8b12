// Values for sort tests of every dtype (tests/runtime/sort_test.cpp and
// tests/cuda/cuda_library_test.cpp): many ties, and for floats NaN, +-inf and
// -0.0; for integers the dtype's extremes.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ir/dtype.h"

namespace kiln::test {

inline std::vector<double> sort_inputs(DType dt, int64_t n, std::mt19937& rng) {
  const double inf = std::numeric_limits<double>::infinity();
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    const int p = pick(rng);
    if (dt == DType::b8) {
      x = p % 2;
    } else if (is_floating(dt)) {
      x = p < 3    ? std::nan("")
          : p < 5  ? inf
          : p < 7  ? -inf
          : p < 10 ? -0.0
          : p < 40 ? double(p % 5)
                   : (p - 50) * 1.37;
    } else {
      const double big = dt == DType::i8    ? 127.0
                         : dt == DType::u8  ? 255.0
                         : dt == DType::i16 ? 32767.0
                         : dt == DType::i32 ? 2147483647.0
                                            : 9.0e18;
      const double low = dt == DType::u8 ? 0.0 : -big - 1;
      x = p < 3 ? big : p < 6 ? low : dt == DType::u8 ? double(p % 7) : double(p % 7) - 3;
    }
  }
  return v;
}

}  // namespace kiln::test
