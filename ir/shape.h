// Shapes, strides and broadcasting.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// A tensor's dimensions, outermost first. A 0-d (scalar) tensor has an empty shape.
/// A std::vector<int64_t> with libtorch's IntArrayRef spellings on top, so that
/// `x.sizes().vec()` and `x.strides().vec()` read as they do there.
struct Shape : std::vector<int64_t> {
  using std::vector<int64_t>::vector;
  Shape() = default;
  Shape(const std::vector<int64_t>& v) : std::vector<int64_t>(v) {}
  Shape(std::vector<int64_t>&& v) noexcept : std::vector<int64_t>(std::move(v)) {}
  /// A copy as a plain vector (libtorch's IntArrayRef::vec()).
  std::vector<int64_t> vec() const { return *this; }
};
/// Element strides, one per dimension.
using Strides = Shape;

/// Product of the dimensions (1 for a scalar). Throws kiln::Error when the
/// product does not fit in int64 ("shape [...] has more than 2^63-1 elements").
int64_t numel(const Shape& s);
/// a * b for sizes, strides and byte counts; throws kiln::Error naming `what`
/// ("byte size of shape [2^40,2^40]") when the product overflows int64.
int64_t checked_mul(int64_t a, int64_t b, const char* what);
/// a + b, checked the same way.
int64_t checked_add(int64_t a, int64_t b, const char* what);
/// Bytes of a dense tensor of this shape with `elem_size`-byte elements, checked.
int64_t byte_size(const Shape& s, size_t elem_size);
/// Row-major strides of a dense tensor of this shape.
Strides contiguous_strides(const Shape& s);
bool is_contiguous(const Shape& s, const Strides& strides);
/// "[64,100]".
std::string shape_str(const Shape& s);

/// NumPy/PyTorch broadcasting of two shapes; throws kiln::Error naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);
bool broadcastable(const Shape& from, const Shape& to);

/// Maps a possibly negative dim into [0, rank); throws kiln::Error when out of range
/// ("dim 3 is out of range for a tensor of rank 2 (expected -2..1)").
int64_t normalize_dim(int64_t dim, int64_t rank);
/// Normalises, sorts and de-duplicates a list of dims.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t rank);

/// Resolves one -1 in a requested shape against numel; checks the element count.
Shape infer_reshape(const Shape& requested, int64_t numel);

/// unfold's result: dim `dim` of `in` becomes the count of windows of `size`
/// elements, `dilation` apart, every `step`, and the windows a new last dim.
/// Throws kiln::Error for a scalar, a step or dilation below 1, or windows that
/// do not fit.
Shape unfold_shape(const Shape& in, int64_t dim, int64_t size, int64_t step, int64_t dilation);

}  // namespace kiln
