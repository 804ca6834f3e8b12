// Joining, splitting and indexing, built from table ops so that autodiff,
// tracing and fusion see ordinary nodes:
//   cat        each piece padded with zeros to the result's extent, then summed
//              (pad's gradient is a slice; traced, the sum fuses into one kernel)
//   chunk, split  slices (views)
//   tril, triu where(column - row compared with k, x, 0)
//   gather, index_select, embedding   the gather op: each output reads the one
//                            element its index names
//   scatter_add, index_add, index_put_(accumulate)   the scatter_add op
// Integer indices are range-checked: eagerly at once, traced by a check_index
// node that the compiled plan runs at every call (a clear error, never a read
// out of bounds).
#include <algorithm>
#include <limits>
#include <numeric>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/reference.h"

namespace kiln {

using detail::apply;
using detail::here;

using detail::checked_dim;

namespace detail {

// An index outside [0, n) would give an all-zero one-hot row (and from it a finite,
// wrong loss); PyTorch raises, and so does Kiln, naming `op`. Eagerly the indices
// are checked on the host before anything is computed; in a trace a check_index
// node does it when the compiled plan runs.
Tensor checked_values(OpKind check, const Tensor& t, const Attrs& attrs, Loc loc) {
  SourceLoc where = SourceLoc::from(loc);
  if (current_trace())  // a captured tensor is a parameter: checked at every call too
    return detail::apply(check, {t}, attrs, where);
  Tensor host = t.cpu(loc).contiguous(loc);
  try {
    check_values(check, attrs, host.impl()->view());
  } catch (Error& e) {
    e.attach(where);
    throw;
  }
  return t;
}

Tensor gather_along(const Tensor& x, int64_t dim, const Tensor& checked, Loc l) {
  return apply(OpKind::gather, {x, checked}, {{AttrKey::dim, dim}}, here(l));
}

Tensor scatter_add_along(const Tensor& base, int64_t dim, const Tensor& checked, const Tensor& src,
                         Loc l) {
  return apply(OpKind::scatter_add, {base, checked, src}, {{AttrKey::dim, dim}}, here(l));
}

void scatter_add_into(const std::shared_ptr<TensorImpl>& dst_impl, const Attrs& attrs,
                      const Tensor& index, const Tensor& src, SourceLoc loc) {
  TensorImpl& dst = *dst_impl;
  const TensorImpl &i = *index.impl(), &s = *src.impl();
  const bool here_in_place = !dst.symbolic() && !i.symbolic() && !s.symbolic() &&
                             !dst.type.device.is_cuda() && !i.type.device.is_cuda() &&
                             !s.type.device.is_cuda() && dst.view().contiguous() &&
                             s.buffer != dst.buffer && i.buffer != dst.buffer;
  if (!here_in_place) {
    const Tensor d(dst_impl);
    return assign(d, apply(OpKind::scatter_add, {d, index, src}, attrs, loc), loc);
  }
  const View views[] = {dst.view(), i.view(), s.view()};
  reference_kernel(OpKind::scatter_add, attrs, views, dst.view());
  dst.buffer->version++;
}

Tensor checked_indices(const Tensor& indices, int64_t n, const char* op, Loc loc) {
  if (is_floating(indices.dtype()) || indices.dtype() == DType::b8)
    throw Error(std::string(op) + ": expected integer indices, got " + dtype_name(indices.dtype()),
                SourceLoc::from(loc));
  return checked_values(OpKind::check_index, indices,
                        {{AttrKey::high, n}, {AttrKey::name, std::string(op)}}, loc);
}

// One-hot rows of indices already checked to lie in [0, n).
}  // namespace detail

// ---- joining ----

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim, Loc l) {
  const SourceLoc loc = here(l);
  if (tensors.empty()) throw Error("cat: expected a non-empty list of tensors", loc);
  // PyTorch's legacy rule: a 1-D tensor of size 0 is left out whatever the
  // other tensors' shapes (its dtype and device still count).
  const auto left_out = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  const auto kept = std::find_if_not(tensors.begin(), tensors.end(), left_out);
  const Tensor& first = kept == tensors.end() ? tensors[0] : *kept;
  const int64_t d = checked_dim(dim, std::max<int64_t>(first.dim(), 1), "cat", l);
  if (first.dim() == 0) throw Error("cat: zero-dimensional tensors cannot be concatenated", loc);
  DType dt = first.dtype();
  int64_t total = 0;
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool same = t.dim() == first.dim();
    for (int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.size(k) == first.size(k);
    if (!same && !left_out(t))
      throw Error("cat: expected every tensor to match " + shape_str(first.sizes()) +
                      " except in dim " + std::to_string(d) + ", got " + shape_str(t.sizes()) +
                      " for tensor " + std::to_string(i),
                  loc);
    if (t.device() != first.device())
      throw Error("cat: tensors on " + first.device().str() + " and " + t.device().str() +
                      " (expected one device)",
                  loc);
    dt = promote_types(dt, t.dtype());
    if (t.dim() != first.dim()) continue;
    pieces.push_back(t);
    if (t.size(d) > std::numeric_limits<int64_t>::max() - total)
      throw Error("cat: the sizes of dim " + std::to_string(d) +
                      " add up to more than 2^63-1 (tensor " + std::to_string(i) + " of shape " +
                      shape_str(t.sizes()) + " after " + std::to_string(total) +
                      "; expected a result that fits in 64 bits)",
                  loc);
    total += t.size(d);
  }
  if (pieces.size() == 1) return first.to(dt, l).clone(l);
  Tensor out;
  int64_t offset = 0;
  for (const Tensor& t : pieces) {
    const int64_t n = t.size(d);
    // Filled with -0.0: x + -0.0 is x for every float x, -0.0 included (ops.def: pad).
    Attrs pad{{AttrKey::dim, d},
              {AttrKey::low, offset},
              {AttrKey::high, total - offset - n},
              {AttrKey::interior, int64_t(0)}};
    if (is_floating(dt)) pad.set(AttrKey::value, -0.0);
    Tensor piece = apply(OpKind::pad, {t.to(dt, l)}, pad, loc);
    out = out.defined() ? out.add(piece, 1, l) : piece;
    offset += n;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim, Loc l) {
  if (tensors.empty()) throw Error("stack: expected a non-empty list of tensors", here(l));
  const int64_t d = checked_dim(dim, tensors[0].dim() + 1, "stack", l);
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].sizes() != tensors[0].sizes())
      throw Error("stack: expected every tensor of shape " + shape_str(tensors[0].sizes()) +
                      ", got " + shape_str(tensors[i].sizes()) + " for tensor " + std::to_string(i),
                  here(l));
    pieces.push_back(tensors[i].unsqueeze(d, l));
  }
  return cat(pieces, d, l);
}

std::vector<Tensor> Tensor::split(std::vector<int64_t> sizes, int64_t dim, Loc l) const {
  const int64_t d = checked_dim(dim, this->dim(), "split", l);
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw Error("split: expected sizes >= 0, got " + shape_str(sizes), here(l));
    if (s > size(d) - sum)  // also keeps the sum from wrapping
      throw Error("split: sizes " + shape_str(sizes) + " add up to more than the size of dim " +
                      std::to_string(d) + ", " + std::to_string(size(d)),
                  here(l));
    sum += s;
  }
  if (sum != size(d))
    throw Error("split: sizes " + shape_str(sizes) + " add up to " + std::to_string(sum) +
                    ", expected the size of dim " + std::to_string(d) + ", " +
                    std::to_string(size(d)),
                here(l));
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(d, at, s, l));
    at += s;
  }
  return out;
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim, Loc l) const {
  const int64_t d = checked_dim(dim, this->dim(), "split", l);
  if (split_size <= 0)
    throw Error("split: expected a split size > 0, got " + std::to_string(split_size), here(l));
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < size(d); at += split_size)
    sizes.push_back(std::min(split_size, size(d) - at));
  if (sizes.empty()) sizes.push_back(0);
  return split(sizes, d, l);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim, Loc l) const {
  if (chunks <= 0)
    throw Error("chunk: expected a number of chunks > 0, got " + std::to_string(chunks), here(l));
  const int64_t d = checked_dim(dim, this->dim(), "chunk", l);
  const int64_t each = size(d) == 0 ? 1 : (size(d) - 1) / chunks + 1;  // ceil, without wrapping
  return split(each, d, l);
}

// ---- triangles ----

namespace {
Tensor triangle(const Tensor& x, int64_t k, bool lower, Loc l) {
  if (x.dim() < 2)
    throw Error(std::string(lower ? "tril" : "triu") +
                    ": expected a tensor of at least 2 dims, got " + shape_str(x.sizes()),
                here(l));
  TensorOptions o = TensorOptions(kInt64).device(x.device());
  Tensor row = arange(x.size(-2), o, l).unsqueeze(1, l);
  Tensor col = arange(x.size(-1), o, l);
  Tensor diff = col.sub(row, 1, l);  // [n, m]: column - row
  Tensor keep = lower ? diff.le(Scalar(k), l) : diff.ge(Scalar(k), l);
  return where(keep, x, zeros({}, TensorOptions(x.dtype()).device(x.device()), l), l);
}
}  // namespace

Tensor Tensor::tril(int64_t diagonal, Loc l) const {
  return triangle(*this, diagonal, true, l);
}
Tensor Tensor::triu(int64_t diagonal, Loc l) const {
  return triangle(*this, diagonal, false, l);
}
Tensor tril(const Tensor& x, int64_t diagonal, Loc l) {
  return x.tril(diagonal, l);
}
Tensor triu(const Tensor& x, int64_t diagonal, Loc l) {
  return x.triu(diagonal, l);
}

// ---- masks and indices ----

Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value, Loc l) const {
  if (mask.dtype() != DType::b8)
    throw Error("masked_fill: expected a bool mask, got " + std::string(dtype_name(mask.dtype())),
                here(l));
  if (value.dim() != 0)
    throw Error("masked_fill: expected a 0-d value, got " + shape_str(value.sizes()), here(l));
  return where(mask, value.to(dtype(), l), *this, l);
}
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value, Loc l) const {
  return masked_fill(mask, full({}, value, TensorOptions(dtype()).device(device()), l), l);
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index, Loc l) const {
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "index_select", l);
  if (index.dim() != 1)
    throw Error("index_select: expected 1-D indices, got " + shape_str(index.sizes()), here(l));
  if (this->dim() == 0)
    return reshape({1}, l).index_select(0, index, l).reshape({index.size(0)}, l);
  Tensor idx = detail::checked_indices(index, size(d), "index_select", l);
  // The indices along dim d, broadcast over the other dims (a view: nothing is
  // copied, and a kernel reads one index per row).
  Shape out = sizes(), along(static_cast<size_t>(this->dim()), 1);
  out[static_cast<size_t>(d)] = along[static_cast<size_t>(d)] = index.size(0);
  return detail::gather_along(*this, d, idx.reshape(along, l).expand(out, l), l);
}

Tensor Tensor::gather(int64_t dim, const Tensor& index, Loc l) const {
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "gather", l);
  if (index.dim() != this->dim())
    throw Error("gather: expected indices with as many dims as the input (" +
                    std::to_string(this->dim()) + "), got " + shape_str(index.sizes()),
                here(l));
  if (this->dim() == 0) {
    (void)detail::checked_indices(index, 1, "gather", l);
    return clone(l);
  }
  return detail::gather_along(*this, d, detail::checked_indices(index, size(d), "gather", l), l);
}

Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src, Loc l) const {
  const SourceLoc loc = here(l);
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "scatter_add", l);
  if (index.dim() != this->dim() || src.dim() != this->dim())
    throw Error("scatter_add: expected indices and source with as many dims as the input (" +
                    std::to_string(this->dim()) + "), got " + shape_str(index.sizes()) + " and " +
                    shape_str(src.sizes()),
                loc);
  if (this->dim() == 0) {
    (void)detail::checked_indices(index, 1, "scatter_add", l);
    return add(src.to(dtype(), l), 1, l);
  }
  // As PyTorch: the indices no larger than the source anywhere, nor than the
  // input outside dim; the source's elements past the indices' extent unused.
  Tensor source = src;
  for (int64_t k = 0; k < this->dim(); ++k) {
    if (index.size(k) > src.size(k) || (k != d && index.size(k) > size(k)))
      throw Error("scatter_add: indices of shape " + shape_str(index.sizes()) +
                      " are larger than the source " + shape_str(src.sizes()) +
                      (k != d ? " or the input " + shape_str(sizes()) : std::string()) +
                      " in dim " + std::to_string(k),
                  loc);
    if (index.size(k) < src.size(k)) source = source.narrow(k, 0, index.size(k), l);
  }
  Tensor idx = detail::checked_indices(index, size(d), "scatter_add", l);
  return detail::scatter_add_along(*this, d, idx, source.to(dtype(), l), l);
}

namespace {

// Where `count` (how many writes reached each place) is positive: the mean of
// the values `sum` added there (the value itself where one write reached it, or
// where every write carried the same value); elsewhere `base`. The divisor is
// at least 1, so the branch where() drops never holds 0/0 (its gradient would).
Tensor written_or(const Tensor& base, const Tensor& count, const Tensor& sum, Loc l) {
  Tensor written = count.gt(Scalar(0), l);
  if (base.is_floating_point()) return where(written, sum.div(count.clamp_min(1, l), l), base, l);
  // Integers: a single write keeps its value exactly; only a place written
  // several times goes through the (floating) mean.
  Tensor mean = sum.div(count.clamp_min(1, l), l).to(base.dtype(), l);
  return where(written, where(count.gt(Scalar(1), l), mean, sum, l), base, l);
}

// How many writes a scatter of `index` along `dim` makes at each place of a
// tensor like x (a scatter_add of ones over zeros, which checks the dims, shapes
// and indices).
Tensor scatter_counts(const Tensor& x, int64_t dim, const Tensor& index, Loc l) {
  const TensorOptions like = TensorOptions(x.dtype()).device(x.device());
  return zeros(x.sizes(), like, l).scatter_add(dim, index, ones(index.sizes(), like, l), l);
}

}  // namespace

Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src, Loc l) const {
  // How many writes reach each place, and the sum of what they write.
  Tensor zero = zeros(sizes(), TensorOptions(dtype()).device(device()), l);
  return written_or(*this, scatter_counts(*this, dim, index, l), zero.scatter_add(dim, index, src, l),
                    l);
}

Tensor Tensor::scatter(int64_t dim, const Tensor& index, Scalar value, Loc l) const {
  const Tensor written = scatter_counts(*this, dim, index, l).gt(Scalar(0), l);
  return where(written, full({}, value, TensorOptions(dtype()).device(device()), l), *this, l);
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src, Loc l) {
  return copy_(scatter(dim, index, src, l), l);
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, Scalar value, Loc l) {
  return copy_(scatter(dim, index, value, l), l);
}

Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha,
                         Loc l) const {
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "index_add", l);
  if (index.dim() != 1)
    throw Error("index_add: expected 1-D indices, got " + shape_str(index.sizes()), here(l));
  if (this->dim() == 0) return scatter_add(0, index.reshape({}, l), source.mul(alpha, l), l);
  Shape expected = sizes();
  expected[static_cast<size_t>(d)] = index.size(0);
  if (source.sizes() != expected)
    throw Error("index_add: expected a source of shape " + shape_str(expected) +
                    " (the input with dim " + std::to_string(d) + " of the indices' length), got " +
                    shape_str(source.sizes()),
                here(l));
  // The indices checked before they are broadcast along the other dims (a view:
  // a kernel reads one index per row).
  Shape along(static_cast<size_t>(this->dim()), 1);
  along[static_cast<size_t>(d)] = index.size(0);
  Tensor idx =
      detail::checked_indices(index, size(d), "index_add", l).reshape(along, l).expand(expected, l);
  Tensor scaled =
      alpha.value == 1 && alpha.kind != ScalarKind::floating ? source : source.mul(alpha, l);
  return detail::scatter_add_along(*this, d, idx, scaled.to(dtype(), l), l);
}

Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha,
                           Loc l) {
  return copy_(index_add(dim, index, source, alpha, l), l);
}

Tensor& Tensor::index_put_(const std::vector<Tensor>& indices_, const Tensor& values, bool accumulate,
                           Loc l) {
  if (indices_.empty() || static_cast<int64_t>(indices_.size()) > dim())
    throw Error("index_put_: expected 1 to " + std::to_string(dim()) + " index tensors for a tensor of shape " +
                    shape_str(sizes()) + ", got " + std::to_string(indices_.size()),
                here(l));
  // Bool masks stand for the positions of their true elements (eager only).
  std::vector<Tensor> indices;
  for (const Tensor& t : indices_) {
    if (is_floating(t.dtype()))
      throw Error(std::string("index_put_: index tensors must be integer or bool tensors, got ") +
                      dtype_name(t.dtype()),
                  here(l));
    if (t.dtype() != kBool) {
      indices.push_back(t);
      continue;
    }
    detail::check_size_static("index_put_", "a bool mask's number of true elements", l);
    const Tensor at = t.nonzero(l);
    for (int64_t j = 0; j < t.dim(); ++j) indices.push_back(at.select(1, j, l));
  }
  // The indexed leading dims flattened into one: each place's row-major
  // position among them, from indices checked against their own dims.
  const int64_t k = static_cast<int64_t>(indices.size());
  if (k > dim())
    throw Error("index_put_: masks and indices cover " + std::to_string(k) + " dims of a tensor of shape " +
                    shape_str(sizes()),
                here(l));
  Shape b = indices[0].sizes();
  for (const Tensor& t : indices) b = broadcast_shapes(b, t.sizes());
  const int64_t n = kiln::numel(b);
  Tensor flat_index;
  int64_t places = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    const Tensor& t = indices[size_t(j)];
    const Tensor wrapped = where(t.lt(Scalar(0), l), t.add(Scalar(size(j)), l), t, l);
    const Tensor idx = detail::checked_indices(wrapped, size(j), "index_put_", l).to(kInt64, l).expand(b, l).reshape({n}, l);
    const Tensor term = places == 1 ? idx : idx.mul(Scalar(places), l);
    flat_index = flat_index.defined() ? flat_index.add(term, 1, l) : term;
    places *= size(j);
  }
  Shape flat = {places}, rows = {n};
  flat.insert(flat.end(), sizes().begin() + k, sizes().end());
  rows.insert(rows.end(), sizes().begin() + k, sizes().end());
  Shape value_shape = b;
  value_shape.insert(value_shape.end(), sizes().begin() + k, sizes().end());
  const Tensor base = reshape(flat, l);
  const Tensor rows_values = values.expand(value_shape, l).reshape(rows, l).to(dtype(), l);
  Tensor result;
  if (accumulate) {
    result = base.index_add(0, flat_index, rows_values, 1, l);
  } else {
    // Assignment: each indexed place gets its value (a place named twice: the
    // mean of its values; PyTorch leaves which one wins undefined).
    const Tensor zero = zeros(flat, TensorOptions(dtype()).device(device()), l);
    const Tensor count = zero.index_add(0, flat_index, ones(rows, TensorOptions(dtype()).device(device()), l), 1, l);
    result = written_or(base, count, zero.index_add(0, flat_index, rows_values, 1, l), l);
  }
  return copy_(result.reshape(sizes(), l), l);
}

Tensor Tensor::index_copy(int64_t dim_, const Tensor& index, const Tensor& source, Loc l) const {
  const int64_t d = detail::checked_dim(dim_, dim(), "index_copy", l);
  if (index.dim() > 1 || source.dim() != dim() || source.size(d) != index.numel())
    throw Error("index_copy: expected a 1-D index and a source of the input's rank with " +
                    std::to_string(index.numel()) + " slices along dim " + std::to_string(dim_) +
                    ", got index " + shape_str(index.sizes()) + " and source " + shape_str(source.sizes()),
                here(l));
  const Tensor i = index.reshape({-1}, l);
  const TensorOptions o = TensorOptions(dtype()).device(device());
  const Tensor zero = zeros(sizes(), o, l);
  const Tensor count = zero.index_add(d, i, ones(source.sizes(), o, l), 1, l);
  return written_or(*this, count, zero.index_add(d, i, source.to(dtype(), l), 1, l), l);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Loc l) {
  return x.index_select(dim, index, l);
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Loc l) {
  return x.gather(dim, index, l);
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, Loc l) {
  return x.scatter_add(dim, index, src, l);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, Loc l) {
  return x.scatter(dim, index, src, l);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value, Loc l) {
  return x.scatter(dim, index, value, l);
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha, Loc l) {
  return x.index_add(dim, index, source, alpha, l);
}

// ---- x.index({...}) ----

namespace {

/// Negative positions counted from the end of a dim of `size`, as advanced
/// indexing does (index_select and gather then check the range). Eagerly,
/// host indices with no negative element are returned as they are, so an
/// embedding-style lookup pays no elementwise ops for the wrap.
Tensor wrap_negative(const Tensor& idx, int64_t size, Loc l) {
  if (!current_trace() && !idx.impl()->symbolic() && !idx.device().is_cuda()) {
    std::vector<int64_t> values(static_cast<size_t>(idx.numel()));
    copy_to(idx.impl()->view(), dense_view(values.data(), DType::i64, idx.sizes()));
    if (std::none_of(values.begin(), values.end(), [](int64_t v) { return v < 0; })) return idx;
  }
  return where(idx.lt(Scalar(0), l), idx.add(Scalar(size), l), idx, l);
}

/// Advanced indexing (NumPy's and PyTorch's): the integer tensors `picks[j]`,
/// broadcast together to B, pick the elements r[.., picks[0][b], .., picks[1][b],
/// ..] at the dims `at[j]`. The result has B's dims where the first picked dim
/// was when the picked dims are adjacent, else in front, then r's other dims.
Tensor advanced_index(const Tensor& r, const std::vector<int64_t>& at, const std::vector<Tensor>& picks,
                      Loc l) {
  Shape b = picks[0].sizes();
  for (const Tensor& p : picks) b = broadcast_shapes(b, p.sizes());
  std::vector<int64_t> perm = at;
  Shape rest;
  for (int64_t d = 0; d < r.dim(); ++d)
    if (std::find(at.begin(), at.end(), d) == at.end()) {
      perm.push_back(d);
      rest.push_back(r.size(d));
    }
  Shape out = b;
  out.insert(out.end(), rest.begin(), rest.end());
  const int64_t n = numel(b);
  Tensor y;
  if (n == 0) {
    y = zeros(out, TensorOptions(r.dtype()).device(r.device()), l);
  } else {
    auto flat = [&](size_t j) { return wrap_negative(picks[j], r.size(at[j]), l).expand(b, l).reshape({n}, l); };
    y = r.permute(perm, l).index_select(0, flat(0), l);  // [n, s_1, .., s_k-1, rest..]
    for (size_t j = 1; j < picks.size(); ++j) {
      // y is [n, s_j, ...]: pick element idx_j[i] of row i along dim 1.
      Shape picked = y.sizes(), column(static_cast<size_t>(y.dim()), 1);
      picked[1] = 1;
      column[0] = n;
      y = y.gather(1, flat(j).reshape(column, l).expand(picked, l), l).squeeze(1, l);
    }
    y = y.reshape(out, l);
  }
  bool adjacent = true;
  for (size_t j = 1; j < at.size(); ++j) adjacent = adjacent && at[j] == at[0] + int64_t(j);
  if (!adjacent || at[0] == 0 || b.empty()) return y;
  std::vector<int64_t> from(b.size()), to(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    from[i] = int64_t(i);
    to[i] = at[0] + int64_t(i);
  }
  return y.movedim(from, to, l);
}

}  // namespace

Tensor Tensor::operator[](const Tensor& index) const { return this->index({index}); }

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices, Loc l) const {
  using indexing::TensorIndex;
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    if (std::holds_alternative<int64_t>(i.what) || std::holds_alternative<indexing::Slice>(i.what))
      ++consumed;
    if (const Tensor* t = std::get_if<Tensor>(&i.what)) consumed += t->dtype() == kBool ? t->dim() : 1;
    if (std::holds_alternative<indexing::EllipsisIndex>(i.what)) ++ellipses;
  }
  if (ellipses > 1) throw Error("index: expected at most one Ellipsis", here(l));
  if (consumed > dim())
    throw Error("index: " + std::to_string(consumed) + " indices for a tensor of " +
                    std::to_string(dim()) + " dims",
                here(l));
  Tensor r = *this;
  int64_t d = 0;
  // Tensor indices are applied together at the end (advanced indexing); an
  // integer selects at once (PyTorch's order: x[0, :, idx] is [.., len(idx)]).
  std::vector<int64_t> at;
  std::vector<Tensor> picks;
  for (const TensorIndex& i : indices) {
    if (const auto* k = std::get_if<int64_t>(&i.what)) {
      r = r.select(d, *k, l);
    } else if (const auto* s = std::get_if<indexing::Slice>(&i.what)) {
      r = r.slice(d, s->start, s->stop, s->step, l);
      ++d;
    } else if (std::holds_alternative<indexing::NoneIndex>(i.what)) {
      r = r.unsqueeze(d, l);
      ++d;
    } else if (std::holds_alternative<indexing::EllipsisIndex>(i.what)) {
      d += dim() - consumed;
    } else {
      const Tensor& t = std::get<Tensor>(i.what);
      if (t.dtype() == kBool) {
        // A mask over the next t.dim() dims: the positions of its true elements.
        const Shape covered(r.sizes().begin() + d, r.sizes().begin() + d + t.dim());
        if (t.dim() == 0 || covered != t.sizes())
          throw Error("index: a bool mask of shape " + shape_str(t.sizes()) + " for dims of sizes " +
                          shape_str(covered) + " (expected the mask to match the dims it covers)",
                      here(l));
        detail::check_size_static("index", "a bool mask's number of true elements", l);
        const Tensor where_true = t.nonzero(l);
        for (int64_t j = 0; j < t.dim(); ++j) {
          at.push_back(d + j);
          picks.push_back(where_true.select(1, j, l));
        }
        d += t.dim();
      } else if (is_floating(t.dtype())) {
        throw Error(std::string("index: tensor indices must be integer or bool tensors, got ") +
                        dtype_name(t.dtype()) + " " + shape_str(t.sizes()),
                    here(l));
      } else {
        at.push_back(d);
        picks.push_back(t);
        ++d;
      }
    }
  }
  if (picks.empty()) return r;
  if (picks.size() == 1 && picks[0].dim() == 1)
    return r.index_select(at[0], wrap_negative(picks[0], r.size(at[0]), l), l);
  return advanced_index(r, at, picks, l);
}

}  // namespace kiln
