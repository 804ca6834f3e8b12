// Selections whose result's size the data decides: masked_select, nonzero,
// bincount and repeat_interleave with a tensor of repeats. Each reads the data
// on the host to build the indices, then picks with index_select or sums with
// index_add, so gradients flow as through those. Eager only: inside a trace
// each is an error naming the line (detail::check_size_static), as unique.
#include <algorithm>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor.h"

namespace kiln {

using detail::here;

namespace {

Tensor int64_on(const Tensor& like, std::vector<double> values, Shape shape, Loc l) {
  return from_vector(values, std::move(shape), TensorOptions(kInt64).device(like.device()), l);
}

/// The values of a non-negative integer count or index tensor, on the host.
std::vector<int64_t> counts_of(const Tensor& t, const char* op, const char* name, Loc l) {
  if (is_floating(t.dtype()) || t.dtype() == kBool)
    throw Error(std::string(op) + ": expected " + name + " of an integer dtype, got " + dtype_name(t.dtype()),
                here(l));
  std::vector<int64_t> v = t.to_vector<int64_t>(l);
  for (int64_t c : v)
    if (c < 0)
      throw Error(std::string(op) + ": expected non-negative " + name + ", got " + std::to_string(c), here(l));
  return v;
}

}  // namespace

Tensor Tensor::masked_select(const Tensor& mask, Loc l) const {
  detail::check_size_static("masked_select", "the number of true elements of the mask", l);
  if (mask.dtype() != kBool)
    throw Error(std::string("masked_select: expected a bool mask, got ") + dtype_name(mask.dtype()), here(l));
  const Shape shape = broadcast_shapes(sizes(), mask.sizes());
  const std::vector<bool> m = mask.expand(shape, l).to_vector<bool>(l);
  std::vector<double> at;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i]) at.push_back(double(i));
  const int64_t n = static_cast<int64_t>(at.size());
  return expand(shape, l).reshape({-1}, l).index_select(0, int64_on(*this, std::move(at), {n}, l), l);
}

Tensor Tensor::nonzero(Loc l) const {
  detail::check_size_static("nonzero", "the number of non-zero elements", l);
  const std::vector<double> v = to_vector<double>(l);
  const Shape& s = sizes();
  std::vector<double> rows;
  int64_t n = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;  // NaN is non-zero, as in PyTorch
    ++n;
    const size_t at = rows.size();
    rows.resize(at + s.size());
    int64_t rest = static_cast<int64_t>(i);
    for (size_t d = s.size(); d-- > 0;) {
      rows[at + d] = double(rest % s[d]);
      rest /= s[d];
    }
  }
  return int64_on(*this, std::move(rows), {n, dim()}, l);
}

Tensor Tensor::bincount(const Tensor& weights, int64_t minlength, Loc l) const {
  detail::check_size_static("bincount", "the largest value", l);
  if (dim() != 1) throw Error("bincount: expected a 1-D tensor, got shape " + shape_str(sizes()), here(l));
  if (minlength < 0) throw Error("bincount: expected minlength >= 0, got " + std::to_string(minlength), here(l));
  if (weights.defined() && weights.sizes() != sizes())
    throw Error("bincount: expected weights of the input's shape " + shape_str(sizes()) + ", got " +
                    shape_str(weights.sizes()),
                here(l));
  const std::vector<int64_t> v = counts_of(*this, "bincount", "values", l);
  int64_t bins = minlength;
  for (int64_t x : v) bins = std::max(bins, x + 1);
  const Tensor index = to(kInt64, l);
  if (!weights.defined())
    return zeros({bins}, TensorOptions(kInt64).device(device()), l)
        .index_add(0, index, ones({size(0)}, TensorOptions(kInt64).device(device()), l), 1, l);
  // float weights sum in float, any other in double (PyTorch's rule).
  const DType dt = weights.dtype() == kFloat32 ? kFloat32 : kFloat64;
  return zeros({bins}, TensorOptions(dt).device(device()), l).index_add(0, index, weights.to(dt, l), 1, l);
}

Tensor Tensor::repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim_, Loc l) const {
  detail::check_size_static("repeat_interleave", "a tensor of repeats", l);
  const Tensor x = dim_ ? *this : reshape({-1}, l);
  const int64_t d = dim_ ? detail::checked_dim(*dim_, dim(), "repeat_interleave", l) : 0;
  if (repeats.dim() > 1)
    throw Error("repeat_interleave: expected repeats of at most one dim, got shape " + shape_str(repeats.sizes()),
                here(l));
  std::vector<int64_t> r = counts_of(repeats, "repeat_interleave", "repeats", l);
  if (r.size() == 1) r.assign(static_cast<size_t>(x.size(d)), r[0]);
  if (static_cast<int64_t>(r.size()) != x.size(d))
    throw Error("repeat_interleave: " + std::to_string(r.size()) + " repeats for a dim of size " +
                    std::to_string(x.size(d)),
                here(l));
  std::vector<double> at;
  for (size_t i = 0; i < r.size(); ++i) at.insert(at.end(), static_cast<size_t>(r[i]), double(i));
  const int64_t n = static_cast<int64_t>(at.size());
  return x.index_select(d, int64_on(*this, std::move(at), {n}, l), l);
}

Tensor repeat_interleave(const Tensor& repeats, Loc l) {
  if (repeats.dim() != 1)
    throw Error("repeat_interleave: expected 1-D repeats, got shape " + shape_str(repeats.sizes()), here(l));
  return arange(repeats.size(0), TensorOptions(kInt64).device(repeats.device()), l).repeat_interleave(repeats, 0, l);
}

Tensor masked_select(const Tensor& x, const Tensor& mask, Loc l) { return x.masked_select(mask, l); }
Tensor nonzero(const Tensor& x, Loc l) { return x.nonzero(l); }
Tensor argwhere(const Tensor& x, Loc l) { return x.nonzero(l); }
Tensor bincount(const Tensor& x, const Tensor& w, int64_t minlength, Loc l) { return x.bincount(w, minlength, l); }

}  // namespace kiln
