// Movement ops: the strided geometry of views (permute, expand, slice, unfold,
// and reshape where the layout allows it, as torch's view) and the reference
// kernels, which copy through that geometry into a dense result. pad writes
// its fill (`value`, zero by default) and then the input into a strided window
// of the result.
#include <cmath>
#include <cstring>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

bool permute_geometry(const Attrs& attrs, const Shape& shape, const Strides& strides,
                      ViewGeometry* out) {
  const std::vector<int64_t>& perm = attrs.ints(AttrKey::perm);
  const int64_t rank = static_cast<int64_t>(shape.size());
  KILN_CHECK(int64_t(perm.size()) == rank, "permute: expected ", rank, " dims in perm, got ",
             perm.size());
  std::vector<char> seen(rank, 0);
  out->shape.resize(rank);
  out->strides.resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t p = normalize_dim(perm[i], rank);
    KILN_CHECK(!seen[p], "permute: dim ", p, " appears twice in perm");
    seen[p] = 1;
    out->shape[i] = shape[p];
    out->strides[i] = strides[p];
  }
  out->offset = 0;
  return true;
}

bool expand_geometry(const Attrs& attrs, const Shape& shape, const Strides& strides,
                     ViewGeometry* out) {
  const std::vector<int64_t>& target = attrs.ints(AttrKey::shape);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t trank = static_cast<int64_t>(target.size());
  KILN_CHECK(trank >= rank, "expand: cannot expand ", shape_str(shape), " to fewer dims ",
             shape_str(target));
  out->shape.assign(trank, 0);
  out->strides.assign(trank, 0);
  for (int64_t d = 0; d < trank; ++d) {
    int64_t j = d - (trank - rank);
    int64_t want = target[d];
    if (j < 0) {
      KILN_CHECK(want >= 0, "expand: -1 is not allowed for a new leading dim in ",
                 shape_str(target));
      out->shape[d] = want;
      continue;
    }
    if (want == -1) want = shape[j];
    out->shape[d] = want;
    if (shape[j] == want) {
      out->strides[d] = want == 1 ? 0 : strides[j];
    } else {
      KILN_CHECK(shape[j] == 1, "expand: cannot expand ", shape_str(shape), " to ",
                 shape_str(target), " (dim ", j, " has size ", shape[j], ", not 1)");
    }
  }
  out->offset = 0;
  return true;
}

bool slice_geometry(const Attrs& attrs, const Shape& shape, const Strides& strides,
                    ViewGeometry* out) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t dim = normalize_dim(attrs.i(AttrKey::dim), rank);
  const int64_t size = shape[dim];
  const int64_t step = attrs.i(AttrKey::step, 1);
  KILN_CHECK(step > 0, "slice: step must be positive, got ", step);
  auto clamp = [&](int64_t v) {
    if (v < 0) v += size;
    return std::min(std::max<int64_t>(v, 0), size);
  };
  const int64_t start = clamp(attrs.i(AttrKey::start, 0));
  const int64_t end = clamp(attrs.i(AttrKey::end, size));
  const int64_t len = end > start ? (end - start - 1) / step + 1 : 0;
  out->shape = shape;
  out->strides = strides;
  out->shape[dim] = len;
  // One element or none: the step never applies (and a huge one would wrap).
  out->strides[dim] = len > 1 ? strides[dim] * step : strides[dim];
  out->offset = len > 0 ? start * strides[dim] : 0;
  return true;
}

// The windows share the dim's stride: the window count steps `step` elements,
// the new last dim `dilation` (so windows may overlap in memory, as torch's).
bool unfold_geometry(const Attrs& attrs, const Shape& shape, const Strides& strides,
                     ViewGeometry* out) {
  if (shape.empty()) return false;
  const int64_t dim = normalize_dim(attrs.i(AttrKey::dim), int64_t(shape.size()));
  const int64_t step = attrs.i(AttrKey::step), dilation = attrs.i(AttrKey::dilation, 1);
  out->shape = unfold_shape(shape, dim, attrs.i(AttrKey::size), step, dilation);
  out->strides = strides;
  out->strides[dim] = out->shape[dim] > 1 ? strides[dim] * step : strides[dim];
  out->strides.push_back(out->shape.back() > 1 ? strides[dim] * dilation : strides[dim]);
  out->offset = 0;
  return true;
}

// torch's computeStride: a reshape is a view when each run of input dims that
// is contiguous in memory maps onto whole output dims.
bool reshape_geometry(const Attrs& attrs, const Shape& shape, const Strides& strides,
                      ViewGeometry* out) {
  const int64_t n = kiln::numel(shape);
  const Shape target = infer_reshape(attrs.ints(AttrKey::shape), n);
  out->shape = target;
  out->offset = 0;
  if (n == 0 || shape.empty()) {
    out->strides = contiguous_strides(target);
    return true;
  }
  Strides ns(target.size(), 0);
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        ns[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return false;
  out->strides = ns;
  return true;
}

View offset_view(const View& in, const ViewGeometry& g) {
  View v;
  v.data = static_cast<char*>(in.data) + g.offset * int64_t(dtype_size(in.dtype));
  v.dtype = in.dtype;
  v.shape = g.shape;
  v.strides = g.strides;
  return v;
}

void pad_kernel(const Attrs& attrs, const View& in, const View& out) {
  const int64_t rank = in.rank();
  const int64_t dim = normalize_dim(attrs.i(AttrKey::dim), rank);
  const int64_t low = attrs.i(AttrKey::low, 0);
  const int64_t interior = attrs.i(AttrKey::interior, 0);
  KILN_CHECK(interior >= 0, "pad: interior must be >= 0, got ", interior);
  KILN_CHECK(out.rank() == rank, "pad: output rank ", out.rank(), " differs from input rank ",
             rank);
  const int64_t esize = int64_t(dtype_size(out.dtype));
  auto* dst = static_cast<char*>(out.data);
  const double fill = attrs.f(AttrKey::value, 0.0);
  if (fill == 0.0 && !std::signbit(fill))
    parallel_for(out.numel() * esize, int64_t(1) << 18,
                 [&](int64_t b, int64_t e) { std::memset(dst + b, 0, size_t(e - b)); });
  else
    reference_kernel(OpKind::constant, Attrs{{AttrKey::value, fill}}, {}, out);
  // Input element i lands at low + i * (interior + 1); keep those inside the result.
  const int64_t gap = interior + 1, in_len = in.shape[dim], out_len = out.shape[dim];
  const int64_t first = low < 0 ? (-low + gap - 1) / gap : 0;
  const int64_t last =
      std::min(in_len - 1, out_len - 1 - low >= 0 ? (out_len - 1 - low) / gap : -1);
  if (last < first) return;
  const int64_t count = last - first + 1;
  View src = in;
  src.data = static_cast<char*>(in.data) + first * in.strides[dim] * int64_t(dtype_size(in.dtype));
  src.shape[dim] = count;
  View win = dense_view(out.data, out.dtype, out.shape);
  win.data = dst + (low + first * gap) * win.strides[dim] * esize;
  win.shape[dim] = count;
  win.strides[dim] *= gap;
  copy_to(src, win);
}

}  // namespace

bool view_geometry(OpKind k, const Attrs& attrs, const Shape& in_shape, const Strides& in_strides,
                   ViewGeometry* out) {
  switch (k) {
    case OpKind::permute:
      return permute_geometry(attrs, in_shape, in_strides, out);
    case OpKind::expand:
      return expand_geometry(attrs, in_shape, in_strides, out);
    case OpKind::slice:
      return slice_geometry(attrs, in_shape, in_strides, out);
    case OpKind::unfold:
      return unfold_geometry(attrs, in_shape, in_strides, out);
    case OpKind::reshape:
      return reshape_geometry(attrs, in_shape, in_strides, out);
    default:
      return false;
  }
}

namespace detail {

void ref_movement(OpKind k, const Attrs& attrs, const View& in, const View& out) {
  switch (k) {
    case OpKind::reshape: {
      KILN_CHECK(in.numel() == out.numel(), "reshape: cannot reshape ", shape_str(in.shape), " (",
                 in.numel(), " elements) into ", shape_str(out.shape));
      // Row-major order of the input is the order of the dense output.
      View dst = dense_view(out.data, out.dtype, in.shape);
      return copy_to(in, dst);
    }
    case OpKind::expand:
    case OpKind::permute:
    case OpKind::slice:
    case OpKind::unfold: {
      ViewGeometry g;
      view_geometry(k, attrs, in.shape, in.strides, &g);
      KILN_CHECK(g.shape == out.shape, op_name(k), ": result shape ", shape_str(g.shape),
                 " does not match the output buffer's ", shape_str(out.shape));
      return copy_to(offset_view(in, g), out);
    }
    case OpKind::pad:
      return pad_kernel(attrs, in, out);
    case OpKind::detach:
    case OpKind::rebind:  // the value of operand 0
      return copy_to(in, out);
    default:
      break;
  }
  KILN_CHECK(false, "reference kernel: ", op_name(k), " is not a movement op");
}

}  // namespace detail
}  // namespace kiln
