// Shapes, strides and broadcasting.
#include "ir/shape.h"

#include <algorithm>

#include "ir/error.h"

namespace kiln {

namespace {

[[noreturn]] void too_large(const Shape& s, const char* what) {
  detail::fail("shape ", shape_str(s), " is too large: its ", what,
               " does not fit in 64 bits (expected at most 2^63-1)");
}

}  // namespace

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  KILN_CHECK(!__builtin_mul_overflow(a, b, &r), what, " overflows: ", a, " * ", b,
             " does not fit in 64 bits");
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  KILN_CHECK(!__builtin_add_overflow(a, b, &r), what, " overflows: ", a, " + ", b,
             " does not fit in 64 bits");
  return r;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n)) too_large(s, "element count");
  return n;
}

int64_t byte_size(const Shape& s, size_t elem_size) {
  for (int64_t d : s)
    KILN_CHECK(d >= 0, "shape ", shape_str(s), " has a negative dimension (expected sizes >= 0)");
  int64_t n;
  if (__builtin_mul_overflow(numel(s), static_cast<int64_t>(elem_size), &n))
    too_large(s, "byte size");
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    if (__builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc))
      too_large(s, "element count");
  }
  return st;
}

bool is_contiguous(const Shape& s, const Strides& strides) {
  if (s.size() != strides.size()) return false;
  if (numel(s) == 0) return true;
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, "shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcastable(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

int64_t normalize_dim(int64_t dim, int64_t rank) {
  KILN_CHECK(rank > 0, "dim ", dim, " is out of range for a tensor of rank 0 (it has no dims)");
  KILN_CHECK(dim >= -rank && dim < rank, "dim ", dim, " is out of range for a tensor of rank ",
             rank, " (expected ", -rank, "..", rank - 1, ")");
  return dim < 0 ? dim + rank : dim;
}

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (int64_t d : dims) out.push_back(normalize_dim(d, rank));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Shape unfold_shape(const Shape& in, int64_t dim, int64_t size, int64_t step, int64_t dilation) {
  KILN_CHECK(!in.empty(), "expected a tensor of rank >= 1, got a scalar");
  const int64_t d = normalize_dim(dim, int64_t(in.size()));
  const int64_t len = in[size_t(d)];
  KILN_CHECK(step >= 1 && dilation >= 1, "expected step and dilation >= 1, got step=", step,
             " dilation=", dilation);
  KILN_CHECK(size >= 0 && size <= len, "expected a window size in [0, ", len, "] for dim ", d,
             " of ", shape_str(in), ", got ", size);
  const int64_t span =
      size == 0 ? 0 : checked_add(checked_mul(size - 1, dilation, "window span"), 1, "window span");
  KILN_CHECK(span <= len, "expected windows of ", size, " elements ", dilation,
             " apart (a span of ", span, ") within dim ", d, " of ", shape_str(in));
  Shape out = in;
  out[size_t(d)] = (len - span) / step + 1;
  out.push_back(size);
  return out;
}

Shape infer_reshape(const Shape& requested, int64_t n) {
  Shape out = requested;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer_at < 0, "shape ", shape_str(requested), " has more than one -1");
      infer_at = static_cast<int>(i);
    } else {
      KILN_CHECK(out[i] >= 0, "shape ", shape_str(requested), " has a negative size");
      if (__builtin_mul_overflow(known, out[i], &known)) too_large(requested, "element count");
    }
  }
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 && n % known == 0, "shape ", shape_str(requested),
               " is invalid for a tensor of ", n, " elements");
    out[infer_at] = n / known;
  }
  KILN_CHECK(numel(out) == n, "shape ", shape_str(requested), " is invalid for a tensor of ", n,
             " elements (it holds ", numel(out), ")");
  return out;
}

}  // namespace kiln
