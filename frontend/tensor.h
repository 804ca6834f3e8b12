// Tensor: the user-facing n-d array, named after libtorch's C++ frontend.
// A Tensor is a cheap handle to shared state (TensorImpl). Eagerly it holds
// data on a device; inside a trace it is symbolic and holds a graph value.
// Every op records the user's source line for errors, dumps and the IR.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <type_traits>
#include <vector>

#include "frontend/generator.h"
#include "frontend/loc.h"
#include "ir/device.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/shape.h"

namespace kiln {

struct TensorImpl;
class Tensor;
namespace indexing {
struct TensorIndex;
}

/// A plain number used as an operand (x * 2, x + 0.5). Its category matters
/// for promotion, as with Python scalars in PyTorch.
struct Scalar {
  double value = 0;
  ScalarKind kind = ScalarKind::floating;
  /// The exact value of an integer or bool scalar (`value` rounds past 2^53):
  /// integer tensors compute with this one.
  int64_t integer = 0;
  Scalar(double v) : value(v), kind(ScalarKind::floating) {}
  Scalar(float v) : value(v), kind(ScalarKind::floating) {}
  Scalar(int v) : value(v), kind(ScalarKind::integer), integer(v) {}
  Scalar(long v) : value(static_cast<double>(v)), kind(ScalarKind::integer), integer(v) {}
  Scalar(long long v) : value(static_cast<double>(v)), kind(ScalarKind::integer), integer(v) {}
  Scalar(bool v) : value(v), kind(ScalarKind::boolean), integer(v) {}
  // The other integer types (libtorch takes them all; size_t counts included).
  Scalar(signed char v) : Scalar(static_cast<long long>(v)) {}
  Scalar(unsigned char v) : Scalar(static_cast<long long>(v)) {}
  Scalar(short v) : Scalar(static_cast<long long>(v)) {}
  Scalar(unsigned short v) : Scalar(static_cast<long long>(v)) {}
  Scalar(unsigned v) : Scalar(static_cast<long long>(v)) {}
  Scalar(unsigned long v) : Scalar(static_cast<long long>(v)) {}
  Scalar(unsigned long long v) : Scalar(static_cast<long long>(v)) {}

  // ---- libtorch's accessors (c10::Scalar) ----
  double toDouble() const {
    return kind == ScalarKind::floating ? value : static_cast<double>(integer);
  }
  float toFloat() const { return static_cast<float>(toDouble()); }
  int64_t toLong() const {
    return kind == ScalarKind::floating ? static_cast<int64_t>(value) : integer;
  }
  int toInt() const { return static_cast<int>(toLong()); }
  bool toBool() const { return kind == ScalarKind::floating ? value != 0 : integer != 0; }
  /// The value as T (bool, an integer type or a floating type).
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return toBool();
    else if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(toDouble());
    else
      return static_cast<T>(toLong());
  }
  bool isFloatingPoint() const { return kind == ScalarKind::floating; }
  bool isIntegral(bool include_bool) const {
    return kind == ScalarKind::integer || (include_bool && kind == ScalarKind::boolean);
  }
  bool isBoolean() const { return kind == ScalarKind::boolean; }
};
/// Prints the value as a number (an integer exactly), or true/false.
std::ostream& operator<<(std::ostream& os, const Scalar& s);
/// Prints a dtype as libtorch prints x.dtype(): "float", "double", "int",
/// "long int", "bool".
std::ostream& operator<<(std::ostream& os, DType t);

/// Memory layouts: Kiln's tensors are strided (dense, with strides).
enum class Layout : uint8_t { Strided };
inline constexpr Layout kStrided = Layout::Strided;

/// Options for creating tensors: dtype, device, requires_grad (libtorch style).
struct TensorOptions {
  DType dtype_ = DType::f32;
  Device device_;
  bool requires_grad_ = false;
  bool has_dtype_ = false;  // a dtype was asked for (else creation picks the natural one)

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}
  TensorOptions(DeviceType d) : device_(d) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; o.has_dtype_ = true; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions device(DeviceType t, int index) const { return device(Device(t, index)); }
  /// The layout: strided, the only one Kiln has.
  TensorOptions layout(Layout) const { return *this; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
  /// libtorch's getters: the dtype asked for (float32 when none was), the device.
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool has_dtype() const { return has_dtype_; }
};

/// A Tensor argument that remembers the user's source line; lets binary
/// operators (which cannot take extra parameters) report where they were used.
struct TensorAt {
  const Tensor& t;
  Loc loc;
  TensorAt(const Tensor& t, Loc loc = Loc::current()) : t(t), loc(loc) {}
};

/// A number operand with the caller's source line, for operators that cannot
/// take a defaulted location (x *= 2).
struct ScalarAt {
  Scalar s;
  Loc loc;
  template <class T,
            std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, Scalar>, int> = 0>
  ScalarAt(T v, Loc loc = Loc::current()) : s(v), loc(loc) {}
};

/// An index with the caller's source line, for x[i].
struct IndexAt {
  int64_t index;
  Loc loc;
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  IndexAt(T i, Loc loc = Loc::current()) : index(static_cast<int64_t>(i)), loc(loc) {}
};

/// Dims, sizes or repeats where libtorch takes an IntArrayRef: one integer
/// (x.nansum(1)), a braced list ({0, 2}) or a vector (x.sizes()). A vector of
/// int64 itself, so code that reads dims reads it as one.
struct Dims : std::vector<int64_t> {
  Dims() = default;
  Dims(int64_t d) : std::vector<int64_t>{d} {}                          // NOLINT: implicit
  Dims(std::initializer_list<int64_t> d) : std::vector<int64_t>(d) {}   // NOLINT: implicit
  Dims(std::vector<int64_t> d) : std::vector<int64_t>(std::move(d)) {}  // NOLINT: implicit
};

template <class T, size_t N>
class TensorAccessor;
/// The op that computed a tensor, for autograd (libtorch's x.grad_fn()->name()).
struct GradFn {
  std::string name_;
  const std::string& name() const { return name_; }
};

class Tensor {
 public:
  /// An undefined tensor (like a default-constructed torch::Tensor).
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  ~Tensor() = default;
  /// Assigning to a named tensor rebinds the handle (torch::Tensor's rule).
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  /// Assigning to a temporary writes into its storage, as libtorch does:
  /// `x[0] = y`, `p.grad().data() = g` copy y (broadcast, converted) in place.
  Tensor& operator=(const Tensor& src) && { return copy_(src); }
  Tensor& operator=(Tensor&& src) && { return copy_(src); }
  Tensor& operator=(Scalar value) && { return fill_(value); }

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- metadata ----
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  int64_t size(int64_t dim) const;
  const Strides& strides() const;
  /// The stride of one dim (negative dims count from the end).
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  bool is_cuda() const { return device().is_cuda(); }
  bool is_contiguous() const;
  /// True inside a trace: the tensor holds a graph value, not data.
  bool is_symbolic() const;

  // ---- data access ----
  /// The single element as T; an error for tensors of more than one element
  /// and inside a trace.
  template <class T>
  T item(KILN_LOC) const;
  /// Pointer to element 0 (CPU, eager only; dtype must match T). Inside a trace,
  /// an error naming the line.
  template <class T>
  T* data_ptr(KILN_LOC) const;
  /// Copies the elements out in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector(KILN_LOC) const;

  // ---- conversion ----
  Tensor to(DType t, KILN_LOC) const;
  Tensor to(Device d, KILN_LOC) const;
  Tensor to(DeviceType d, KILN_LOC) const { return to(Device(d), loc); }
  /// To the options' device and, when one was asked for, dtype (libtorch's to(options)).
  Tensor to(const TensorOptions& options, KILN_LOC) const {
    Tensor t = to(options.device_, loc);
    return options.has_dtype_ ? t.to(options.dtype_, loc) : t;
  }
  Tensor to(Device d, DType t, KILN_LOC) const { return to(d, loc).to(t, loc); }
  Tensor cpu(KILN_LOC) const { return to(Device(kCPU), loc); }
  Tensor cuda(KILN_LOC) const { return to(Device(kCUDA), loc); }
  Tensor clone(KILN_LOC) const;
  Tensor contiguous(KILN_LOC) const;

  // ---- views and movement ----
  Tensor reshape(Shape shape, KILN_LOC) const;
  Tensor view(Shape shape, KILN_LOC) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1, KILN_LOC) const;
  Tensor squeeze(KILN_LOC) const;
  Tensor squeeze(int64_t dim, KILN_LOC) const;
  Tensor unsqueeze(int64_t dim, KILN_LOC) const;
  Tensor transpose(int64_t dim0, int64_t dim1, KILN_LOC) const;
  Tensor t(KILN_LOC) const;
  Tensor permute(Dims dims, KILN_LOC) const;
  Tensor expand(Shape shape, KILN_LOC) const;
  Tensor expand_as(const Tensor& other, KILN_LOC) const;
  /// Elements start, start + step, ... before end along dim; a missing start or end
  /// is the dim's beginning or end (x.slice(0, n): from n on, as libtorch's).
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1, KILN_LOC) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length, KILN_LOC) const;
  Tensor select(int64_t dim, int64_t index, KILN_LOC) const;
  Tensor operator[](IndexAt i) const { return select(0, i.index, i.loc); }
  /// x[index] with an integer or bool tensor: index({index}).
  Tensor operator[](const Tensor& index) const;
  /// Basic indexing, x.index({Slice(1, None), 0, None, Ellipsis}) (libtorch's
  /// spelling; see kiln::indexing): integers select, slices keep the dim, None
  /// inserts a dim, Ellipsis stands for the dims not named, a 1-D integer
  /// tensor picks along its dim (index_select).
  Tensor index(const std::vector<indexing::TensorIndex>& indices, KILN_LOC) const;
  /// Pieces along `dim`: chunks of ceil(n / chunks); pieces of split_size (the
  /// last may be smaller); or pieces of the given sizes. Views.
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0, KILN_LOC) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0, KILN_LOC) const;
  std::vector<Tensor> split(std::vector<int64_t> sizes, int64_t dim = 0, KILN_LOC) const;
  /// The lower (upper) triangle of the last two dims: elements with
  /// column - row <= diagonal (>= diagonal) kept, the rest zero.
  Tensor tril(int64_t diagonal = 0, KILN_LOC) const;
  Tensor triu(int64_t diagonal = 0, KILN_LOC) const;
  /// `value` where the (broadcast) bool mask is true, else this tensor's element.
  Tensor masked_fill(const Tensor& mask, Scalar value, KILN_LOC) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value, KILN_LOC) const;
  /// Rows `index` (1-D integers, range-checked) along `dim`.
  Tensor index_select(int64_t dim, const Tensor& index, KILN_LOC) const;
  /// out[i][j] = x[i][index[i][j]] for dim 1 (torch.gather); index has this rank.
  Tensor gather(int64_t dim, const Tensor& index, KILN_LOC) const;
  /// A copy with src[i][j] added at [i][index[i][j]] for dim 1 (torch.scatter_add);
  /// index and src have this tensor's shape except in `dim`.
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src, KILN_LOC) const;
  /// A copy with src[i][j] written at [i][index[i][j]] for dim 1 (torch.scatter;
  /// shapes as scatter_add's), or `value` written there. A place that several
  /// indices name gets the mean of their values (PyTorch: one of them,
  /// undefined which), so equal values, as in a one-hot, stay exact.
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src, KILN_LOC) const;
  Tensor scatter(int64_t dim, const Tensor& index, Scalar value, KILN_LOC) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src, KILN_LOC);
  Tensor& scatter_(int64_t dim, const Tensor& index, Scalar value, KILN_LOC);
  /// A copy with alpha * source's slice k added at index[k] along dim
  /// (torch.index_add): source is this shape with dim of index's length.
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1,
                   KILN_LOC) const;
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1, KILN_LOC);
  /// x[i0, i1, ...] += values (accumulate) or x[i0, i1, ...] = values: integer
  /// tensors for the leading dims, broadcast together (bool masks stand for
  /// their true positions, eagerly); a place named twice gets the mean of its
  /// values when assigned (PyTorch: one of them, undefined which).
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate, KILN_LOC);

  // ---- elementwise ----
  Tensor neg(KILN_LOC) const;
  Tensor abs(KILN_LOC) const;
  Tensor sign(KILN_LOC) const;
  Tensor exp(KILN_LOC) const;
  Tensor log(KILN_LOC) const;
  Tensor sqrt(KILN_LOC) const;
  Tensor rsqrt(KILN_LOC) const;
  Tensor sin(KILN_LOC) const;
  Tensor cos(KILN_LOC) const;
  Tensor tanh(KILN_LOC) const;
  Tensor sigmoid(KILN_LOC) const;
  Tensor relu(KILN_LOC) const;
  Tensor gelu(KILN_LOC) const;
  Tensor erf(KILN_LOC) const;
  Tensor log1p(KILN_LOC) const;
  Tensor log2(KILN_LOC) const;
  Tensor log10(KILN_LOC) const;
  Tensor expm1(KILN_LOC) const;
  /// Rounding (round: half to even); integer tensors come back unchanged.
  Tensor floor(KILN_LOC) const;
  Tensor ceil(KILN_LOC) const;
  Tensor round(KILN_LOC) const;
  Tensor trunc(KILN_LOC) const;
  Tensor reciprocal(KILN_LOC) const;
  Tensor square(KILN_LOC) const;
  /// a - trunc(a / b) * b (sign of a), and a - floor(a / b) * b (sign of b).
  Tensor fmod(const Tensor& other, KILN_LOC) const;
  Tensor fmod(Scalar other, KILN_LOC) const;
  Tensor remainder(const Tensor& other, KILN_LOC) const;
  Tensor remainder(Scalar other, KILN_LOC) const;
  Tensor isnan(KILN_LOC) const;
  Tensor isinf(KILN_LOC) const;
  Tensor isfinite(KILN_LOC) const;
  Tensor logical_not(KILN_LOC) const;
  Tensor logical_and(const Tensor& other, KILN_LOC) const;
  Tensor logical_or(const Tensor& other, KILN_LOC) const;
  Tensor pow(const Tensor& exponent, KILN_LOC) const;
  Tensor pow(Scalar exponent, KILN_LOC) const;
  Tensor maximum(const Tensor& other, KILN_LOC) const;
  Tensor minimum(const Tensor& other, KILN_LOC) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max, KILN_LOC) const;
  Tensor clamp_min(Scalar min, KILN_LOC) const { return clamp(min, std::nullopt, loc); }
  Tensor clamp_max(Scalar max, KILN_LOC) const { return clamp(std::nullopt, max, loc); }
  Tensor add(const Tensor& other, Scalar alpha = 1, KILN_LOC) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1, KILN_LOC) const;
  Tensor mul(const Tensor& other, KILN_LOC) const;
  Tensor div(const Tensor& other, KILN_LOC) const;
  Tensor add(Scalar other, KILN_LOC) const;
  Tensor sub(Scalar other, KILN_LOC) const;
  Tensor mul(Scalar other, KILN_LOC) const;
  Tensor div(Scalar other, KILN_LOC) const;
  Tensor eq(const Tensor& other, KILN_LOC) const;
  Tensor ne(const Tensor& other, KILN_LOC) const;
  Tensor lt(const Tensor& other, KILN_LOC) const;
  Tensor le(const Tensor& other, KILN_LOC) const;
  Tensor gt(const Tensor& other, KILN_LOC) const;
  Tensor ge(const Tensor& other, KILN_LOC) const;
  Tensor eq(Scalar other, KILN_LOC) const;
  Tensor ne(Scalar other, KILN_LOC) const;
  Tensor lt(Scalar other, KILN_LOC) const;
  Tensor le(Scalar other, KILN_LOC) const;
  Tensor gt(Scalar other, KILN_LOC) const;
  Tensor ge(Scalar other, KILN_LOC) const;

  // ---- reductions ----
  Tensor sum(KILN_LOC) const;
  Tensor sum(std::vector<int64_t> dims, bool keepdim = false, KILN_LOC) const;
  Tensor sum(int64_t dim, bool keepdim = false, KILN_LOC) const;
  Tensor mean(KILN_LOC) const;
  Tensor mean(std::vector<int64_t> dims, bool keepdim = false, KILN_LOC) const;
  Tensor mean(int64_t dim, bool keepdim = false, KILN_LOC) const;
  /// Largest element (all dims).
  Tensor max(KILN_LOC) const;
  /// Largest elements along `dim` and their indices (torch.max(x, dim)).
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false, KILN_LOC) const;
  Tensor min(KILN_LOC) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false, KILN_LOC) const;
  Tensor amax(Dims dims = {}, bool keepdim = false, KILN_LOC) const;
  Tensor amin(Dims dims = {}, bool keepdim = false, KILN_LOC) const;
  Tensor argmax(KILN_LOC) const;
  Tensor argmax(int64_t dim, bool keepdim = false, KILN_LOC) const;
  Tensor argmin(KILN_LOC) const;
  Tensor argmin(int64_t dim, bool keepdim = false, KILN_LOC) const;
  /// Variance with Bessel's correction by default (unbiased, like torch.var).
  Tensor var(KILN_LOC) const;
  Tensor var(std::vector<int64_t> dims, bool unbiased = true, bool keepdim = false, KILN_LOC) const;
  Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false, KILN_LOC) const;
  Tensor std(KILN_LOC) const;
  Tensor std(std::vector<int64_t> dims, bool unbiased = true, bool keepdim = false, KILN_LOC) const;
  Tensor std(int64_t dim, bool unbiased = true, bool keepdim = false, KILN_LOC) const;
  /// Whether every (some) element is non-zero, as a bool tensor; all of an empty tensor is true.
  Tensor all(KILN_LOC) const;
  Tensor all(int64_t dim, bool keepdim = false, KILN_LOC) const;
  Tensor any(KILN_LOC) const;
  Tensor any(int64_t dim, bool keepdim = false, KILN_LOC) const;
  /// log(sum(exp(x))) over dims, computed stably (shifted by the maximum).
  Tensor logsumexp(std::vector<int64_t> dims, bool keepdim = false, KILN_LOC) const;
  Tensor logsumexp(int64_t dim, bool keepdim = false, KILN_LOC) const;
  /// The p-norm over dims (all dims when empty); p may be 0, 1, 2, +-inf or any other number.
  Tensor norm(double p = 2, KILN_LOC) const;
  Tensor norm(double p, std::vector<int64_t> dims, bool keepdim = false, KILN_LOC) const;
  /// Inclusive prefix sums along dim (integers: int64).
  Tensor cumsum(int64_t dim, KILN_LOC) const;
  /// Running product along dim (integers and bools in int64), O(n).
  Tensor cumprod(int64_t dim, KILN_LOC) const;
  /// log(cumsum(exp(x))) along dim, without overflow (a running logaddexp).
  Tensor logcumsumexp(int64_t dim, KILN_LOC) const;
  /// The running maximum (minimum) along dim and the int64 index where each
  /// came from (the last of equal values, a NaN once seen, as torch.cummax).
  /// The values' gradient goes to the elements they came from.
  std::tuple<Tensor, Tensor> cummax(int64_t dim, KILN_LOC) const;
  std::tuple<Tensor, Tensor> cummin(int64_t dim, KILN_LOC) const;
  /// log(exp(x) + exp(other)), without overflow.
  Tensor logaddexp(const Tensor& other, KILN_LOC) const;
  /// The angle of the point (other, x) in [-pi, pi] (torch.atan2: x is y).
  Tensor atan2(const Tensor& other, KILN_LOC) const;
  /// sqrt(x^2 + other^2) without overflow on the way.
  Tensor hypot(const Tensor& other, KILN_LOC) const;
  /// Product of all elements, or along `dim` (1 for an empty dim); bools and
  /// integers multiply in int64, as in PyTorch. Exact multiplications (a pairwise
  /// tree), with a gradient that is right at zeros.
  Tensor prod(KILN_LOC) const;
  Tensor prod(int64_t dim, bool keepdim = false, KILN_LOC) const;
  Tensor softmax(int64_t dim, KILN_LOC) const;
  Tensor log_softmax(int64_t dim, KILN_LOC) const;

  // ---- sorting (frontend/sort_ops.cpp) ----
  /// The elements along `dim` in ascending (descending) order, and the int64
  /// positions they came from. Stable: ties keep their order; NaN sorts as the
  /// largest value. The values' gradient goes to the elements they came from.
  /// O(n) per row (a radix sort), eagerly and traced.
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false, KILN_LOC) const;
  /// libtorch's spelling with `stable` first; every sort is stable.
  std::tuple<Tensor, Tensor> sort(std::optional<bool> stable, int64_t dim = -1, bool descending = false,
                                  KILN_LOC) const;
  /// The indices of sort(dim, descending).
  Tensor argsort(int64_t dim = -1, bool descending = false, KILN_LOC) const;
  /// The k largest (smallest) elements along `dim` and their int64 indices, in
  /// sorted order (`sorted` is accepted; the order is always sorted).
  /// num_samples int64 category indices per row of this 1-D [n] or 2-D [rows, n]
  /// tensor of non-negative weights (not necessarily summing to 1), drawn from
  /// the default generator or `generator`. Without replacement, no category is
  /// drawn twice in a row (num_samples at most the row's non-zero weights).
  Tensor multinomial(int64_t num_samples, bool replacement = false,
                     std::optional<Generator> generator = std::nullopt, KILN_LOC) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true, KILN_LOC) const;
  /// The k-th smallest element along `dim` (k from 1) and its int64 index; ties
  /// by position, NaN the largest. keepdim keeps `dim` as size 1.
  std::tuple<Tensor, Tensor> kthvalue(int64_t k, int64_t dim = -1, bool keepdim = false, KILN_LOC) const;

  // ---- linear algebra ----
  Tensor matmul(const Tensor& other, KILN_LOC) const;
  Tensor mm(const Tensor& other, KILN_LOC) const;
  Tensor bmm(const Tensor& other, KILN_LOC) const;

  // ---- in place ----
  Tensor& add_(const Tensor& other, Scalar alpha = 1, KILN_LOC);
  Tensor& add_(Scalar other, KILN_LOC);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1, KILN_LOC);
  Tensor& sub_(Scalar other, KILN_LOC);
  Tensor& mul_(const Tensor& other, KILN_LOC);
  Tensor& mul_(Scalar other, KILN_LOC);
  Tensor& div_(const Tensor& other, KILN_LOC);
  Tensor& div_(Scalar other, KILN_LOC);
  Tensor& zero_(KILN_LOC);
  Tensor& fill_(Scalar value, KILN_LOC);
  /// Copies src's values (broadcast, converted) into this tensor's storage.
  Tensor& copy_(const Tensor& src, KILN_LOC);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max, KILN_LOC);
  Tensor& relu_(KILN_LOC);
  /// In-place view changes (frontend/tensor_inplace.cpp): this tensor takes
  /// the geometry of unsqueeze(dim), squeeze(), ... on the same storage, and
  /// their autograd history, as PyTorch rebases a view. An error on a leaf
  /// that requires grad, and on a trace's input.
  Tensor& unsqueeze_(int64_t dim, KILN_LOC);
  Tensor& squeeze_(KILN_LOC);
  Tensor& squeeze_(int64_t dim, KILN_LOC);
  Tensor& t_(KILN_LOC);
  Tensor& transpose_(int64_t dim0, int64_t dim1, KILN_LOC);
  Tensor& operator+=(TensorAt other);
  Tensor& operator-=(TensorAt other);
  Tensor& operator*=(TensorAt other);
  Tensor& operator/=(TensorAt other);
  Tensor& operator+=(ScalarAt other);
  Tensor& operator-=(ScalarAt other);
  Tensor& operator*=(ScalarAt other);
  Tensor& operator/=(ScalarAt other);

  // ---- autograd ----
  bool requires_grad() const;
  /// Marks a leaf as requiring grad (in place, returns *this), like requires_grad_().
  Tensor& requires_grad_(bool on = true, KILN_LOC);
  Tensor& set_requires_grad(bool on = true, KILN_LOC) { return requires_grad_(on, loc); }
  /// The accumulated gradient (undefined until a backward reaches this leaf). The
  /// returned handle shares storage: w.grad().zero_() clears it.
  Tensor grad() const;
  /// Replaces the gradient (e.g. with an undefined Tensor to drop it).
  void set_grad(const Tensor& g) const;
  /// Reverse-mode gradient of this tensor (a scalar, unless `gradient` is given).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false, KILN_LOC) const;
  /// The same data, cut off from autograd.
  Tensor detach() const;
  bool is_leaf() const;
  /// Name of the op that produced this tensor for autograd ("MulBackward"-like), or "".
  std::string grad_fn_name() const;

  /// PyTorch-style repr: tensor([[1., 2.], [3., 4.]], requires_grad=True).
  std::string str() const;
  std::string toString() const { return str(); }

  // ---- libtorch's spellings (frontend/tensor_inplace.cpp) ----
  /// The single element as a Scalar of this tensor's kind (libtorch's item()).
  Scalar item(KILN_LOC) const;
  /// The data without autograd history, sharing storage (libtorch's x.data()):
  /// `x.data() = y` writes y into x.
  Tensor data() const { return detach(); }
  /// Pointer to element 0 (CPU, eager only), untyped.
  void* data_ptr() const;
  /// Options for a new tensor like this one: its dtype and device.
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  int64_t ndimension() const { return dim(); }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// The op that computed this tensor (nullptr for leaves and constants).
  std::shared_ptr<GradFn> grad_fn() const;
  Tensor toType(DType t, KILN_LOC) const { return to(t, loc); }
  Tensor type_as(const Tensor& other, KILN_LOC) const { return to(other.dtype(), loc); }
  Tensor view_as(const Tensor& other, KILN_LOC) const { return view(other.sizes(), loc); }
  Tensor reshape_as(const Tensor& other, KILN_LOC) const { return reshape(other.sizes(), loc); }
  /// The p-norm along one dim.
  Tensor norm(double p, int64_t dim, bool keepdim = false, KILN_LOC) const;
  /// The outer product of two 1-D tensors: [n] x [m] -> [n, m] (ger is its old name).
  Tensor outer(const Tensor& other, KILN_LOC) const;
  Tensor ger(const Tensor& other, KILN_LOC) const { return outer(other, loc); }
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8) const;
  bool equal(const Tensor& other) const;
  /// Element access by index into CPU memory, for loops over small tensors:
  /// `auto a = x.accessor<float, 2>(); a[i][j] = 1;` (eager, dtype must be T).
  template <class T, size_t N>
  TensorAccessor<T, N> accessor() const&;
  /// Prints str() and a newline to standard output.
  void print() const;
  /// The tensor tiled `repeats` times along each dim (leading dims added when
  /// repeats is longer than the rank), as torch.Tensor.repeat.
  Tensor repeat(Dims repeats, KILN_LOC) const;
  /// The elements in reverse order along each of `dims` (torch.flip).
  Tensor flip(Dims dims, KILN_LOC) const;
  /// The elements shifted by shifts[i] along dims[i], wrapping around
  /// (torch.roll); with no dims, over the flattened tensor, reshaped back.
  Tensor roll(std::vector<int64_t> shifts, std::vector<int64_t> dims = {}, KILN_LOC) const;
  Tensor roll(int64_t shift, int64_t dim, KILN_LOC) const {
    return roll(std::vector<int64_t>{shift}, std::vector<int64_t>{dim}, loc);
  }
  /// Writes `value` (broadcast) into the elements basic indexing selects
  /// (integers, slices, None, Ellipsis): x.index_put_({0, Slice()}, 1).
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value,
                     KILN_LOC);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value, KILN_LOC);
  /// beta * this + alpha * (mat1 @ mat2).
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta = 1, Scalar alpha = 1,
               KILN_LOC) const;
  // ---- more of libtorch's tensor functions (frontend/tensor_extra.cpp) ----
  // Composites of table ops: they run eagerly, trace and differentiate like
  // the ops they are made of.
  /// A 1-D tensor's values on the `diagonal`-th diagonal of a square matrix, or
  /// a 2-D tensor's diagonal as a 1-D tensor (torch.diag).
  Tensor diag(int64_t diagonal = 0, KILN_LOC) const;
  /// The diagonal of the dims dim1 and dim2 (offset above (> 0) or below the
  /// main one), as the last dim (torch.diagonal; a copy, not a view).
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1, KILN_LOC) const;
  /// The sum of a 2-D tensor's main diagonal.
  Tensor trace(KILN_LOC) const;
  /// this + weight * (end - this), in PyTorch's two-sided form (from `end` when
  /// |weight| >= 0.5).
  Tensor lerp(const Tensor& end, Scalar weight, KILN_LOC) const;
  Tensor lerp(const Tensor& end, const Tensor& weight, KILN_LOC) const;
  /// beta * this + alpha * (batch1 @ batch2), batched [B, n, m] (torch.baddbmm);
  /// addbmm sums the batch; addmv and addr take a matrix-vector product and an
  /// outer product. beta = 0 ignores this tensor (NaN included).
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta = 1, Scalar alpha = 1,
                 KILN_LOC) const;
  Tensor addbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta = 1, Scalar alpha = 1,
                KILN_LOC) const;
  Tensor addmv(const Tensor& mat, const Tensor& vec, Scalar beta = 1, Scalar alpha = 1,
               KILN_LOC) const;
  Tensor addr(const Tensor& vec1, const Tensor& vec2, Scalar beta = 1, Scalar alpha = 1,
              KILN_LOC) const;
  /// The lower median (of an even count, the smaller middle value); NaN when
  /// the elements (the row) hold a NaN, as torch.median. With a dim, the
  /// values and their int64 indices.
  Tensor median(KILN_LOC) const;
  std::tuple<Tensor, Tensor> median(int64_t dim, bool keepdim = false, KILN_LOC) const;
  /// Each element repeated `repeats` times along `dim` (the flattened tensor
  /// without one). A tensor of repeats (one per element of `dim`) decides the
  /// result's size from its values, so it is eager only, as nonzero.
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt,
                           KILN_LOC) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                           KILN_LOC) const;
  /// NaN, +inf and -inf replaced (by 0 and the dtype's largest and lowest finite
  /// values unless given).
  Tensor nan_to_num(std::optional<double> nan = std::nullopt,
                    std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt, KILN_LOC) const;
  /// |this - other| <= atol + rtol * |other| elementwise (infinities equal
  /// when they are the same; NaN equal to NaN only with equal_nan).
  Tensor isclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8,
                 bool equal_nan = false, KILN_LOC) const;
  /// The smallest and largest elements, of all or along `dim`.
  std::tuple<Tensor, Tensor> aminmax(std::optional<int64_t> dim = std::nullopt,
                                     bool keepdim = false, KILN_LOC) const;
  /// Dim `dim` split into `sizes` (one may be -1).
  Tensor unflatten(int64_t dim, std::vector<int64_t> sizes, KILN_LOC) const;
  /// The dims `source` moved to positions `destination`, the others in order.
  Tensor movedim(std::vector<int64_t> source, std::vector<int64_t> destination, KILN_LOC) const;
  Tensor movedim(int64_t source, int64_t destination, KILN_LOC) const {
    return movedim(std::vector<int64_t>{source}, std::vector<int64_t>{destination}, loc);
  }
  Tensor moveaxis(int64_t source, int64_t destination, KILN_LOC) const {
    return movedim(source, destination, loc);
  }
  Tensor swapaxes(int64_t dim0, int64_t dim1, KILN_LOC) const { return transpose(dim0, dim1, loc); }
  Tensor swapdims(int64_t dim0, int64_t dim1, KILN_LOC) const { return transpose(dim0, dim1, loc); }
  /// The n-th forward difference along dim, after prepending and appending.
  Tensor diff(int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
              const Tensor& append = Tensor(), KILN_LOC) const;
  /// New tensors with this tensor's dtype and device unless the options say.
  Tensor new_zeros(Shape size, std::optional<TensorOptions> options = std::nullopt, KILN_LOC) const;
  Tensor new_ones(Shape size, std::optional<TensorOptions> options = std::nullopt, KILN_LOC) const;
  Tensor new_empty(Shape size, std::optional<TensorOptions> options = std::nullopt, KILN_LOC) const;
  Tensor new_full(Shape size, Scalar value, std::optional<TensorOptions> options = std::nullopt,
                  KILN_LOC) const;
  /// 0 where this < 0, `values` where it is 0, 1 where > 0 (no gradient).
  Tensor heaviside(const Tensor& values, KILN_LOC) const;
  /// Whether exactly one of the two is non-zero.
  Tensor logical_xor(const Tensor& other, KILN_LOC) const;
  /// floor(this / other), in this dtype for integers (PyTorch 1.13's rounding).
  Tensor floor_divide(const Tensor& other, KILN_LOC) const;
  Tensor floor_divide(Scalar other, KILN_LOC) const;
  /// The cross product of 3-vectors along `dim` (the first dim of size 3
  /// without one).
  Tensor cross(const Tensor& other, std::optional<int64_t> dim = std::nullopt, KILN_LOC) const;
  /// The Kronecker product (the lower rank padded with leading 1s).
  Tensor kron(const Tensor& other, KILN_LOC) const;
  /// Rotated k quarter turns in the plane of dims (from the first towards the second).
  Tensor rot90(int64_t k = 1, Dims dims = {0, 1}, KILN_LOC) const;
  /// The count of elements in each of `bins` equal bins over [min, max] (the
  /// data's range when min = max); elements outside are not counted.
  Tensor histc(int64_t bins = 100, Scalar min = 0, Scalar max = 0, KILN_LOC) const;
  /// this + value * t1 * t2, and this + value * t1 / t2.
  Tensor addcmul(const Tensor& t1, const Tensor& t2, Scalar value = 1, KILN_LOC) const;
  Tensor addcdiv(const Tensor& t1, const Tensor& t2, Scalar value = 1, KILN_LOC) const;
  /// A copy with `value` in the slices `index` along dim (torch.index_fill).
  Tensor index_fill(int64_t dim, const Tensor& index, Scalar value, KILN_LOC) const;
  /// A copy with source's slices written at `index` along dim (torch.index_copy;
  /// a slice named twice gets the mean, as scatter).
  Tensor index_copy(int64_t dim, const Tensor& index, const Tensor& source, KILN_LOC) const;
  /// The elements at flat positions `index` (negative from the end), in index's shape.
  Tensor take(const Tensor& index, KILN_LOC) const;
  /// The windows of `size` elements every `step` along dim: that dim becomes the
  /// window count and a last dim of `size` is added (Tensor.unfold; a view,
  /// whose windows may overlap: writing into it in place is an error).
  Tensor unfold(int64_t dim, int64_t size, int64_t step, KILN_LOC) const;
  /// repeat() with leading 1s added to `reps` when it is shorter than dim().
  Tensor tile(Dims reps, KILN_LOC) const;
  /// The number of non-zero elements, of all or over dims (int64).
  Tensor count_nonzero(Dims dims = {}, KILN_LOC) const;
  /// Sum and mean that skip NaN (nanmean of only NaN is NaN).
  Tensor nansum(Dims dims = {}, bool keepdim = false, KILN_LOC) const;
  Tensor nanmean(Dims dims = {}, bool keepdim = false, KILN_LOC) const;
  /// The determinant and the inverse of square matrices [..., n, n], by LU
  /// with partial pivoting (eager only; frontend/linalg.cpp).
  Tensor det(KILN_LOC) const;
  Tensor inverse(KILN_LOC) const;
  /// log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given.
  Tensor logit(std::optional<double> eps = std::nullopt, KILN_LOC) const;
  /// this * log(other), 0 where this is 0 (NaN where other is NaN).
  Tensor xlogy(const Tensor& other, KILN_LOC) const;
  /// sin(pi x) / (pi x), 1 at 0.
  Tensor sinc(KILN_LOC) const;
  Tensor deg2rad(KILN_LOC) const;
  Tensor rad2deg(KILN_LOC) const;
  /// x - trunc(x).
  Tensor frac(KILN_LOC) const;
  /// Whether the sign bit is set (true for -0.0).
  Tensor signbit(KILN_LOC) const;
  /// |this| with the sign of other (its sign bit: -0.0 counts as negative).
  Tensor copysign(const Tensor& other, KILN_LOC) const;
  /// pow in float64.
  Tensor float_power(const Tensor& exponent, KILN_LOC) const;
  Tensor float_power(Scalar exponent, KILN_LOC) const;
  // libtorch's other names.
  Tensor true_divide(const Tensor& other, KILN_LOC) const { return div(other, loc); }
  Tensor clip(std::optional<Scalar> min, std::optional<Scalar> max, KILN_LOC) const {
    return clamp(min, max, loc);
  }
  Tensor absolute(KILN_LOC) const { return abs(loc); }
  Tensor negative(KILN_LOC) const { return neg(loc); }
  Tensor sgn(KILN_LOC) const { return sign(loc); }
  // In place (frontend/tensor_inplace.cpp): the op above, then one write.
  Tensor& lerp_(const Tensor& end, Scalar weight, KILN_LOC);
  Tensor& lerp_(const Tensor& end, const Tensor& weight, KILN_LOC);
  Tensor& addcmul_(const Tensor& t1, const Tensor& t2, Scalar value = 1, KILN_LOC);
  Tensor& addcdiv_(const Tensor& t1, const Tensor& t2, Scalar value = 1, KILN_LOC);
  Tensor& index_fill_(int64_t dim, const Tensor& index, Scalar value, KILN_LOC);
  Tensor& index_copy_(int64_t dim, const Tensor& index, const Tensor& source, KILN_LOC);
  /// `value` on the main diagonal of a matrix (of a tensor whose dims are all
  /// equal); with wrap, a tall matrix's diagonal starts again below every
  /// (columns + 1)-th row, as PyTorch's.
  Tensor& fill_diagonal_(Scalar value, bool wrap = false, KILN_LOC);
  Tensor& clip_(std::optional<Scalar> min, std::optional<Scalar> max, KILN_LOC) { return clamp_(min, max, loc); }

  // ---- selections whose size the data decides (frontend/tensor_select.cpp) ----
  // Eager only: inside a trace they are an error naming the line, as unique
  // (a traced plan has static shapes, as jax.jit's).
  /// The elements where the (broadcast) bool mask is true, as a 1-D tensor; the
  /// gradient goes back to those elements.
  Tensor masked_select(const Tensor& mask, KILN_LOC) const;
  /// The int64 indices [n, dim()] of the non-zero elements, in row-major order.
  Tensor nonzero(KILN_LOC) const;
  Tensor argwhere(KILN_LOC) const { return nonzero(loc); }
  /// How often each value 0..max occurs in a 1-D non-negative integer tensor
  /// (at least minlength bins), or the sum of `weights` falling in each.
  Tensor bincount(const Tensor& weights = Tensor(), int64_t minlength = 0, KILN_LOC) const;

  // In place: fills from the global generator (manual_seed), and ops whose
  // result is written back in this tensor's dtype (x.eq_(y) leaves 1 and 0).
  Tensor& uniform_(double from = 0, double to = 1, KILN_LOC);
  Tensor& normal_(double mean = 0, double std = 1, KILN_LOC);
  Tensor& bernoulli_(double p = 0.5, KILN_LOC);
  /// Integers drawn uniformly from [from, to) (or [0, to)), written in this
  /// tensor's dtype: randint's draws.
  Tensor& random_(int64_t from, int64_t to, KILN_LOC);
  Tensor& random_(int64_t to, KILN_LOC);
  Tensor& neg_(KILN_LOC);
  Tensor& abs_(KILN_LOC);
  Tensor& exp_(KILN_LOC);
  Tensor& log_(KILN_LOC);
  Tensor& sqrt_(KILN_LOC);
  Tensor& sigmoid_(KILN_LOC);
  Tensor& tanh_(KILN_LOC);
  Tensor& floor_(KILN_LOC);
  Tensor& ceil_(KILN_LOC);
  Tensor& round_(KILN_LOC);
  Tensor& trunc_(KILN_LOC);
  Tensor& sign_(KILN_LOC);
  Tensor& reciprocal_(KILN_LOC);
  Tensor& square_(KILN_LOC);
  Tensor& pow_(Scalar exponent, KILN_LOC);
  Tensor& pow_(const Tensor& exponent, KILN_LOC);
  Tensor& clamp_min_(Scalar min, KILN_LOC);
  Tensor& clamp_max_(Scalar max, KILN_LOC);
  Tensor& masked_fill_(const Tensor& mask, Scalar value, KILN_LOC);
  Tensor& eq_(const Tensor& other, KILN_LOC);
  Tensor& ne_(const Tensor& other, KILN_LOC);
  Tensor& lt_(const Tensor& other, KILN_LOC);
  Tensor& le_(const Tensor& other, KILN_LOC);
  Tensor& gt_(const Tensor& other, KILN_LOC);
  Tensor& ge_(const Tensor& other, KILN_LOC);
  Tensor& eq_(Scalar other, KILN_LOC);
  Tensor& ne_(Scalar other, KILN_LOC);
  Tensor& lt_(Scalar other, KILN_LOC);
  Tensor& le_(Scalar other, KILN_LOC);
  Tensor& gt_(Scalar other, KILN_LOC);
  Tensor& ge_(Scalar other, KILN_LOC);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// ---- operators (the left or right tensor carries the source line) ----
Tensor operator+(TensorAt a, const Tensor& b);
Tensor operator-(TensorAt a, const Tensor& b);
Tensor operator*(TensorAt a, const Tensor& b);
Tensor operator/(TensorAt a, const Tensor& b);
Tensor operator+(TensorAt a, Scalar b);
Tensor operator-(TensorAt a, Scalar b);
Tensor operator*(TensorAt a, Scalar b);
Tensor operator/(TensorAt a, Scalar b);
Tensor operator+(Scalar a, TensorAt b);
Tensor operator-(Scalar a, TensorAt b);
Tensor operator*(Scalar a, TensorAt b);
Tensor operator/(Scalar a, TensorAt b);
Tensor operator-(TensorAt a);
Tensor operator==(TensorAt a, const Tensor& b);
Tensor operator!=(TensorAt a, const Tensor& b);
Tensor operator<(TensorAt a, const Tensor& b);
Tensor operator<=(TensorAt a, const Tensor& b);
Tensor operator>(TensorAt a, const Tensor& b);
Tensor operator>=(TensorAt a, const Tensor& b);
Tensor operator==(TensorAt a, Scalar b);
Tensor operator!=(TensorAt a, Scalar b);
Tensor operator<(TensorAt a, Scalar b);
Tensor operator<=(TensorAt a, Scalar b);
Tensor operator>(TensorAt a, Scalar b);
Tensor operator>=(TensorAt a, Scalar b);
/// &, |, ^ and ~ of bool tensors: logical_and, logical_or, != and logical_not
/// (libtorch's masks, `a.ge(lo) & a.lt(hi)`). Integer operands are an error:
/// the op table has no bitwise integer ops yet.
Tensor operator&(TensorAt a, const Tensor& b);
Tensor operator|(TensorAt a, const Tensor& b);
Tensor operator^(TensorAt a, const Tensor& b);
Tensor operator~(TensorAt a);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- free functions ----
Tensor matmul(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, KILN_LOC);
Tensor maximum(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor logical_and(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor logical_or(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor minimum(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor exp(const Tensor& x, KILN_LOC);
Tensor log(const Tensor& x, KILN_LOC);
Tensor tanh(const Tensor& x, KILN_LOC);
Tensor erf(const Tensor& x, KILN_LOC);
Tensor sigmoid(const Tensor& x, KILN_LOC);
Tensor relu(const Tensor& x, KILN_LOC);
Tensor softmax(const Tensor& x, int64_t dim, KILN_LOC);
Tensor log_softmax(const Tensor& x, int64_t dim, KILN_LOC);
Tensor log1p(const Tensor& x, KILN_LOC);
Tensor log2(const Tensor& x, KILN_LOC);
Tensor log10(const Tensor& x, KILN_LOC);
Tensor expm1(const Tensor& x, KILN_LOC);
Tensor floor(const Tensor& x, KILN_LOC);
Tensor ceil(const Tensor& x, KILN_LOC);
Tensor round(const Tensor& x, KILN_LOC);
Tensor trunc(const Tensor& x, KILN_LOC);
Tensor isnan(const Tensor& x, KILN_LOC);
Tensor isinf(const Tensor& x, KILN_LOC);
Tensor logsumexp(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false, KILN_LOC);
Tensor cumsum(const Tensor& x, int64_t dim, KILN_LOC);
Tensor cumprod(const Tensor& x, int64_t dim, KILN_LOC);
Tensor logcumsumexp(const Tensor& x, int64_t dim, KILN_LOC);
Tensor logaddexp(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor atan2(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor hypot(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor prod(const Tensor& x, KILN_LOC);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false, KILN_LOC);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                KILN_LOC);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, KILN_LOC);
/// x.multinomial(num_samples, replacement, generator).
Tensor multinomial(const Tensor& x, int64_t num_samples, bool replacement = false,
                   std::optional<Generator> generator = std::nullopt, KILN_LOC);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true, KILN_LOC);
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false,
                                    KILN_LOC);
/// The distinct values of x (flattened), ascending (each NaN distinct, last);
/// the index of each element's value in them (x's shape) when return_inverse,
/// and how often each occurs when return_counts (else undefined tensors). Eager
/// only: the result's size depends on the values. No gradient (as PyTorch).
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                                          bool return_counts = false, KILN_LOC);
/// Joins tensors along an existing dim (cat) or a new one (stack); dtypes promote.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0, KILN_LOC);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0, KILN_LOC);
Tensor tril(const Tensor& x, int64_t diagonal = 0, KILN_LOC);
Tensor triu(const Tensor& x, int64_t diagonal = 0, KILN_LOC);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, KILN_LOC);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, KILN_LOC);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, KILN_LOC);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, KILN_LOC);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value, KILN_LOC);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1,
                 KILN_LOC);
/// True when both have the same shape and all elements are within atol + rtol * |b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);
/// Sums of products over the index letters of `equation` (torch.einsum): "ij,jk->ik",
/// "bij,bjk->bik", "ii->i" is not supported (each letter once per operand); without
/// "->" the output has the letters used once, in alphabetical order. Two operands
/// contract with a matmul; more are contracted left to right.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, KILN_LOC);
Tensor outer(const Tensor& a, const Tensor& b, KILN_LOC);
// libtorch's free spellings of methods whose names the C library also has
// (abs, sqrt, pow, ...): plain overloads, so that a program with both
// `using namespace std;` and `using namespace torch;` still resolves them.
Tensor abs(const Tensor& x, KILN_LOC);
Tensor sqrt(const Tensor& x, KILN_LOC);
Tensor sin(const Tensor& x, KILN_LOC);
Tensor cos(const Tensor& x, KILN_LOC);
Tensor isfinite(const Tensor& x, KILN_LOC);
Tensor pow(const Tensor& x, Scalar exponent, KILN_LOC);
Tensor pow(const Tensor& x, const Tensor& exponent, KILN_LOC);
Tensor fmod(const Tensor& x, Scalar other, KILN_LOC);
Tensor fmod(const Tensor& x, const Tensor& other, KILN_LOC);
Tensor remainder(const Tensor& x, Scalar other, KILN_LOC);
Tensor remainder(const Tensor& x, const Tensor& other, KILN_LOC);
Tensor max(const Tensor& x, KILN_LOC);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false, KILN_LOC);
Tensor max(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor min(const Tensor& x, KILN_LOC);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false, KILN_LOC);
Tensor min(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt,
             KILN_LOC);
Tensor norm(const Tensor& x, double p = 2, KILN_LOC);
Tensor norm(const Tensor& x, double p, int64_t dim, bool keepdim = false, KILN_LOC);
Tensor norm(const Tensor& x, double p, std::vector<int64_t> dims, bool keepdim = false, KILN_LOC);

namespace indexing {
/// An unset slice bound (Python's None in x[1:]) and a new dim (x[None]).
struct NoneIndex {};
inline constexpr NoneIndex None{};
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};
/// start:stop:step, bounds optional (negative ones count from the end).
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        int64_t step = 1)
      : start(start), stop(stop), step(step) {}
  Slice(NoneIndex, std::optional<int64_t> stop = std::nullopt, int64_t step = 1)
      : stop(stop), step(step) {}
  Slice(int64_t start, NoneIndex, int64_t step = 1) : start(start), step(step) {}
  Slice(NoneIndex, NoneIndex, int64_t step = 1) : step(step) {}
};
struct TensorIndex {
  std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, Tensor> what;
  TensorIndex(int i) : what(int64_t(i)) {}
  TensorIndex(int64_t i) : what(i) {}
  TensorIndex(Slice s) : what(s) {}
  TensorIndex(NoneIndex n) : what(n) {}
  TensorIndex(EllipsisIndex e) : what(e) {}
  /// "..." stands for Ellipsis, as in libtorch.
  TensorIndex(const char* s) : what(EllipsisIndex{}) {
    if (std::string_view(s) != "...")
      throw Error(std::string("index: \"") + s +
                  "\" is not an index (expected \"...\" for Ellipsis)");
  }
  TensorIndex(Tensor t) : what(std::move(t)) {}
};
}  // namespace indexing

}  // namespace kiln

#include "frontend/creation.h"
#include "frontend/tensor_accessor.h"
#include "frontend/tensor_extra.h"
