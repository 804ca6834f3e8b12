// Making tensors: from values, filled, ranges, random (frontend/creation.cpp,
// frontend/random.cpp), with libtorch's names. Included by tensor.h.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

/// The values of tensor(), as libtorch's TensorDataContainer: a number, a
/// braced list of numbers nested to any depth ({{1, 2}, {3, 4}} is [2, 2]),
/// or a std::vector (1-D). Its natural dtype, used when tensor() is given
/// none: int64 for integers, float32 for floating values, bool for bools;
/// uint8_t, int8_t and int16_t keep theirs; a list mixing integers and
/// floating values is floating. A ragged list ({{1, 2}, {3}}) is an error at
/// tensor(), naming the line. {} is an empty 1-D list.
class TensorLiteral {
 public:
  TensorLiteral() : sizes_{0} {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  TensorLiteral(T v) : values_{Scalar(v)}, natural_(natural_of<T>()) {}     // NOLINT: implicit
  TensorLiteral(Scalar v);                                                  // NOLINT: implicit
  TensorLiteral(std::initializer_list<TensorLiteral> list);                 // NOLINT: implicit
  TensorLiteral(const std::vector<float>& v) : TensorLiteral(from(v)) {}    // NOLINT: implicit
  TensorLiteral(const std::vector<double>& v) : TensorLiteral(from(v)) {}   // NOLINT: implicit
  TensorLiteral(const std::vector<int>& v) : TensorLiteral(from(v)) {}      // NOLINT: implicit
  TensorLiteral(const std::vector<int64_t>& v) : TensorLiteral(from(v)) {}  // NOLINT: implicit
  TensorLiteral(const std::vector<bool>& v) : TensorLiteral(from(v)) {}     // NOLINT: implicit
  TensorLiteral(const std::vector<uint8_t>& v) : TensorLiteral(from(v)) {}  // NOLINT: implicit
  TensorLiteral(const std::vector<int8_t>& v) : TensorLiteral(from(v)) {}   // NOLINT: implicit
  TensorLiteral(const std::vector<int16_t>& v) : TensorLiteral(from(v)) {}  // NOLINT: implicit

  /// The shape ([] for a number), the values in row-major order, the dtype
  /// they ask for, and what is wrong with a ragged list ("" when nothing).
  const Shape& sizes() const { return sizes_; }
  const std::vector<Scalar>& values() const { return values_; }
  DType natural_dtype() const { return natural_; }
  const std::string& error() const { return error_; }

 private:
  template <class T>
  static constexpr DType natural_of() {
    if constexpr (std::is_same_v<T, bool>) return DType::b8;
    else if constexpr (std::is_floating_point_v<T>) return DType::f32;
    else if constexpr (std::is_same_v<T, uint8_t>) return DType::u8;
    else if constexpr (std::is_same_v<T, int8_t>) return DType::i8;
    else if constexpr (std::is_same_v<T, int16_t>) return DType::i16;
    else return DType::i64;
  }
  template <class T>
  static TensorLiteral from(const std::vector<T>& v) {
    TensorLiteral r;
    r.sizes_ = {static_cast<int64_t>(v.size())};
    r.values_.reserve(v.size());
    for (const T& x : v) r.values_.push_back(Scalar(static_cast<T>(x)));
    r.natural_ = natural_of<T>();
    return r;
  }

  Shape sizes_;
  std::vector<Scalar> values_;
  DType natural_ = DType::f32;
  std::string error_;
};

/// A tensor of `values` (see TensorLiteral), in opts' dtype when it names one
/// (values must fit it: tensor({300}, kUInt8) is an error, as in libtorch):
/// torch::tensor(3.5), tensor({{1, 2}, {3, 4}}, kFloat), tensor(std::vector<float>{...}).
Tensor tensor(const TensorLiteral& values, TensorOptions opts = {}, KILN_LOC);
/// A 0-d tensor.
Tensor scalar_tensor(Scalar value, TensorOptions opts = {}, KILN_LOC);
/// A tensor of `shape` from row-major values (dtype of opts; values converted).
Tensor from_vector(const std::vector<double>& values, Shape shape, TensorOptions opts = {}, KILN_LOC);
/// Wraps memory the caller owns (CPU, row-major unless strides are given); no copy.
Tensor from_blob(void* data, Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor from_blob(void* data, Shape shape, Strides strides, TensorOptions opts = {}, KILN_LOC);
Tensor empty(Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor zeros(Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor ones(Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor full(Shape shape, Scalar value, TensorOptions opts = {}, KILN_LOC);
Tensor zeros_like(const Tensor& t, KILN_LOC);
Tensor ones_like(const Tensor& t, KILN_LOC);
Tensor full_like(const Tensor& t, Scalar value, KILN_LOC);
Tensor eye(int64_t n, TensorOptions opts = {}, KILN_LOC);
/// [n, m] with ones on the main diagonal.
Tensor eye(int64_t n, int64_t m, TensorOptions opts = {}, KILN_LOC);
/// [start, end) in steps (int64 when all are integers, else float32).
Tensor arange(Scalar end, TensorOptions opts = {}, KILN_LOC);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions opts = {}, KILN_LOC);
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {}, KILN_LOC);
/// base^linspace(start, end, steps).
Tensor logspace(double start, double end, int64_t steps, double base = 10.0,
                TensorOptions opts = {}, KILN_LOC);
/// Uniform on [0, 1) and standard normal (float32 unless a floating dtype is
/// given), from `generator` or the default generator of the result's device
/// (default_generator, manual_seed). Each float32 element carries 24 random
/// bits, each float64 element 53; randn is Box-Muller on two such uniforms.
Tensor rand(Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor rand(Shape shape, std::optional<Generator> generator, TensorOptions opts = {}, KILN_LOC);
Tensor randn(Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor randn(Shape shape, std::optional<Generator> generator, TensorOptions opts = {}, KILN_LOC);
Tensor rand_like(const Tensor& t, KILN_LOC);
Tensor randn_like(const Tensor& t, KILN_LOC);
/// Integers uniform in [low, high), int64 unless a dtype is given (whose values
/// [low, high - 1] must be). Any range within int64, without modulo bias.
Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor randint(int64_t low, int64_t high, Shape shape, std::optional<Generator> generator,
               TensorOptions opts = {}, KILN_LOC);
Tensor randint(int64_t high, Shape shape, TensorOptions opts = {}, KILN_LOC);
Tensor randint(int64_t high, Shape shape, std::optional<Generator> generator,
               TensorOptions opts = {}, KILN_LOC);
/// A random permutation of 0 .. n-1 (int64 unless a dtype is given), from
/// `generator` or the default generator: the same after manual_seed, fresh at
/// every call of a compiled function. (An argsort of random keys, O(n).)
Tensor randperm(int64_t n, TensorOptions opts = {}, KILN_LOC);
Tensor randperm(int64_t n, std::optional<Generator> generator, TensorOptions opts = {}, KILN_LOC);
/// 1 with probability p, else 0, for each element p of `probs` (floating; p <= 0
/// gives 0 and p >= 1 gives 1), in its dtype: torch.bernoulli. No gradient.
Tensor bernoulli(const Tensor& probs, std::optional<Generator> generator = std::nullopt, KILN_LOC);
/// The same with one probability p in [0, 1] for every element of `self`'s shape,
/// in self's dtype.
Tensor bernoulli(const Tensor& self, double p, std::optional<Generator> generator = std::nullopt,
                 KILN_LOC);

}  // namespace kiln
