// Padding modes, pixel shuffles and instance normalisation
// (frontend/nn_image.h). Composites of table ops:
//   pad (reflect)    [flip(x[1 : 1 + left]), x, flip(x[n - 1 - right : n - 1])]
//   pad (replicate)  [x[0] expanded left times, x, x[n - 1] expanded right times]
//   pad (circular)   [x[n - left : n], x, x[0 : right]]
//   pixel_shuffle    reshape [B, C, r, r, H, W], permute to [B, C, H, r, W, r], reshape
//   instance_norm    batch_norm's body (nn.h: norm_per_channel) over the spatial dims
// so each differentiates through narrow, flip, expand, cat and the reductions.
#include "frontend/nn_image.h"

#include <sstream>

#include "frontend/dispatch.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

using detail::here;

const char* pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::Constant:
      return "constant";
    case PadMode::Reflect:
      return "reflect";
    case PadMode::Replicate:
      return "replicate";
    case PadMode::Circular:
      return "circular";
  }
  return "?";
}

namespace functional {

namespace {

// x padded along `dim` by `low` and `high` elements in a non-constant mode.
Tensor pad_dim_mode(const Tensor& x, int64_t dim, int64_t low, int64_t high, PadMode mode,
                    Loc l) {
  const int64_t n = x.size(dim);
  const std::string what = std::string("pad: ") + pad_mode_name(mode) + " padding of " +
                           std::to_string(low) + " and " + std::to_string(high) + " for dim " +
                           std::to_string(dim) + " of size " + std::to_string(n);
  if (low < 0 || high < 0) throw Error(what + ": only constant padding may be negative", here(l));
  if (mode == PadMode::Reflect && (low >= n || high >= n))
    throw Error(what + ": reflect padding must be smaller than the dim", here(l));
  if (mode == PadMode::Circular && (low > n || high > n))
    throw Error(what + ": circular padding must be at most the dim", here(l));
  if (mode == PadMode::Replicate && n == 0)
    throw Error(what + ": an empty dim has no edge to replicate", here(l));
  if (low == 0 && high == 0) return x;
  std::vector<Tensor> parts;
  auto edge = [&](int64_t start, int64_t count) {
    Shape s = x.sizes();
    s[size_t(dim)] = count;
    return x.narrow(dim, start, 1, l).expand(s, l);
  };
  if (low > 0) {
    switch (mode) {
      case PadMode::Reflect:
        parts.push_back(x.narrow(dim, 1, low, l).flip({dim}, l));
        break;
      case PadMode::Replicate:
        parts.push_back(edge(0, low));
        break;
      default:
        parts.push_back(x.narrow(dim, n - low, low, l));
    }
  }
  parts.push_back(x);
  if (high > 0) {
    switch (mode) {
      case PadMode::Reflect:
        parts.push_back(x.narrow(dim, n - 1 - high, high, l).flip({dim}, l));
        break;
      case PadMode::Replicate:
        parts.push_back(edge(n - 1, high));
        break;
      default:
        parts.push_back(x.narrow(dim, 0, high, l));
    }
  }
  return cat(parts, dim, l);
}

void check_factor(const Tensor& x, int64_t r, const char* op, Loc l) {
  if (r <= 0)
    throw Error(std::string(op) + ": expected a factor > 0, got " + std::to_string(r), here(l));
  if (x.dim() < 3)
    throw Error(std::string(op) + ": expected an input [*, C, H, W], got " + shape_str(x.sizes()),
                here(l));
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, PadMode mode, double value, Loc l) {
  if (mode == PadMode::Constant) return functional::pad(x, pad, value, l);
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size() / 2) > x.dim())
    throw Error("pad: expected an even number of sizes, two per padded dim (at most " +
                    std::to_string(2 * x.dim()) + "), got " + std::to_string(pad.size()),
                here(l));
  Tensor y = x;
  for (size_t i = 0; i < pad.size() / 2; ++i)
    y = pad_dim_mode(y, x.dim() - 1 - static_cast<int64_t>(i), pad[2 * i], pad[2 * i + 1], mode,
                     l);
  return y;
}

Tensor pixel_shuffle(const Tensor& x, int64_t r, Loc l) {
  check_factor(x, r, "pixel_shuffle", l);
  const int64_t d = x.dim(), c = x.size(d - 3), h = x.size(d - 2), w = x.size(d - 1);
  if (c % (r * r) != 0)
    throw Error("pixel_shuffle: expected the " + std::to_string(c) +
                    " channels to be divisible by the upscale factor squared (" +
                    std::to_string(r * r) + ")",
                here(l));
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  Tensor y = x.reshape({-1, c / (r * r), r, r, h, w}, l).permute({0, 1, 4, 2, 5, 3}, l);
  Shape out = lead;
  out.insert(out.end(), {c / (r * r), h * r, w * r});
  return y.reshape(out, l);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r, Loc l) {
  check_factor(x, r, "pixel_unshuffle", l);
  const int64_t d = x.dim(), c = x.size(d - 3), h = x.size(d - 2), w = x.size(d - 1);
  if (h % r != 0 || w % r != 0)
    throw Error("pixel_unshuffle: expected height and width divisible by the downscale factor " +
                    std::to_string(r) + ", got " + shape_str(x.sizes()),
                here(l));
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  Tensor y = x.reshape({-1, c, h / r, r, w / r, r}, l).permute({0, 1, 3, 5, 2, 4}, l);
  Shape out = lead;
  out.insert(out.end(), {c * r * r, h / r, w / r});
  return y.reshape(out, l);
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps, Loc l) {
  if (!is_floating(x.dtype()))
    throw Error(std::string("instance_norm: expected a floating tensor, got ") +
                    dtype_name(x.dtype()),
                here(l));
  if (x.dim() < 3)
    throw Error("instance_norm: expected an input [N, C, ...] with at least one spatial dim, got " +
                    shape_str(x.sizes()),
                here(l));
  const int64_t c = x.size(1);
  for (const Tensor* p : {&running_mean, &running_var, &weight, &bias})
    if (p->defined() && p->sizes() != Shape{c})
      throw Error("instance_norm: expected per-channel tensors of shape [" + std::to_string(c) +
                      "], got " + shape_str(p->sizes()),
                  here(l));
  std::vector<int64_t> spatial;
  int64_t count = 1;
  for (int64_t i = 2; i < x.dim(); ++i) {
    spatial.push_back(i);
    count *= x.size(i);
  }
  if (use_input_stats && count <= 1)
    throw Error("instance_norm: expected more than 1 spatial element per channel, got input " +
                    shape_str(x.sizes()),
                here(l));
  return norm_per_channel("instance_norm", x, spatial, running_mean, running_var, weight,
                                  bias, use_input_stats, momentum, eps, l);
}

}  // namespace functional

template <size_t D>
Tensor PadImpl<D>::forward(const Tensor& x, Loc l) {
  const int64_t d = static_cast<int64_t>(D);
  if (x.dim() != d + 1 && x.dim() != d + 2)
    throw Error(this->name_ + ": expected an input of " + std::to_string(d + 1) + " or " +
                    std::to_string(d + 2) + " dims, got " + shape_str(x.sizes()),
                here(l));
  return functional::pad(x, padding, mode, value, l);
}

template <size_t D>
std::string PadImpl<D>::repr() const {
  std::ostringstream s;
  s << this->name_ << "((";
  for (size_t i = 0; i < padding.size(); ++i) s << (i ? ", " : "") << padding[i];
  s << ")";
  if (mode == PadMode::Constant && value != 0) s << ", value=" << value;
  s << ")";
  return s.str();
}

template class PadImpl<1>;
template class PadImpl<2>;
template class PadImpl<3>;

Tensor PixelShuffleImpl::forward(const Tensor& x, Loc l) {
  return functional::pixel_shuffle(x, options.upscale_factor(), l);
}
std::string PixelShuffleImpl::repr() const {
  return "PixelShuffle(upscale_factor=" + std::to_string(options.upscale_factor()) + ")";
}
Tensor PixelUnshuffleImpl::forward(const Tensor& x, Loc l) {
  return functional::pixel_unshuffle(x, options.downscale_factor(), l);
}
std::string PixelUnshuffleImpl::repr() const {
  return "PixelUnshuffle(downscale_factor=" + std::to_string(options.downscale_factor()) + ")";
}

template <size_t D>
InstanceNormImpl<D>::InstanceNormImpl(const InstanceNormOptions& o)
    : Module(D == 1 ? "InstanceNorm1d" : D == 2 ? "InstanceNorm2d" : "InstanceNorm3d"),
      options(o) {
  const int64_t n = o.num_features();
  if (n <= 0) throw Error(name_ + ": expected num_features > 0, got " + std::to_string(n));
  if (o.affine()) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  if (o.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
  }
}

template <size_t D>
Tensor InstanceNormImpl<D>::forward(const Tensor& x, Loc l) {
  const int64_t d = static_cast<int64_t>(D), c = options.num_features();
  const bool batched = x.dim() == d + 2;
  if ((!batched && x.dim() != d + 1) || x.size(batched ? 1 : 0) != c)
    throw Error(name_ + ": expected an input [N, " + std::to_string(c) + ", ...] of " +
                    std::to_string(d + 2) + " dims or an unbatched one of " +
                    std::to_string(d + 1) + ", got " + shape_str(x.sizes()),
                here(l));
  const Tensor in = batched ? x : x.unsqueeze(0, l);
  Tensor y = functional::instance_norm(in, running_mean, running_var, weight, bias,
                                       training_for_forward() || !running_mean.defined(),
                                       options.momentum(), options.eps(), l);
  return batched ? y : y.squeeze(0, l);
}

template <size_t D>
std::string InstanceNormImpl<D>::repr() const {
  std::ostringstream s;
  s << name_ << "(" << options.num_features() << ", eps=" << options.eps()
    << ", momentum=" << options.momentum() << ", affine=" << (options.affine() ? "true" : "false")
    << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
  return s.str();
}

template class InstanceNormImpl<1>;
template class InstanceNormImpl<2>;
template class InstanceNormImpl<3>;

}  // namespace kiln::nn
