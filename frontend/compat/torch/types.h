// libtorch's names for tensors, on Kiln (the compatibility layer: README,
// "Coming from libtorch"). `torch::` is a namespace of its own that names
// Kiln's entities (using-declarations: torch::Tensor is kiln::Tensor) and adds
// libtorch's spellings where Kiln's differ; nothing here is a second
// implementation. at:: and c10:: name the same things.

//
// The namespace-level functions (torch::zeros, torch::relu, ...) are in
// torch/functions.h.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <kiln/kiln.h>

#include "frontend/print.h"
#include "runtime/cuda_driver.h"

namespace torch {

namespace detail {
/// A program built through these headers is a libtorch program: `std::cout <<
/// tensor` writes libtorch's print (" 0.5000  1.0000" rows, then "[
/// CPUFloatType{2,2} ]"), not Kiln's PyTorch-style repr (frontend/print.h).
inline const bool libtorch_printing =
    (kiln::set_tensor_print_style(kiln::TensorPrintStyle::libtorch), true);
}  // namespace detail

// ---- types ----
using kiln::Device;
using kiln::DeviceType;
using kiln::EnableGradGuard;
using kiln::Error;
using kiln::kCPU;
using kiln::kCUDA;
using kiln::NoGradGuard;
using kiln::OrderedDict;
using kiln::Scalar;
using kiln::Tensor;
using kiln::TensorAccessor;
using kiln::TensorOptions;
using ScalarType = kiln::DType;
using Dtype = kiln::DType;
using kiln::kBool;
using kiln::kByte;
using kiln::kChar;
using kiln::kDouble;
using kiln::kFloat;
using kiln::kFloat32;
using kiln::kFloat64;
using kiln::kInt;
using kiln::kInt16;
using kiln::kInt32;
using kiln::kInt64;
using kiln::kInt8;
using kiln::kLong;
using kiln::kShort;
using kiln::kUInt8;
inline constexpr kiln::DType kU8 = kiln::DType::u8;
inline constexpr kiln::DType kI8 = kiln::DType::i8;
inline constexpr kiln::DType kI16 = kiln::DType::i16;
using kiln::kStrided;
using kiln::Layout;
inline constexpr kiln::DType kF32 = kiln::DType::f32;
inline constexpr kiln::DType kF64 = kiln::DType::f64;
inline constexpr kiln::DType kI32 = kiln::DType::i32;
inline constexpr kiln::DType kI64 = kiln::DType::i64;
template <class T>
using optional = std::optional<T>;
using std::nullopt;
using std::nullopt_t;
namespace indexing = kiln::indexing;
/// torch::ExpandingArray<2>: one size for both dims, or {h, w}.
template <size_t D>
struct ExpandingArraySelect;
template <>
struct ExpandingArraySelect<2> {
  using type = kiln::ExpandingArray2;
};
template <size_t D>
using ExpandingArray = typename ExpandingArraySelect<D>::type;

/// Sizes as libtorch's IntArrayRef: from one integer, a braced list, a vector
/// (x.sizes()) or an ExpandingArray. Owns its values.
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(int64_t v) : v_{v} {}  // NOLINT: implicit, as libtorch
  IntArrayRef(std::initializer_list<int64_t> v) : v_(v) {}
  IntArrayRef(const std::vector<int64_t>& v) : v_(v) {}  // NOLINT
  IntArrayRef(const int64_t* data, size_t n) : v_(data, data + n) {}
  IntArrayRef(const kiln::ExpandingArray2& a) : v_{a[0], a[1]} {}  // NOLINT
  operator const std::vector<int64_t>&() const { return v_; }      // NOLINT
  operator kiln::Dims() const { return v_; }                       // NOLINT
  const std::vector<int64_t>& vec() const { return v_; }
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  const int64_t* data() const { return v_.data(); }
  int64_t operator[](size_t i) const { return v_[i]; }
  int64_t front() const { return v_.front(); }
  int64_t back() const { return v_.back(); }
  auto begin() const { return v_.begin(); }
  auto end() const { return v_.end(); }
  bool equals(const IntArrayRef& o) const { return v_ == o.v_; }
  friend bool operator==(const IntArrayRef& a, const IntArrayRef& b) { return a.v_ == b.v_; }

 private:
  std::vector<int64_t> v_;
};
using IntList = IntArrayRef;
using TensorList = std::vector<Tensor>;

/// Options factories: torch::requires_grad(), torch::dtype(torch::kInt64), torch::device(kCUDA).
inline TensorOptions requires_grad(bool on = true) {
  return TensorOptions().requires_grad(on);
}
inline TensorOptions dtype(kiln::DType d) {
  return TensorOptions(d);
}
inline TensorOptions device(Device d) {
  return TensorOptions().device(d);
}

/// The values of libtorch's reduction argument (an integer in torch::nll_loss and friends).
namespace Reduction {
enum Reduction { None, Mean, Sum, END };
}

/// libtorch's enum-like option values (torch::kMean, torch::kReLU, torch::kFanIn, ...):
/// each converts to the Kiln enum the option takes.
namespace enumtype {
// (kMean and kSum are also an EmbeddingBag's mode.)
#define KILN_TORCH_REDUCTION(T, value, ...)                                                   \
  struct T {                                                                                  \
    operator kiln::nn::Reduction() const { return kiln::nn::Reduction::value; }               \
    operator kiln::nn::KLDivReduction() const { return kiln::nn::KLDivReduction::value; }     \
    __VA_ARGS__                                                                               \
  };
#define KILN_TORCH_BAG_MODE(value) \
  operator kiln::nn::EmbeddingBagMode() const { return kiln::nn::EmbeddingBagMode::value; }
KILN_TORCH_REDUCTION(kNone, None)
KILN_TORCH_REDUCTION(kMean, Mean, KILN_TORCH_BAG_MODE(Mean))
KILN_TORCH_REDUCTION(kSum, Sum, KILN_TORCH_BAG_MODE(Sum))
#undef KILN_TORCH_REDUCTION
/// An EmbeddingBag's mode: the largest row of each bag.
struct kMax {
  KILN_TORCH_BAG_MODE(Max)
};
#undef KILN_TORCH_BAG_MODE
/// kl_div's reduction: the sum divided by the batch size.
struct kBatchMean {
  operator kiln::nn::KLDivReduction() const { return kiln::nn::KLDivReduction::BatchMean; }
};
/// A transformer layer's activation (TransformerEncoderLayerOptions::activation).
struct kGELU {
  operator kiln::nn::TransformerActivation() const {  // NOLINT
    return kiln::nn::TransformerActivation::GELU;
  }
};
#define KILN_TORCH_NONLINEARITY(T, value)                                                         \
  struct T {                                                                                      \
    operator kiln::nn::init::Nonlinearity() const { return kiln::nn::init::Nonlinearity::value; } \
  };
KILN_TORCH_NONLINEARITY(kConv2D, Conv2D)
KILN_TORCH_NONLINEARITY(kSigmoid, Sigmoid)
KILN_TORCH_NONLINEARITY(kLeakyReLU, LeakyReLU)
#undef KILN_TORCH_NONLINEARITY
// Also an RNN's nonlinearity (RNNOptions::nonlinearity(torch::kTanh)).
#define KILN_TORCH_NONLINEARITY(T, value)                                                         \
  struct T {                                                                                      \
    operator kiln::nn::init::Nonlinearity() const { return kiln::nn::init::Nonlinearity::value; } \
    operator kiln::nn::RNNNonlinearity() const { return kiln::nn::RNNNonlinearity::value; }       \
  };
KILN_TORCH_NONLINEARITY(kTanh, Tanh)
#undef KILN_TORCH_NONLINEARITY
// Also a transformer layer's activation.
struct kReLU {
  operator kiln::nn::init::Nonlinearity() const { return kiln::nn::init::Nonlinearity::ReLU; }
  operator kiln::nn::RNNNonlinearity() const { return kiln::nn::RNNNonlinearity::ReLU; }
  operator kiln::nn::TransformerActivation() const {  // NOLINT
    return kiln::nn::TransformerActivation::ReLU;
  }
};
struct kFanIn {
  operator kiln::nn::init::FanMode() const { return kiln::nn::init::FanMode::FanIn; }  // NOLINT
};
struct kFanOut {
  operator kiln::nn::init::FanMode() const { return kiln::nn::init::FanMode::FanOut; }  // NOLINT
};
// pad's modes, and a convolution's padding_mode.
#define KILN_TORCH_PAD_MODE(T, value)                                       \
  struct T {                                                                \
    operator kiln::nn::PadMode() const { return kiln::nn::PadMode::value; } \
  };
KILN_TORCH_PAD_MODE(kConstant, Constant)
KILN_TORCH_PAD_MODE(kReflect, Reflect)
KILN_TORCH_PAD_MODE(kReplicate, Replicate)
KILN_TORCH_PAD_MODE(kCircular, Circular)
KILN_TORCH_PAD_MODE(kZeros, Constant)  // a convolution's padding_mode
#undef KILN_TORCH_PAD_MODE
#define KILN_TORCH_INTERPOLATE(T, value)                                                    \
  struct T {                                                                                \
    operator kiln::nn::InterpolateMode() const { return kiln::nn::InterpolateMode::value; } \
  };
KILN_TORCH_INTERPOLATE(kNearest, Nearest)
KILN_TORCH_INTERPOLATE(kBilinear, Bilinear)
#undef KILN_TORCH_INTERPOLATE
// An initialiser's nonlinearity and interpolate's 1-D linear mode.
struct kLinear {
  operator kiln::nn::init::Nonlinearity() const { return kiln::nn::init::Nonlinearity::Linear; }
  operator kiln::nn::InterpolateMode() const { return kiln::nn::InterpolateMode::Linear; }
};
}  // namespace enumtype
inline constexpr enumtype::kConstant kConstant{};
inline constexpr enumtype::kReflect kReflect{};
inline constexpr enumtype::kReplicate kReplicate{};
inline constexpr enumtype::kCircular kCircular{};
inline constexpr enumtype::kZeros kZeros{};
inline constexpr enumtype::kNearest kNearest{};
inline constexpr enumtype::kBilinear kBilinear{};
inline constexpr enumtype::kNone kNone{};
inline constexpr enumtype::kMean kMean{};
inline constexpr enumtype::kSum kSum{};
inline constexpr enumtype::kMax kMax{};
inline constexpr enumtype::kBatchMean kBatchMean{};
inline constexpr enumtype::kGELU kGELU{};
inline constexpr enumtype::kLinear kLinear{};
inline constexpr enumtype::kConv2D kConv2D{};
inline constexpr enumtype::kSigmoid kSigmoid{};
inline constexpr enumtype::kTanh kTanh{};
inline constexpr enumtype::kReLU kReLU{};
inline constexpr enumtype::kLeakyReLU kLeakyReLU{};
inline constexpr enumtype::kFanIn kFanIn{};
inline constexpr enumtype::kFanOut kFanOut{};

/// Concatenates its arguments as << would print them (c10::str).
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

namespace cuda {
/// Whether a CUDA driver and a device are present (never throws).
inline bool is_available() {
  return kiln::cuda::available();
}
inline int64_t device_count() {
  return kiln::cuda::device_count();
}
/// Seeds every device's generator (Kiln has one seed for all devices).
inline void manual_seed(uint64_t seed) {
  kiln::manual_seed(seed);
}
inline void manual_seed_all(uint64_t seed) {
  kiln::manual_seed(seed);
}
}  // namespace cuda

}  // namespace torch

/// libtorch's checks: AT_ASSERT(cond) and TORCH_CHECK(cond, message parts...)
/// throw kiln::Error (a std::exception) when cond is false.
#define AT_ASSERT(cond)                                                                     \
  do {                                                                                      \
    if (!(cond))                                                                            \
      throw ::kiln::Error(std::string("Expected ") + #cond + " to be true, but got false"); \
  } while (0)
#define TORCH_CHECK(cond, ...)                                                               \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::kiln::Error(::torch::str("Expected ", #cond, " to be true. ", ##__VA_ARGS__)); \
  } while (0)
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ERROR(...) throw ::kiln::Error(::torch::str(__VA_ARGS__))
#define TORCH_WARN(...) (std::cerr << "Warning: " << ::torch::str(__VA_ARGS__) << std::endl)

/// Sizes print as libtorch prints them: std::cout << x.sizes() shows [2, 3].
/// (Kiln's sizes() is a std::vector<int64_t>, libtorch's an IntArrayRef.)
inline std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& sizes) {
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  return os << "]";
}
/// Devices print as libtorch's do: std::cout << x.device() shows cpu or cuda:0.
namespace kiln {
inline std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.str();
}
}  // namespace kiln
namespace torch {
inline std::ostream& operator<<(std::ostream& os, const IntArrayRef& sizes) {
  return ::operator<<(os, sizes.vec());
}
}  // namespace torch

namespace at {
using namespace ::torch;
}  // namespace at
namespace c10 {
using ::torch::Device;
using ::torch::DeviceType;
using ::torch::Error;
using ::torch::IntArrayRef;
using ::torch::kCPU;
using ::torch::kCUDA;
using ::torch::Scalar;
using ::torch::ScalarType;
using ::torch::str;
template <class T>
using optional = std::optional<T>;
using std::nullopt;
using std::nullopt_t;
}  // namespace c10
