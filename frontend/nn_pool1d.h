// libtorch's pooling over sequences: max_pool1d, avg_pool1d,
// adaptive_avg_pool1d and adaptive_max_pool1d with their options and the
// modules MaxPool1d, AvgPool1d, AdaptiveAvgPool1d and AdaptiveMaxPool1d.
// Each pools [N, C, L] (or unbatched [C, L]) as its 2-d form pools
// [N, C, 1, L] (frontend/nn_pool1d.cpp), so it runs eagerly, traces and
// differentiates as that does.
#pragma once

#include <optional>
#include <string>

#include "frontend/nn.h"
#include "frontend/nn_conv.h"

namespace kiln::nn {

namespace functional {

struct MaxPool1dFuncOptions {
  MaxPool1dFuncOptions(int64_t kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  KILN_ARG(int64_t, kernel_size);
  /// The kernel size when not given.
  KILN_ARG(std::optional<int64_t>, stride);
  KILN_ARG(int64_t, padding) = 0;
  KILN_ARG(int64_t, dilation) = 1;
  KILN_ARG(bool, ceil_mode) = false;
};
struct AvgPool1dFuncOptions {
  AvgPool1dFuncOptions(int64_t kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  KILN_ARG(int64_t, kernel_size);
  KILN_ARG(std::optional<int64_t>, stride);
  KILN_ARG(int64_t, padding) = 0;
  KILN_ARG(bool, ceil_mode) = false;
  KILN_ARG(bool, count_include_pad) = true;
};

/// The maximum of each window of x [N, C, L] or [C, L] (padding is -inf; the
/// gradient goes to the window's first maximum, as PyTorch's).
Tensor max_pool1d(const Tensor& x, const MaxPool1dFuncOptions& options, KILN_LOC);
/// The mean of each window (padding counts as zeros when count_include_pad).
Tensor avg_pool1d(const Tensor& x, const AvgPool1dFuncOptions& options, KILN_LOC);
/// The mean, or the maximum, over output_size bins of the last dim: bin i of n
/// over a length s is [floor(i s / n), ceil((i + 1) s / n)), as PyTorch's.
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size, KILN_LOC);
Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size, KILN_LOC);

}  // namespace functional

using MaxPool1dOptions = functional::MaxPool1dFuncOptions;
using AvgPool1dOptions = functional::AvgPool1dFuncOptions;
struct AdaptivePool1dOptions {
  AdaptivePool1dOptions(int64_t output_size) : output_size_(output_size) {}  // NOLINT
  KILN_ARG(int64_t, output_size);
};
using AdaptiveAvgPool1dOptions = AdaptivePool1dOptions;
using AdaptiveMaxPool1dOptions = AdaptivePool1dOptions;

class MaxPool1dImpl : public Module {
 public:
  explicit MaxPool1dImpl(const MaxPool1dOptions& options) : Module("MaxPool1d"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  MaxPool1dOptions options;
};
class AvgPool1dImpl : public Module {
 public:
  explicit AvgPool1dImpl(const AvgPool1dOptions& options) : Module("AvgPool1d"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  AvgPool1dOptions options;
};
class AdaptiveAvgPool1dImpl : public Module {
 public:
  explicit AdaptiveAvgPool1dImpl(const AdaptiveAvgPool1dOptions& options)
      : Module("AdaptiveAvgPool1d"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  AdaptiveAvgPool1dOptions options;
};
class AdaptiveMaxPool1dImpl : public Module {
 public:
  explicit AdaptiveMaxPool1dImpl(const AdaptiveMaxPool1dOptions& options)
      : Module("AdaptiveMaxPool1d"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  AdaptiveMaxPool1dOptions options;
};

using MaxPool1d = ModuleHolder<MaxPool1dImpl>;
using AvgPool1d = ModuleHolder<AvgPool1dImpl>;
using AdaptiveAvgPool1d = ModuleHolder<AdaptiveAvgPool1dImpl>;
using AdaptiveMaxPool1d = ModuleHolder<AdaptiveMaxPool1dImpl>;

}  // namespace kiln::nn
