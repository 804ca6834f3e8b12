// Tensor creation: from values, filled, ranges, wrapped memory (random draws:
// random.cpp).
#include <cmath>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "runtime/allocator.h"
#include "runtime/reference.h"

namespace kiln {

using detail::here;

namespace {

// numel(shape), with the error (an overflowing shape) at the user's line.
int64_t numel_or_throw(const Shape& shape, SourceLoc loc) {
  try {
    return numel(shape);
  } catch (Error& e) {
    e.attach(loc);
    throw;
  }
}

Tensor finish(Tensor t, const TensorOptions& o, SourceLoc loc) {
  if (o.device_.type != t.device().type) t = t.to(o.device_, std::source_location::current());
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor literal(AttrValue data, Shape shape, const TensorOptions& o, SourceLoc loc) {
  check_dtype(o.dtype_, "tensor()", loc);
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&data))
    for (int64_t v : *ints)
      detail::check_fits(static_cast<long long>(v), o.dtype_, "tensor()", loc);
  else if (const auto* floats = std::get_if<std::vector<double>>(&data))
    for (double v : *floats) detail::check_fits(v, o.dtype_, "tensor()", loc);
  TensorType t{o.dtype_, std::move(shape), Device()};
  Tensor r = detail::create(OpKind::literal, {{AttrKey::data, std::move(data)}}, t, loc);
  return finish(r, o, loc);
}

}  // namespace

TensorLiteral::TensorLiteral(Scalar v)
    : values_{v},
      natural_(v.kind == ScalarKind::floating  ? DType::f32
               : v.kind == ScalarKind::integer ? DType::i64
                                               : DType::b8) {}

// The children's shapes must agree (the first one's decides); their dtypes
// join: all the same keeps it, floating with anything is float32, else int64.
TensorLiteral::TensorLiteral(std::initializer_list<TensorLiteral> list) {
  sizes_ = {static_cast<int64_t>(list.size())};
  if (list.size() == 0) return;
  const TensorLiteral& first = *list.begin();
  sizes_.insert(sizes_.end(), first.sizes_.begin(), first.sizes_.end());
  natural_ = first.natural_;
  values_.reserve(list.size() * first.values_.size());
  int64_t i = 0;
  for (const TensorLiteral& e : list) {
    if (error_.empty() && !e.error_.empty()) error_ = e.error_;
    if (error_.empty() && e.sizes_ != first.sizes_)
      error_ = "tensor(): a ragged nested list: element " + std::to_string(i) + " has shape " +
               shape_str(e.sizes_) + " but element 0 has " + shape_str(first.sizes_) +
               " (expected every sub-list of one level to have the same length)";
    if (e.natural_ != natural_)
      natural_ = is_floating(e.natural_) || is_floating(natural_) ? DType::f32 : DType::i64;
    values_.insert(values_.end(), e.values_.begin(), e.values_.end());
    ++i;
  }
}

Tensor tensor(const TensorLiteral& v, TensorOptions o, Loc l) {
  if (!v.error().empty()) throw Error(v.error(), here(l));
  if (!o.has_dtype_) o.dtype_ = v.natural_dtype();
  if (v.sizes().empty()) return scalar_tensor(v.values()[0], o, l);
  AttrValue data;
  if (is_floating(v.natural_dtype())) {
    std::vector<double> d;
    d.reserve(v.values().size());
    for (const Scalar& s : v.values()) d.push_back(s.toDouble());
    data = std::move(d);
  } else {
    std::vector<int64_t> d;
    d.reserve(v.values().size());
    for (const Scalar& s : v.values()) d.push_back(s.integer);
    data = std::move(d);
  }
  return literal(std::move(data), v.sizes(), o, here(l));
}

Tensor scalar_tensor(Scalar value, TensorOptions o, Loc l) { return full({}, value, o, l); }

Tensor from_vector(const std::vector<double>& values, Shape shape, TensorOptions o, Loc l) {
  if (numel_or_throw(shape, here(l)) != static_cast<int64_t>(values.size()))
    throw Error("from_vector(): " + std::to_string(values.size()) + " values for shape " +
                    shape_str(shape) + " (expected " + std::to_string(numel(shape)) + ")",
                here(l));
  return literal(values, std::move(shape), o, here(l));
}

Tensor from_blob(void* data, Shape shape, TensorOptions o, Loc l) {
  Strides s = contiguous_strides(shape);
  return from_blob(data, std::move(shape), std::move(s), o, l);
}

Tensor from_blob(void* data, Shape shape, Strides strides, TensorOptions o, Loc l) {
  if (!o.device_.is_cpu()) throw Error("from_blob(): only CPU memory can be wrapped", here(l));
  check_dtype(o.dtype_, "from_blob()", here(l));
  if (strides.size() != shape.size())
    throw Error("from_blob(): " + std::to_string(strides.size()) + " strides for shape " +
                    shape_str(shape),
                here(l));
  int64_t extent = 1;
  try {
    for (size_t i = 0; i < shape.size(); ++i)
      extent = checked_add(extent,
                           checked_mul(shape[i] - 1, std::abs(strides[i]), "from_blob(): extent"),
                           "from_blob(): extent");
    (void)byte_size({extent}, dtype_size(o.dtype_));
  } catch (Error& e) {
    e.attach(here(l));
    throw;
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->buffer = std::make_shared<Buffer>();
  impl->buffer->storage =
      Storage::wrap(data, static_cast<size_t>(extent) * dtype_size(o.dtype_), Device(), {});
  impl->type = TensorType{o.dtype_, std::move(shape), Device()};
  impl->strides = std::move(strides);
  Tensor t(impl);
  if (o.requires_grad_) t.requires_grad_(true, l);
  return t;
}

Tensor empty(Shape shape, TensorOptions o, Loc l) { return full(std::move(shape), 0, o, l); }
Tensor zeros(Shape shape, TensorOptions o, Loc l) { return full(std::move(shape), 0, o, l); }
Tensor ones(Shape shape, TensorOptions o, Loc l) { return full(std::move(shape), 1, o, l); }

Tensor full(Shape shape, Scalar value, TensorOptions o, Loc l) {
  check_dtype(o.dtype_, "full()", here(l));
  for (int64_t d : shape)
    if (d < 0) throw Error("negative dimension in shape " + shape_str(shape), here(l));
  detail::check_fits(value, o.dtype_, "full()", here(l));
  TensorType t{o.dtype_, std::move(shape), o.device_};
  Tensor r = detail::create(OpKind::constant, {{AttrKey::value, detail::scalar_attr(value, t.dtype)}}, t, here(l));
  if (o.requires_grad_) r.requires_grad_(true, l);
  return r;
}

Tensor zeros_like(const Tensor& t, Loc l) {
  return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device()), l);
}
Tensor ones_like(const Tensor& t, Loc l) {
  return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device()), l);
}
Tensor full_like(const Tensor& t, Scalar v, Loc l) {
  return full(t.sizes(), v, TensorOptions(t.dtype()).device(t.device()), l);
}

Tensor eye(int64_t n, TensorOptions o, Loc l) { return eye(n, n, o, l); }

Tensor eye(int64_t n, int64_t m, TensorOptions o, Loc l) {
  if (n < 0 || m < 0)
    throw Error("eye(): expected n >= 0 and m >= 0, got " + std::to_string(n) + " and " +
                    std::to_string(m),
                here(l));
  check_dtype(o.dtype_, "eye()", here(l));
  // The diagonal where two ranges agree (no n*m host data; traced, one fused kernel).
  const TensorType out{o.has_dtype_ ? o.dtype_ : DType::f32, {n, m}, o.device_};
  try {
    if (out.device.is_cpu()) check_host_bytes(static_cast<size_t>(out.bytes()), "the result " + out.str());
  } catch (Error& e) {
    e.attach(here(l), "eye");
    throw;
  }
  TensorOptions index = TensorOptions(kInt64).device(o.device_);
  Tensor r = arange(n, index, l).unsqueeze(1, l).eq(arange(m, index, l), l).to(out.dtype, l);
  if (o.requires_grad_) r.requires_grad_(true, l);
  return r;
}

Tensor arange(Scalar end, TensorOptions o, Loc l) { return arange(0, end, 1, o, l); }

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions o, Loc l) {
  if (step.value == 0) throw Error("arange(): step must be nonzero", here(l));
  check_dtype(o.dtype_, "arange()", here(l));
  const bool ints = start.kind != ScalarKind::floating && end.kind != ScalarKind::floating &&
                    step.kind != ScalarKind::floating;
  double n;
  if (ints) {
    // Exact: ceil((end - start) / step) in 128 bits (the difference may not fit in 64).
    const __int128 span = static_cast<__int128>(end.integer) - start.integer, s = step.integer;
    const __int128 q = span / s + ((span % s != 0) && ((span > 0) == (s > 0)) ? 1 : 0);
    n = q < 0 ? 0.0 : static_cast<double>(q);
  } else {
    n = std::max(0.0, std::ceil((end.value - start.value) / step.value));
  }
  if (!(n < 0x1p62))
    throw Error(
        "arange(): " + std::to_string(n) + " elements is too many (expected fewer than 2^62)",
        here(l));
  if (ints && !o.has_dtype_) o.dtype_ = DType::i64;
  TensorType t{o.dtype_, {static_cast<int64_t>(n)}, Device()};
  const Attrs range = ints && !is_floating(t.dtype)
                          ? Attrs{{AttrKey::start, start.integer}, {AttrKey::step, step.integer}}
                          : Attrs{{AttrKey::start, start.value}, {AttrKey::step, step.value}};
  Tensor r = detail::create(OpKind::arange, range, t, here(l));
  return finish(r, o, here(l));
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions o, Loc l) {
  if (steps < 0) throw Error("linspace(): number of steps must be non-negative", here(l));
  check_dtype(o.dtype_, "linspace()", here(l));
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  TensorType t{o.dtype_, {steps}, Device()};
  Tensor r = detail::create(OpKind::arange, {{AttrKey::start, start}, {AttrKey::step, step}}, t, here(l));
  return finish(r, o, here(l));
}

Tensor logspace(double start, double end, int64_t steps, double base, TensorOptions o, Loc l) {
  if (steps < 0) throw Error("logspace(): number of steps must be non-negative", here(l));
  check_dtype(o.dtype_, "logspace()", here(l));
  // The powers in float64, then rounded once to the result's dtype.
  const TensorOptions f64 = TensorOptions(kFloat64);
  Tensor r = full({steps}, base, f64, l)
                 .pow(linspace(start, end, steps, f64, l), l)
                 .to(o.has_dtype_ ? o.dtype_ : DType::f32, l);
  return finish(r, o, here(l));
}

}  // namespace kiln
