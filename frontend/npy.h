// NumPy .npy files: the array format of np.save / np.load, so data moves
// between Kiln (and the `kiln run` command) and Python.
//   Reads format versions 1.0, 2.0 and 3.0; writes 1.0 (2.0 for huge headers).
//   dtypes: <f4 <f8 |u1 |i1 <i2 <i4 <i8 |b1 (float32, float64, uint8, int8, int16,
//   int32, int64, bool), C order.
// Fortran-ordered (column-major) arrays of rank >= 2, big-endian data, other
// dtypes and malformed headers are kiln::Errors naming the file and the problem.
#pragma once

#include <string>

#include "frontend/tensor.h"

namespace kiln {

/// Reads a .npy file into a new CPU tensor of its dtype and shape.
Tensor read_npy(const std::string& path);

/// Writes `t` (any device, any strides) as a C-ordered .npy file, atomically.
void write_npy(const std::string& path, const Tensor& t, KILN_LOC);

/// The bytes of a .npy file holding `t` (what write_npy writes).
std::string npy_bytes(const Tensor& t, KILN_LOC);
/// Parses the bytes of a .npy file; `name` is used in errors.
Tensor parse_npy(std::string_view bytes, const std::string& name);

}  // namespace kiln
