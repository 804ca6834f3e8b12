// Joining, splitting and indexing, built from table ops so that autodiff,
// tracing and fusion see ordinary nodes:
//   cat        each piece padded with zeros to the result's extent, then summed
//              (pad's gradient is a slice; traced, the sum fuses into one kernel)
//   chunk, split  slices (views)
//   tril, triu where(column - row compared with k, x, 0)
//   index_select, embedding  a one-hot [K, n] matrix times the rows (a matmul)
//   gather, scatter_add      a one-hot comparison reduced over the indexed dim
// Integer indices are range-checked: eagerly at once, traced by a check_index
// node that the compiled plan runs at every call (a clear error, never a read
// out of bounds).
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

namespace {

// Moves dim d to the end (and back): permutations for gather and scatter_add.
std::vector<int64_t> to_last(int64_t d, int64_t rank) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < rank; ++i)
    if (i != d) p.push_back(i);
  p.push_back(d);
  return p;
}
std::vector<int64_t> from_last(int64_t d, int64_t rank) {
  std::vector<int64_t> p, inv(size_t(rank), 0);
  p = to_last(d, rank);
  for (int64_t i = 0; i < rank; ++i) inv[size_t(p[size_t(i)])] = i;
  return inv;
}

// [..., K] indices -> [..., K, n] bool, true where the index equals the column.
Tensor one_hot_bool(const Tensor& idx, int64_t n, Loc l) {
  return idx.unsqueeze(-1, l).eq(arange(n, TensorOptions(idx.dtype()).device(idx.device()), l), l);
}

}  // namespace

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

Tensor checked_indices(const Tensor& indices, int64_t n, const char* op, Loc loc) {
  if (is_floating(indices.dtype()) || indices.dtype() == DType::b8)
    throw Error(
        std::string(op) + ": expected integer class indices, got " + dtype_name(indices.dtype()),
        SourceLoc::from(loc));
  return checked_values(OpKind::check_index, indices, {{AttrKey::high, n}, {AttrKey::name, std::string(op)}},
                        loc);
}

// One-hot rows of indices already checked to lie in [0, n).
}  // namespace detail

// ---- joining ----

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim, Loc l) {
  const SourceLoc loc = here(l);
  if (tensors.empty()) throw Error("cat: expected a non-empty list of tensors", loc);
  const Tensor& first = tensors[0];
  const int64_t d = checked_dim(dim, std::max<int64_t>(first.dim(), 1), "cat", l);
  if (first.dim() == 0) throw Error("cat: zero-dimensional tensors cannot be concatenated", loc);
  DType dt = first.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool same = t.dim() == first.dim();
    for (int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.size(k) == first.size(k);
    if (!same)
      throw Error("cat: expected every tensor to match " + shape_str(first.sizes()) +
                      " except in dim " + std::to_string(d) + ", got " + shape_str(t.sizes()) +
                      " for tensor " + std::to_string(i),
                  loc);
    if (t.device() != first.device())
      throw Error("cat: tensors on " + first.device().str() + " and " + t.device().str() +
                      " (expected one device)",
                  loc);
    dt = promote_types(dt, t.dtype());
    if (t.size(d) > std::numeric_limits<int64_t>::max() - total)
      throw Error("cat: the sizes of dim " + std::to_string(d) + " add up to more than 2^63-1 (tensor " +
                      std::to_string(i) + " of shape " + shape_str(t.sizes()) + " after " +
                      std::to_string(total) + "; expected a result that fits in 64 bits)",
                  loc);
    total += t.size(d);
  }
  if (tensors.size() == 1) return first.to(dt, l).clone(l);
  Tensor out;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const int64_t n = t.size(d);
    const Attrs pad{{AttrKey::dim, d},
                    {AttrKey::low, offset},
                    {AttrKey::high, total - offset - n},
                    {AttrKey::interior, int64_t(0)}};
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
                      ", got " + shape_str(tensors[i].sizes()) + " for tensor " +
                      std::to_string(i),
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
  for (int64_t at = 0; at < size(d); at += split_size) sizes.push_back(std::min(split_size, size(d) - at));
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
    throw Error(std::string(lower ? "tril" : "triu") + ": expected a tensor of at least 2 dims, got " +
                    shape_str(x.sizes()),
                here(l));
  TensorOptions o = TensorOptions(kInt64).device(x.device());
  Tensor row = arange(x.size(-2), o, l).unsqueeze(1, l);
  Tensor col = arange(x.size(-1), o, l);
  Tensor diff = col.sub(row, 1, l);  // [n, m]: column - row
  Tensor keep = lower ? diff.le(Scalar(k), l) : diff.ge(Scalar(k), l);
  return where(keep, x, zeros({}, TensorOptions(x.dtype()).device(x.device()), l), l);
}
}  // namespace

Tensor Tensor::tril(int64_t diagonal, Loc l) const { return triangle(*this, diagonal, true, l); }
Tensor Tensor::triu(int64_t diagonal, Loc l) const { return triangle(*this, diagonal, false, l); }
Tensor tril(const Tensor& x, int64_t diagonal, Loc l) { return x.tril(diagonal, l); }
Tensor triu(const Tensor& x, int64_t diagonal, Loc l) { return x.triu(diagonal, l); }

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
  const int64_t n = this->dim() == 0 ? 1 : size(d);
  Tensor idx = detail::checked_indices(index, n, "index_select", l);
  if (this->dim() == 0) return reshape({1}, l).index_select(0, idx, l).reshape({index.size(0)}, l);
  // Rows [n, rest] with dim d first; one-hot [K, n] times them.
  Tensor front = transpose(0, d, l);
  Shape moved = front.sizes();
  int64_t rest = 1;
  for (size_t k = 1; k < moved.size(); ++k) rest *= moved[k];
  Tensor rows = front.reshape({n, rest}, l);
  Tensor hot = one_hot_bool(idx, n, l);
  Tensor picked = is_floating(dtype())
                      ? hot.to(dtype(), l).matmul(rows, l)
                      : where(hot.unsqueeze(-1, l), rows.unsqueeze(0, l),
                              zeros({}, TensorOptions(dtype()).device(device()), l), l)
                            .sum(1, false, l)
                            .to(dtype(), l);
  moved[0] = index.size(0);
  return picked.reshape(moved, l).transpose(0, d, l);
}

Tensor Tensor::gather(int64_t dim, const Tensor& index, Loc l) const {
  const SourceLoc loc = here(l);
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "gather", l);
  if (index.dim() != this->dim())
    throw Error("gather: expected indices with as many dims as the input (" +
                    std::to_string(this->dim()) + "), got " + shape_str(index.sizes()),
                loc);
  Tensor src = *this;
  for (int64_t k = 0; k < this->dim(); ++k) {
    if (k != d && index.size(k) > size(k))
      throw Error("gather: indices of shape " + shape_str(index.sizes()) +
                      " are larger than the input " + shape_str(sizes()) + " in dim " +
                      std::to_string(k),
                  loc);
    if (k != d && index.size(k) < size(k)) src = src.narrow(k, 0, index.size(k), l);
  }
  if (this->dim() == 0) return clone(l);
  const int64_t n = size(d);
  Tensor idx = detail::checked_indices(index, n, "gather", l);
  const int64_t r = this->dim();
  Tensor xm = src.permute(to_last(d, r), l).unsqueeze(-2, l);  // [..., 1, n]
  Tensor hot = one_hot_bool(idx.permute(to_last(d, r), l), n, l);  // [..., K, n]
  Tensor zero = zeros({}, TensorOptions(dtype()).device(device()), l);
  Tensor picked = where(hot, xm, zero, l).sum(-1, false, l).to(dtype(), l);  // [..., K]
  return picked.permute(from_last(d, r), l);
}

Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src, Loc l) const {
  const SourceLoc loc = here(l);
  const int64_t d = checked_dim(dim, std::max<int64_t>(this->dim(), 1), "scatter_add", l);
  if (index.sizes() != src.sizes())
    throw Error("scatter_add: expected indices and source of one shape, got " +
                    shape_str(index.sizes()) + " and " + shape_str(src.sizes()),
                loc);
  for (int64_t k = 0; k < this->dim(); ++k)
    if (index.dim() != this->dim() || (k != d && index.size(k) != size(k)))
      throw Error("scatter_add: expected indices of shape " + shape_str(sizes()) +
                      " except in dim " + std::to_string(d) + ", got " + shape_str(index.sizes()),
                  loc);
  if (this->dim() == 0) return add(src, 1, l);
  const int64_t n = size(d), r = this->dim();
  Tensor idx = detail::checked_indices(index, n, "scatter_add", l);
  Tensor hot = one_hot_bool(idx.permute(to_last(d, r), l), n, l);  // [..., K, n]
  Tensor vals = src.to(dtype(), l).permute(to_last(d, r), l).unsqueeze(-1, l);  // [..., K, 1]
  Tensor zero = zeros({}, TensorOptions(dtype()).device(device()), l);
  Tensor added = where(hot, vals, zero, l).sum(-2, false, l).to(dtype(), l);  // [..., n]
  return add(added.permute(from_last(d, r), l), 1, l);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Loc l) {
  return x.index_select(dim, index, l);
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Loc l) {
  return x.gather(dim, index, l);
}

// ---- x.index({...}) ----

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices, Loc l) const {
  using indexing::TensorIndex;
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    if (std::holds_alternative<int64_t>(i.what) || std::holds_alternative<indexing::Slice>(i.what) ||
        std::holds_alternative<Tensor>(i.what))
      ++consumed;
    if (std::holds_alternative<indexing::EllipsisIndex>(i.what)) ++ellipses;
  }
  if (ellipses > 1) throw Error("index: expected at most one Ellipsis", here(l));
  if (consumed > dim())
    throw Error("index: " + std::to_string(consumed) + " indices for a tensor of " +
                    std::to_string(dim()) + " dims",
                here(l));
  Tensor r = *this;
  int64_t d = 0;
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
      if (t.dtype() == DType::b8 || t.dim() != 1)
        throw Error("index: tensor indices must be 1-D integer tensors, got " +
                        std::string(dtype_name(t.dtype())) + " " + shape_str(t.sizes()),
                    here(l));
      r = r.index_select(d, t, l);
      ++d;
    }
  }
  return r;
}

}  // namespace kiln
