// Which strided matrices a BLAS reads where they are: the one rule for
// OpenBLAS (blas.cpp) and cuBLAS (cublas.cpp), so both take the same operands
// without a copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace kiln {

/// One operand matrix in row-major terms: rows x cols with element strides (rs, cs).
struct MatrixStrides {
  int64_t rows, cols, rs, cs;
};

/// How a BLAS reads a matrix: as a row-major one (trans false) or as the
/// transpose of one (trans true), with leading dimension ld.
struct BlasLayout {
  bool trans;
  int64_t ld;
};

/// m's BLAS layout, or none when m is neither row-major nor a transposed
/// row-major matrix with a leading dimension at least its width (it must be
/// copied first). A single row or column takes either layout, whatever its
/// stride along its length-1 dim.
inline std::optional<BlasLayout> blas_layout(const MatrixStrides& m) {
  if (m.cols == 1 || m.cs == 1) {
    int64_t ld = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.rs;
    if (ld >= std::max<int64_t>(m.cols, 1)) return BlasLayout{false, ld};
  }
  if (m.rows == 1 || m.rs == 1) {
    int64_t ld = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.cs;
    if (ld >= std::max<int64_t>(m.rows, 1)) return BlasLayout{true, ld};
  }
  return std::nullopt;
}

}  // namespace kiln
