// libtorch's image-shaped layers that nn.h, nn_conv.h and nn_extra.h do not
// have: padding by reflection, replication or wrapping (pad's modes and the
// ReflectionPad, ReplicationPad, ZeroPad2d and ConstantPad modules),
// pixel_shuffle and pixel_unshuffle, and instance normalisation, with their
// options and functional forms. Each is a composite of table ops
// (frontend/nn_image.cpp), so it runs eagerly, traces and differentiates like
// the rest.
#pragma once

#include <array>
#include <initializer_list>
#include <string>
#include <vector>

#include "frontend/nn.h"

namespace kiln::nn {

/// N sizes given as one number for all or as a list of exactly N, as
/// libtorch's ExpandingArray<N> (a pad module's {left, right, top, bottom}).
template <size_t N>
class ExpandingArrayN {
 public:
  ExpandingArrayN(int64_t v) { v_.fill(v); }  // NOLINT: implicit, as libtorch
  ExpandingArrayN(std::initializer_list<int64_t> v) {
    if (v.size() != N)
      throw Error("expected one size or " + std::to_string(N) + ", got " +
                  std::to_string(v.size()));
    std::copy(v.begin(), v.end(), v_.begin());
  }
  std::vector<int64_t> vec() const { return {v_.begin(), v_.end()}; }
  int64_t operator[](size_t i) const { return v_[i]; }

 private:
  std::array<int64_t, N> v_;
};

namespace functional {

/// Pads the last dims: pad = {left, right} for the last dim, then {top,
/// bottom} for the one before, and so on (torch.nn.functional.pad). Reflect
/// needs each pad smaller than its dim; circular, at most its dim; replicate, a
/// dim of at least one element; only constant padding may be negative (a crop).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, PadMode mode, double value = 0.0,
           KILN_LOC);
/// [*, C r^2, H, W] -> [*, C, H r, W r]: each group of r^2 channels becomes an
/// r x r block of pixels (torch.nn.functional.pixel_shuffle).
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor, KILN_LOC);
/// The inverse: [*, C, H r, W r] -> [*, C r^2, H, W].
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor, KILN_LOC);
/// Normalises each plane of x [N, C, ...] (each image's each channel) by its
/// own mean and biased variance when use_input_stats, else by running_mean and
/// running_var [C]; then scales and shifts per channel by weight and bias [C]
/// when given. With use_input_stats and running statistics given, those are
/// updated with the batch's mean of the planes' means and unbiased variances
/// (torch.nn.functional.instance_norm).
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(),
                     const Tensor& running_var = Tensor(), const Tensor& weight = Tensor(),
                     const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5, KILN_LOC);

}  // namespace functional

/// The pad modules' options: {left, right} per padded dim, the last dim first.
template <size_t D>
struct ReflectionPadOptions {
  ReflectionPadOptions(ExpandingArrayN<2 * D> padding) : padding_(padding) {}  // NOLINT
  KILN_ARG(ExpandingArrayN<2 * D>, padding);
};
template <size_t D>
struct ReplicationPadOptions {
  ReplicationPadOptions(ExpandingArrayN<2 * D> padding) : padding_(padding) {}  // NOLINT
  KILN_ARG(ExpandingArrayN<2 * D>, padding);
};
template <size_t D>
struct ConstantPadOptions {
  ConstantPadOptions(ExpandingArrayN<2 * D> padding, double value)
      : padding_(padding), value_(value) {}
  KILN_ARG(ExpandingArrayN<2 * D>, padding);
  KILN_ARG(double, value);
};
struct ZeroPad2dOptions {
  ZeroPad2dOptions(ExpandingArrayN<4> padding) : padding_(padding) {}  // NOLINT
  KILN_ARG(ExpandingArrayN<4>, padding);
};

/// One pad module for every mode and rank: D padded dims of an input with D + 1
/// (unbatched) or D + 2 dims.
template <size_t D>
class PadImpl : public Module {
 public:
  PadImpl(const char* name, PadMode mode, ExpandingArrayN<2 * D> padding, double value)
      : Module(name), mode(mode), padding(padding.vec()), value(value) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  PadMode mode;
  std::vector<int64_t> padding;
  double value;
};

template <size_t D>
class ReflectionPadImpl : public PadImpl<D> {
 public:
  explicit ReflectionPadImpl(ExpandingArrayN<2 * D> padding)
      : PadImpl<D>(kName, PadMode::Reflect, padding, 0.0) {}
  explicit ReflectionPadImpl(const ReflectionPadOptions<D>& o) : ReflectionPadImpl(o.padding()) {}
  static constexpr const char* kName = D == 1 ? "ReflectionPad1d"
                                       : D == 2 ? "ReflectionPad2d"
                                                : "ReflectionPad3d";
};
template <size_t D>
class ReplicationPadImpl : public PadImpl<D> {
 public:
  explicit ReplicationPadImpl(ExpandingArrayN<2 * D> padding)
      : PadImpl<D>(kName, PadMode::Replicate, padding, 0.0) {}
  explicit ReplicationPadImpl(const ReplicationPadOptions<D>& o)
      : ReplicationPadImpl(o.padding()) {}
  static constexpr const char* kName = D == 1 ? "ReplicationPad1d"
                                       : D == 2 ? "ReplicationPad2d"
                                                : "ReplicationPad3d";
};
template <size_t D>
class ConstantPadImpl : public PadImpl<D> {
 public:
  ConstantPadImpl(ExpandingArrayN<2 * D> padding, double value)
      : PadImpl<D>(kName, PadMode::Constant, padding, value) {}
  explicit ConstantPadImpl(const ConstantPadOptions<D>& o)
      : ConstantPadImpl(o.padding(), o.value()) {}
  static constexpr const char* kName = D == 1 ? "ConstantPad1d"
                                       : D == 2 ? "ConstantPad2d"
                                                : "ConstantPad3d";
};
class ZeroPad2dImpl : public PadImpl<2> {
 public:
  explicit ZeroPad2dImpl(ExpandingArrayN<4> padding)
      : PadImpl<2>("ZeroPad2d", PadMode::Constant, padding, 0.0) {}
  explicit ZeroPad2dImpl(const ZeroPad2dOptions& o) : ZeroPad2dImpl(o.padding()) {}
};

struct PixelShuffleOptions {
  PixelShuffleOptions(int64_t upscale_factor) : upscale_factor_(upscale_factor) {}  // NOLINT
  KILN_ARG(int64_t, upscale_factor);
};
struct PixelUnshuffleOptions {
  PixelUnshuffleOptions(int64_t downscale_factor)  // NOLINT: implicit, as libtorch
      : downscale_factor_(downscale_factor) {}
  KILN_ARG(int64_t, downscale_factor);
};
class PixelShuffleImpl : public Module {
 public:
  explicit PixelShuffleImpl(const PixelShuffleOptions& options)
      : Module("PixelShuffle"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  PixelShuffleOptions options;
};
class PixelUnshuffleImpl : public Module {
 public:
  explicit PixelUnshuffleImpl(const PixelUnshuffleOptions& options)
      : Module("PixelUnshuffle"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  PixelUnshuffleOptions options;
};

/// InstanceNorm's options: libtorch's defaults, no affine weight and bias and
/// no running statistics.
struct InstanceNormOptions {
  InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  KILN_ARG(int64_t, num_features);
  KILN_ARG(double, eps) = 1e-5;
  KILN_ARG(double, momentum) = 0.1;
  KILN_ARG(bool, affine) = false;
  KILN_ARG(bool, track_running_stats) = false;
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;
using InstanceNorm3dOptions = InstanceNormOptions;

/// InstanceNorm1d ([N, C, L] or unbatched [C, L]), 2d and 3d: per image and
/// channel; with track_running_stats, evaluation uses the running statistics.
template <size_t D>
class InstanceNormImpl : public Module {
 public:
  explicit InstanceNormImpl(const InstanceNormOptions& options);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  InstanceNormOptions options;
  Tensor weight, bias, running_mean, running_var;
};

using ReflectionPad1dOptions = ReflectionPadOptions<1>;
using ReflectionPad2dOptions = ReflectionPadOptions<2>;
using ReflectionPad3dOptions = ReflectionPadOptions<3>;
using ReplicationPad1dOptions = ReplicationPadOptions<1>;
using ReplicationPad2dOptions = ReplicationPadOptions<2>;
using ReplicationPad3dOptions = ReplicationPadOptions<3>;
using ConstantPad1dOptions = ConstantPadOptions<1>;
using ConstantPad2dOptions = ConstantPadOptions<2>;
using ConstantPad3dOptions = ConstantPadOptions<3>;
using ReflectionPad1dImpl = ReflectionPadImpl<1>;
using ReflectionPad2dImpl = ReflectionPadImpl<2>;
using ReflectionPad3dImpl = ReflectionPadImpl<3>;
using ReplicationPad1dImpl = ReplicationPadImpl<1>;
using ReplicationPad2dImpl = ReplicationPadImpl<2>;
using ReplicationPad3dImpl = ReplicationPadImpl<3>;
using ConstantPad1dImpl = ConstantPadImpl<1>;
using ConstantPad2dImpl = ConstantPadImpl<2>;
using ConstantPad3dImpl = ConstantPadImpl<3>;
using InstanceNorm1dImpl = InstanceNormImpl<1>;
using InstanceNorm2dImpl = InstanceNormImpl<2>;
using InstanceNorm3dImpl = InstanceNormImpl<3>;

using ReflectionPad1d = ModuleHolder<ReflectionPadImpl<1>>;
using ReflectionPad2d = ModuleHolder<ReflectionPadImpl<2>>;
using ReflectionPad3d = ModuleHolder<ReflectionPadImpl<3>>;
using ReplicationPad1d = ModuleHolder<ReplicationPadImpl<1>>;
using ReplicationPad2d = ModuleHolder<ReplicationPadImpl<2>>;
using ReplicationPad3d = ModuleHolder<ReplicationPadImpl<3>>;
using ConstantPad1d = ModuleHolder<ConstantPadImpl<1>>;
using ConstantPad2d = ModuleHolder<ConstantPadImpl<2>>;
using ConstantPad3d = ModuleHolder<ConstantPadImpl<3>>;
using ZeroPad2d = ModuleHolder<ZeroPad2dImpl>;
using PixelShuffle = ModuleHolder<PixelShuffleImpl>;
using PixelUnshuffle = ModuleHolder<PixelUnshuffleImpl>;
using InstanceNorm1d = ModuleHolder<InstanceNormImpl<1>>;
using InstanceNorm2d = ModuleHolder<InstanceNormImpl<2>>;
using InstanceNorm3d = ModuleHolder<InstanceNormImpl<3>>;

}  // namespace kiln::nn
