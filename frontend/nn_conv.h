// Convolution and pooling over images [N, C, H, W] (or one image [C, H, W]):
// conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, their nn::functional
// spellings with options structs, and the modules Conv2d, MaxPool2d, AvgPool2d
// and AdaptiveAvgPool2d, as in libtorch; conv1d and Conv1d over sequences
// [N, C, L] (or one [C, L]), as conv2d over [N, C, 1, L].
//
// Each is a composite of table ops (frontend/nn_conv.cpp says how), so it runs
// eagerly, traces, differentiates and fuses like hand-written tensor code, on
// every backend.
#pragma once

#include <array>
#include <initializer_list>
#include <optional>

#include "frontend/nn.h"

namespace kiln {

/// A pair of sizes (height, width) given as one number for both or as {h, w},
/// as libtorch's ExpandingArray<2>.
class ExpandingArray2 {
 public:
  ExpandingArray2(int64_t v) : v_{v, v} {}  // NOLINT: implicit, as libtorch
  ExpandingArray2(std::initializer_list<int64_t> v);
  int64_t operator[](size_t i) const { return v_[i]; }
  std::string str() const;

 private:
  std::array<int64_t, 2> v_;
};

/// 2-D cross-correlation of input [N, C, H, W] with weight [O, C / groups, kH,
/// kW], plus bias [O] when defined: [N, O, H', W'] with
/// H' = (H + 2 padding - dilation (kH - 1) - 1) / stride + 1 (likewise W').
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              ExpandingArray2 stride = 1, ExpandingArray2 padding = 0, ExpandingArray2 dilation = 1,
              int64_t groups = 1, KILN_LOC);
/// 1-D cross-correlation of input [N, C, L] (or [C, L]) with weight [O, C /
/// groups, k], plus bias [O] when defined: [N, O, L'] with
/// L' = (L + 2 padding - dilation (k - 1) - 1) / stride + 1 (conv2d over height 1).
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1,
              KILN_LOC);
/// The maximum of each window; stride defaults to the kernel size, padding is
/// -inf. The gradient goes to the window's first maximum, as PyTorch's.
Tensor max_pool2d(const Tensor& input, ExpandingArray2 kernel_size,
                  std::optional<ExpandingArray2> stride = std::nullopt, ExpandingArray2 padding = 0,
                  ExpandingArray2 dilation = 1, bool ceil_mode = false, KILN_LOC);
/// The mean of each window (padding counts as zeros when count_include_pad;
/// positions past the padded input, which ceil_mode may add, never count).
Tensor avg_pool2d(const Tensor& input, ExpandingArray2 kernel_size,
                  std::optional<ExpandingArray2> stride = std::nullopt, ExpandingArray2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true, KILN_LOC);
/// The mean over output_size bins per plane: bin i of n over a dim of size s is
/// [floor(i s / n), ceil((i + 1) s / n)), as PyTorch's.
Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray2 output_size, KILN_LOC);

namespace nn {

namespace functional {
struct Conv2dFuncOptions {
  Conv2dFuncOptions& bias(Tensor v) { bias_ = std::move(v); return *this; }
  Conv2dFuncOptions& stride(ExpandingArray2 v) { stride_ = v; return *this; }
  Conv2dFuncOptions& padding(ExpandingArray2 v) { padding_ = v; return *this; }
  Conv2dFuncOptions& dilation(ExpandingArray2 v) { dilation_ = v; return *this; }
  Conv2dFuncOptions& groups(int64_t v) { groups_ = v; return *this; }
  Tensor bias_;
  ExpandingArray2 stride_ = 1, padding_ = 0, dilation_ = 1;
  int64_t groups_ = 1;
};
struct MaxPool2dFuncOptions {
  MaxPool2dFuncOptions(ExpandingArray2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  MaxPool2dFuncOptions& stride(ExpandingArray2 v) { stride_ = v; return *this; }
  MaxPool2dFuncOptions& padding(ExpandingArray2 v) { padding_ = v; return *this; }
  MaxPool2dFuncOptions& dilation(ExpandingArray2 v) { dilation_ = v; return *this; }
  MaxPool2dFuncOptions& ceil_mode(bool v) { ceil_mode_ = v; return *this; }
  ExpandingArray2 kernel_size_;
  std::optional<ExpandingArray2> stride_;
  ExpandingArray2 padding_ = 0, dilation_ = 1;
  bool ceil_mode_ = false;
};
struct AvgPool2dFuncOptions {
  AvgPool2dFuncOptions(ExpandingArray2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  AvgPool2dFuncOptions& stride(ExpandingArray2 v) { stride_ = v; return *this; }
  AvgPool2dFuncOptions& padding(ExpandingArray2 v) { padding_ = v; return *this; }
  AvgPool2dFuncOptions& ceil_mode(bool v) { ceil_mode_ = v; return *this; }
  AvgPool2dFuncOptions& count_include_pad(bool v) { count_include_pad_ = v; return *this; }
  ExpandingArray2 kernel_size_;
  std::optional<ExpandingArray2> stride_;
  ExpandingArray2 padding_ = 0;
  bool ceil_mode_ = false, count_include_pad_ = true;
};

struct Conv1dFuncOptions {
  KILN_ARG(Tensor, bias);
  KILN_ARG(int64_t, stride) = 1;
  KILN_ARG(int64_t, padding) = 0;
  KILN_ARG(int64_t, dilation) = 1;
  KILN_ARG(int64_t, groups) = 1;
};

Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options = {},
              KILN_LOC);
Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& options = {},
              KILN_LOC);
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options, KILN_LOC);
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options, KILN_LOC);
Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray2 output_size, KILN_LOC);
}  // namespace functional

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  Conv2dOptions& stride(ExpandingArray2 v) { stride_ = v; return *this; }
  Conv2dOptions& padding(ExpandingArray2 v) { padding_ = v; return *this; }
  Conv2dOptions& dilation(ExpandingArray2 v) { dilation_ = v; return *this; }
  Conv2dOptions& groups(int64_t v) { groups_ = v; return *this; }
  Conv2dOptions& bias(bool v) { bias_ = v; return *this; }
  /// How `padding` fills the border (libtorch's kZeros, kReflect, kReplicate,
  /// kCircular): other than zeros, the input is padded so (nn_image.h) and
  /// then convolved without padding, as PyTorch does.
  Conv2dOptions& padding_mode(PadMode v) { padding_mode_ = v; return *this; }
  int64_t in_channels_, out_channels_;
  ExpandingArray2 kernel_size_, stride_ = 1, padding_ = 0, dilation_ = 1;
  int64_t groups_ = 1;
  bool bias_ = true;
  PadMode padding_mode_ = PadMode::Constant;
};
struct Conv1dOptions {
  Conv1dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  KILN_ARG(int64_t, in_channels);
  KILN_ARG(int64_t, out_channels);
  KILN_ARG(int64_t, kernel_size);
  KILN_ARG(int64_t, stride) = 1;
  KILN_ARG(int64_t, padding) = 0;
  KILN_ARG(int64_t, dilation) = 1;
  KILN_ARG(int64_t, groups) = 1;
  KILN_ARG(bool, bias) = true;
  KILN_ARG(PadMode, padding_mode) = PadMode::Constant;
};
using MaxPool2dOptions = functional::MaxPool2dFuncOptions;
using AvgPool2dOptions = functional::AvgPool2dFuncOptions;

/// conv2d with a weight [out, in / groups, kH, kW] and bias [out], both
/// initialised uniform in +-1/sqrt(in / groups * kH * kW), as PyTorch's.
class Conv2dImpl : public Module {
 public:
  explicit Conv2dImpl(const Conv2dOptions& options);
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias;
  Conv2dOptions options;
};
/// conv1d with a weight [out, in / groups, k] and bias [out], both initialised
/// uniform in +-1/sqrt(in / groups * k), as PyTorch's.
class Conv1dImpl : public Module {
 public:
  explicit Conv1dImpl(const Conv1dOptions& options);
  Conv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias;
  Conv1dOptions options;
};
class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : Module("MaxPool2d"), options(options) {}
  /// MaxPool2d(2), as libtorch's: the kernel size alone.
  explicit MaxPool2dImpl(ExpandingArray2 kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  MaxPool2dOptions options;
};
class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : Module("AvgPool2d"), options(options) {}
  explicit AvgPool2dImpl(ExpandingArray2 kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  AvgPool2dOptions options;
};
class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray2 output_size)
      : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  ExpandingArray2 output_size;
};

using Conv2d = ModuleHolder<Conv2dImpl>;
using Conv1d = ModuleHolder<Conv1dImpl>;
using MaxPool2d = ModuleHolder<MaxPool2dImpl>;
using AvgPool2d = ModuleHolder<AvgPool2dImpl>;
using AdaptiveAvgPool2d = ModuleHolder<AdaptiveAvgPool2dImpl>;

}  // namespace nn
}  // namespace kiln
