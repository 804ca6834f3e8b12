// Making tensors: from values, filled, ranges, random (frontend/creation.cpp,
// frontend/random.cpp), with libtorch's names. Included by tensor.h.
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

/// A tensor holding a nested list of values (float32 for floats, int64 for ints).
Tensor tensor(std::initializer_list<float> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<double> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<int> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<int64_t> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<bool> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<std::initializer_list<float>> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<std::initializer_list<double>> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<std::initializer_list<int>> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<std::initializer_list<int64_t>> values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<float>>> values,
              TensorOptions opts = {}, KILN_LOC);
/// A 0-d tensor.
Tensor scalar_tensor(Scalar value, TensorOptions opts = {}, KILN_LOC);
/// A 0-d tensor holding `value` (float32 for floats, int64 for integers, bool),
/// or a 1-D tensor of a vector's values: libtorch's torch::tensor(3.5, kFloat64)
/// and torch::tensor(std::vector<float>{...}). A vector of doubles gives float32
/// and one of ints int64, as libtorch's; uint8_t, int8_t and int16_t keep their type.
/// Values given with a dtype must fit it (detail::check_fits: tensor({300}, kUInt8)
/// is an error, as in libtorch).
Tensor tensor(Scalar value, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<float>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<double>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<int>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<int64_t>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<bool>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<uint8_t>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<int8_t>& values, TensorOptions opts = {}, KILN_LOC);
Tensor tensor(const std::vector<int16_t>& values, TensorOptions opts = {}, KILN_LOC);
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
/// [start, end) in steps (int64 when all are integers, else float32).
Tensor arange(Scalar end, TensorOptions opts = {}, KILN_LOC);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions opts = {}, KILN_LOC);
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {}, KILN_LOC);
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
