// The modules and functions of nn_parity.h, as composites of table ops.
//
//   conv_transpose2d  conv2d over the input spread out by the stride (pad with
//                     interior padding stride - 1), padded by dilation (k - 1) -
//                     padding on each side (plus output_padding after; a
//                     negative amount crops), with the weight's spatial dims
//                     reversed and its in/out channels swapped per group
//   dropout2d         a [N, C, 1, 1] keep-mask from the generator, broadcast
//   the losses        elementwise formulas, then apply_reduction
#include "frontend/nn_parity.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"

namespace kiln {

using detail::here;

namespace {

// Dim `dim` padded by `low` before and `high` after, with `interior` zeros between
// elements; a negative low or high crops instead.
Tensor pad_dim(const Tensor& x, int64_t dim, int64_t low, int64_t high, int64_t interior,
               double value, Loc l) {
  Tensor y = x;
  if (low < 0 || high < 0) {
    // Crop first where asked (after spreading, so interior padding counts).
    if (interior > 0) {
      y = pad_dim(y, dim, 0, 0, interior, value, l);
      interior = 0;
    }
    const int64_t start = std::max<int64_t>(0, -low),
                  stop = y.size(dim) - std::max<int64_t>(0, -high);
    if (stop < start)
      throw Error("pad: cropping " + std::to_string(-low) + " and " + std::to_string(-high) +
                      " from a dim of size " + std::to_string(y.size(dim)),
                  here(l));
    y = y.narrow(dim, start, stop - start, l);
    low = std::max<int64_t>(0, low);
    high = std::max<int64_t>(0, high);
  }
  if (low == 0 && high == 0 && interior == 0) return y;
  Tensor padded = detail::apply(OpKind::pad, {y},
                                Attrs{{AttrKey::dim, dim},
                                      {AttrKey::low, low},
                                      {AttrKey::high, high},
                                      {AttrKey::interior, interior}},
                                here(l));
  if (value == 0) return padded;
  // The padding's value: the same pad of ones marks the original elements.
  Tensor ones_like_y = ones(y.sizes(), TensorOptions(y.dtype()).device(y.device()), l);
  Tensor mask = detail::apply(OpKind::pad, {ones_like_y},
                              Attrs{{AttrKey::dim, dim},
                                    {AttrKey::low, low},
                                    {AttrKey::high, high},
                                    {AttrKey::interior, interior}},
                              here(l));
  return where(mask.to(kBool, l), padded,
               full({}, value, TensorOptions(y.dtype()).device(y.device()), l), l);
}

// x with dim `dim` in reverse order (a kernel's taps: a few slices).
Tensor flip_dim(const Tensor& x, int64_t dim, Loc l) {
  const int64_t n = x.size(dim);
  if (n == 1) return x;
  std::vector<Tensor> parts;
  for (int64_t i = n - 1; i >= 0; --i) parts.push_back(x.narrow(dim, i, 1, l));
  return cat(parts, dim, l);
}

void check_positive(const char* op, const char* what, ExpandingArray2 v, int64_t min, Loc l) {
  if (v[0] < min || v[1] < min)
    throw Error(
        std::string(op) + ": expected " + what + " >= " + std::to_string(min) + ", got " + v.str(),
        here(l));
}

}  // namespace

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        ExpandingArray2 stride, ExpandingArray2 padding,
                        ExpandingArray2 output_padding, int64_t groups, ExpandingArray2 dilation,
                        Loc l) {
  const char* op = "conv_transpose2d";
  if (input.dim() == 3)
    return conv_transpose2d(input.unsqueeze(0, l), weight, bias, stride, padding, output_padding,
                            groups, dilation, l)
        .squeeze(0, l);
  if (input.dim() != 4)
    throw Error(std::string(op) + ": expected an input [N, C, H, W] or [C, H, W], got " +
                    shape_str(input.sizes()),
                here(l));
  if (weight.dim() != 4)
    throw Error(std::string(op) + ": expected a weight [C_in, C_out / groups, kH, kW], got " +
                    shape_str(weight.sizes()),
                here(l));
  check_positive(op, "stride", stride, 1, l);
  check_positive(op, "dilation", dilation, 1, l);
  check_positive(op, "padding", padding, 0, l);
  check_positive(op, "output_padding", output_padding, 0, l);
  const int64_t cin = input.size(1);
  if (groups < 1 || cin % groups != 0 || weight.size(0) != cin)
    throw Error(std::string(op) + ": input of " + std::to_string(cin) + " channels, weight " +
                    shape_str(weight.sizes()) + ", groups " + std::to_string(groups) +
                    " (expected weight dim 0 = input channels, divisible by groups)",
                here(l));
  for (int i = 0; i < 2; ++i)
    if (output_padding[i] >= std::max(stride[i], dilation[i]))
      throw Error(std::string(op) + ": output_padding " + output_padding.str() +
                      " must be smaller than stride " + stride.str() + " or dilation " +
                      dilation.str(),
                  here(l));
  const int64_t kh = weight.size(2), kw = weight.size(3), cout_g = weight.size(1);
  // The weight as conv2d's: [g, in/g, out/g, kh, kw] -> [out, in/g, kh, kw], taps reversed.
  Tensor w = weight.reshape({groups, cin / groups, cout_g, kh, kw}, l)
                 .transpose(1, 2, l)
                 .reshape({groups * cout_g, cin / groups, kh, kw}, l);
  w = flip_dim(flip_dim(w, 2, l), 3, l);
  Tensor x = input;
  const int64_t k[2] = {kh, kw};
  for (int i = 0; i < 2; ++i) {
    const int64_t edge = dilation[i] * (k[i] - 1) - padding[i];
    x = pad_dim(x, 2 + i, edge, edge + output_padding[i], stride[i] - 1, 0.0, l);
  }
  return conv2d(x, w, bias, 1, 0, dilation, groups, l);
}

namespace nn {
namespace functional {

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose2dFuncOptions& o, Loc l) {
  return kiln::conv_transpose2d(input, weight, o.bias(), o.stride(), o.padding(),
                                o.output_padding(), o.groups(), o.dilation(), l);
}

Tensor dropout2d(const Tensor& x, double p, bool training, Loc l) {
  if (!(p >= 0 && p <= 1))
    throw Error("dropout2d: expected a probability in [0, 1], got " + std::to_string(p), here(l));
  if (x.dim() != 3 && x.dim() != 4)
    throw Error(
        "dropout2d: expected an input [N, C, H, W] or [C, H, W], got " + shape_str(x.sizes()),
        here(l));
  if (!training || p == 0) return x;
  if (p == 1) return x.mul(Scalar(0.0), l);
  Shape mask_shape = x.sizes();
  for (size_t d = mask_shape.size() - 2; d < mask_shape.size(); ++d) mask_shape[d] = 1;
  Tensor keep = rand(mask_shape, TensorOptions(kFloat32).device(x.device()), l).ge(Scalar(p), l);
  return x.mul(keep.to(x.dtype(), l), l).mul(Scalar(1.0 / (1.0 - p)), l);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, Reduction r,
                int64_t ignore_index, Loc l) {
  if (!weight.defined()) return nll_loss(log_probs, target, r, ignore_index, l);
  if (log_probs.dim() != 2)
    throw Error("nll_loss: expected log-probabilities [N, C], got " + shape_str(log_probs.sizes()),
                here(l));
  if (weight.sizes() != Shape{log_probs.size(1)})
    throw Error("nll_loss: expected a weight of shape [" + std::to_string(log_probs.size(1)) +
                    "], got " + shape_str(weight.sizes()),
                here(l));
  if (target.dim() != 1 || target.size(0) != log_probs.size(0))
    throw Error("nll_loss: expected class indices of shape [" + std::to_string(log_probs.size(0)) +
                    "], got " + shape_str(target.sizes()),
                here(l));
  const TensorOptions io = TensorOptions(target.dtype()).device(target.device());
  Tensor valid = target.ne(Scalar(static_cast<long long>(ignore_index)), l);
  Tensor safe = where(valid, target, zeros({}, io, l), l);
  Tensor idx = detail::checked_indices(safe, log_probs.size(1), "nll_loss", l);
  Tensor picked = log_probs.gather(1, idx.unsqueeze(1, l), l).squeeze(1, l);
  Tensor w = where(valid, weight.index_select(0, idx, l),
                   zeros({}, TensorOptions(weight.dtype()).device(weight.device()), l), l);
  Tensor per = picked.neg(l).mul(w, l);
  if (r == Reduction::Mean) return per.sum(l).div(w.sum(l), l);
  return apply_reduction(per, r, l);
}

Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, const Tensor& weight,
                            Reduction r, Loc l) {
  if (!weight.defined()) return binary_cross_entropy(probs, target, r, l);
  return apply_reduction(binary_cross_entropy(probs, target, Reduction::None, l).mul(weight, l), r,
                         l);
}

namespace {

// The loss quadratic below `beta` and linear above it, in |input - target|:
// smooth L1 (slope 1 above beta) or, `huber`, Huber (slope beta: beta times smooth L1).
Tensor quadratic_then_linear(const char* who, const Tensor& input, const Tensor& target,
                             Reduction r, double beta, bool huber, Loc l) {
  if (input.sizes() != target.sizes())
    throw Error(std::string(who) + ": input shape " + shape_str(input.sizes()) +
                    " and target shape " + shape_str(target.sizes()) +
                    " differ (expected the same shape)",
                here(l));
  const char* name = huber ? "delta" : "beta";
  if (huber ? !(beta > 0) : !(beta >= 0))
    throw Error(std::string(who) + ": expected " + name + (huber ? " > 0" : " >= 0") + ", got " +
                    std::to_string(beta),
                here(l));
  Tensor d = input.sub(target, 1, l).abs(l);
  if (beta == 0) return apply_reduction(d, r, l);
  Tensor quad = d.mul(d, l).mul(Scalar(huber ? 0.5 : 0.5 / beta), l);
  Tensor lin = d.sub(Scalar(0.5 * beta), l);
  if (huber) lin = lin.mul(Scalar(beta), l);
  return apply_reduction(where(d.lt(Scalar(beta), l), quad, lin, l), r, l);
}

}  // namespace

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction r, double beta, Loc l) {
  return quadratic_then_linear("smooth_l1_loss", input, target, r, beta, false, l);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction r, double delta, Loc l) {
  return quadratic_then_linear("huber_loss", input, target, r, delta, true, l);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction r, Loc l) {
  if (input.sizes() != target.sizes())
    throw Error("l1_loss: input shape " + shape_str(input.sizes()) + " and target shape " +
                    shape_str(target.sizes()) + " differ (expected the same shape)",
                here(l));
  return apply_reduction(input.sub(target, 1, l).abs(l), r, l);
}

Tensor elu(const Tensor& x, double alpha, Loc l) {
  return where(x.gt(Scalar(0.0), l), x, x.expm1(l).mul(Scalar(alpha), l), l);
}

Tensor selu(const Tensor& x, Loc l) {
  constexpr double alpha = 1.6732632423543772848170429916717;
  constexpr double scale = 1.0507009873554804934193349852946;
  return elu(x, alpha, l).mul(Scalar(scale), l);
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val, Loc l) {
  // PyTorch's gradient: none at either bound (clamp's flows there).
  return detail::clamp_bounds(x, Scalar(min_val), Scalar(max_val), /*grad_at_bounds=*/false, l);
}
Tensor relu6(const Tensor& x, Loc l) {
  return hardtanh(x, 0.0, 6.0, l);
}

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps, Loc l) {
  return x.div(x.norm(p, dim, true, l).clamp_min(Scalar(eps), l), l);
}

namespace {

// One spatial dim of interpolate: `in` elements to `out`, `scale` = in / out, or
// 1 / scale_factor when one was given (PyTorch's source-index rule).
Tensor interpolate_dim(const Tensor& x, int64_t dim, int64_t out, double scale, bool linear,
                       bool align_corners, Loc l) {
  const int64_t in = x.size(dim);
  const TensorOptions index_options = TensorOptions(kInt64).device(x.device());
  std::vector<double> i0(static_cast<size_t>(out)), i1(i0.size());  // indices, exact as doubles
  std::vector<double> w1(i0.size());
  for (int64_t o = 0; o < out; ++o) {
    const size_t k = static_cast<size_t>(o);
    if (!linear) {
      i0[k] = std::min(std::floor(static_cast<double>(o) * scale), static_cast<double>(in - 1));
      continue;
    }
    double src = align_corners ? (out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) /
                                                static_cast<double>(out - 1)
                                          : 0.0)
                               : std::max(0.0, scale * (static_cast<double>(o) + 0.5) - 0.5);
    i0[k] = std::min(std::floor(src), static_cast<double>(in - 1));
    i1[k] = i0[k] + (i0[k] < static_cast<double>(in - 1) ? 1 : 0);
    w1[k] = src - i0[k];
  }
  Tensor a = x.index_select(dim, from_vector(i0, {out}, index_options), l);
  if (!linear) return a;
  Tensor b = x.index_select(dim, from_vector(i1, {out}, index_options), l);
  Shape wshape(static_cast<size_t>(x.dim()), 1);
  wshape[static_cast<size_t>(dim)] = out;
  std::vector<double> w0(w1.size());
  for (size_t k = 0; k < w1.size(); ++k) w0[k] = 1.0 - w1[k];
  const TensorOptions wo = TensorOptions(x.dtype()).device(x.device());
  return a.mul(from_vector(w0, wshape, wo), l).add(b.mul(from_vector(w1, wshape, wo), l), 1, l);
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o, Loc l) {
  const int64_t spatial = x.dim() - 2;
  const char* mode = o.mode() == InterpolateMode::Nearest  ? "nearest"
                     : o.mode() == InterpolateMode::Linear ? "linear"
                                                           : "bilinear";
  const int64_t want = o.mode() == InterpolateMode::Linear     ? 1
                       : o.mode() == InterpolateMode::Bilinear ? 2
                                                               : spatial;
  if (spatial < 1 || spatial > 3 || spatial != want)
    throw Error(std::string("interpolate: mode ") + mode + " expects a " +
                    (o.mode() == InterpolateMode::Nearest ? std::string("3-D, 4-D or 5-D")
                                                          : std::to_string(want + 2) + "-D") +
                    " input [N, C, spatial...], got " + shape_str(x.sizes()),
                here(l));
  if (o.size().empty() == o.scale_factor().empty())
    throw Error("interpolate: expected either size or scale_factor, got " +
                    std::string(o.size().empty() ? "neither" : "both"),
                here(l));
  if (o.mode() == InterpolateMode::Nearest && o.align_corners().has_value())
    throw Error("interpolate: align_corners only applies to the linear modes (got mode nearest)",
                here(l));
  const std::vector<int64_t>& size = o.size();
  const std::vector<double>& factor = o.scale_factor();
  const size_t given = size.empty() ? factor.size() : size.size();
  if (given != 1 && given != static_cast<size_t>(spatial))
    throw Error("interpolate: expected 1 or " + std::to_string(spatial) + " " +
                    (size.empty() ? "scale factors" : "sizes") + ", got " + std::to_string(given),
                here(l));
  Tensor y = x;
  for (int64_t d = 0; d < spatial; ++d) {
    const size_t k = given == 1 ? 0 : static_cast<size_t>(d);
    const int64_t dim = 2 + d, in = x.size(dim);
    int64_t out;
    double scale;
    if (!size.empty()) {
      out = size[k];
      scale = out > 0 ? static_cast<double>(in) / static_cast<double>(out) : 0.0;
    } else {
      if (!(factor[k] > 0))
        throw Error(
            "interpolate: expected positive scale factors, got " + std::to_string(factor[k]),
            here(l));
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * factor[k]));
      scale = 1.0 / factor[k];
    }
    if (out <= 0)
      throw Error("interpolate: output size " + std::to_string(out) + " along dim " +
                      std::to_string(dim) + " (expected at least 1)",
                  here(l));
    y = interpolate_dim(y, dim, out, scale, o.mode() != InterpolateMode::Nearest,
                        o.align_corners().value_or(false), l);
  }
  return y;
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, double value, Loc l) {
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size() / 2) > x.dim())
    throw Error("pad: expected an even number of sizes, two per padded dim (at most " +
                    std::to_string(2 * x.dim()) + "), got " + std::to_string(pad.size()),
                here(l));
  Tensor y = x;
  for (size_t i = 0; i < pad.size() / 2; ++i)
    y = pad_dim(y, x.dim() - 1 - static_cast<int64_t>(i), pad[2 * i], pad[2 * i + 1], 0, value, l);
  return y;
}

}  // namespace functional

ConvTranspose2dImpl::ConvTranspose2dImpl(const ConvTranspose2dOptions& o)
    : Module("ConvTranspose2d"), options(o) {
  const int64_t in = o.in_channels(), out = o.out_channels(), g = o.groups();
  if (in <= 0 || out <= 0 || g <= 0 || in % g != 0 || out % g != 0)
    throw Error("ConvTranspose2d(" + std::to_string(in) + ", " + std::to_string(out) + ", groups=" +
                std::to_string(g) + "): expected positive channel counts divisible by groups");
  const int64_t kh = o.kernel_size()[0], kw = o.kernel_size()[1];
  if (kh <= 0 || kw <= 0)
    throw Error("ConvTranspose2d: expected kernel sizes > 0, got " + o.kernel_size().str());
  const double bound = 1.0 / std::sqrt(static_cast<double>(out / g * kh * kw));
  NoGradGuard no_grad;
  weight = register_parameter("weight", rand({in, out / g, kh, kw}) * (2 * bound) - bound);
  if (o.bias()) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
}

Tensor ConvTranspose2dImpl::forward(const Tensor& x, Loc l) {
  return kiln::conv_transpose2d(x, weight, bias, options.stride(), options.padding(),
                                options.output_padding(), options.groups(), options.dilation(), l);
}

std::string ConvTranspose2dImpl::repr() const {
  std::ostringstream s;
  s << "ConvTranspose2d(" << options.in_channels() << ", " << options.out_channels()
    << ", kernel_size=" << options.kernel_size().str() << ", stride=" << options.stride().str()
    << ")";
  return s.str();
}

std::string LeakyReLUImpl::repr() const {
  std::ostringstream s;
  s << "LeakyReLU(negative_slope=" << options.negative_slope() << ")";
  return s.str();
}

Dropout2dImpl::Dropout2dImpl(const DropoutOptions& o) : Module("Dropout2d"), options(o) {
  if (!(o.p() >= 0 && o.p() <= 1))
    throw Error("Dropout2d: expected a probability in [0, 1], got " + std::to_string(o.p()));
}

std::string Dropout2dImpl::repr() const {
  std::ostringstream s;
  s << "Dropout2d(p=" << options.p() << ")";
  return s.str();
}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target, Loc l) {
  if (!options.weight().defined())
    return functional::binary_cross_entropy_with_logits(input, target, options.reduction(),
                                                        options.pos_weight(), l);
  Tensor per = functional::binary_cross_entropy_with_logits(input, target, Reduction::None,
                                                            options.pos_weight(), l);
  return apply_reduction(per.mul(options.weight(), l), options.reduction(), l);
}

namespace init {

namespace {

std::pair<double, double> fans(const Tensor& t) {
  if (t.dim() < 2)
    throw Error("nn::init: fan in and fan out need a tensor of 2 or more dims, got " +
                shape_str(t.sizes()));
  double field = 1;
  for (int64_t d = 2; d < t.dim(); ++d) field *= static_cast<double>(t.size(d));
  return {static_cast<double>(t.size(1)) * field, static_cast<double>(t.size(0)) * field};
}

Tensor fill(Tensor t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
  return t;
}

TensorOptions like(const Tensor& t) {
  return TensorOptions(t.dtype()).device(t.device());
}

}  // namespace

double calculate_gain(Nonlinearity n, double param) {
  switch (n) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv2D:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU:
      return std::sqrt(2.0 / (1 + param * param));
  }
  return 1.0;
}

Tensor uniform_(Tensor t, double low, double high) {
  return fill(t, rand(t.sizes(), like(t)).mul(Scalar(high - low)).add(Scalar(low)));
}
Tensor normal_(Tensor t, double mean, double std) {
  return fill(t, randn(t.sizes(), like(t)).mul(Scalar(std)).add(Scalar(mean)));
}
Tensor constant_(Tensor t, Scalar value) {
  return fill(t, full({}, value, like(t)));
}
Tensor zeros_(Tensor t) {
  return constant_(std::move(t), 0);
}
Tensor ones_(Tensor t) {
  return constant_(std::move(t), 1);
}

Tensor xavier_uniform_(Tensor t, double gain) {
  auto [fan_in, fan_out] = fans(t);
  const double a = gain * std::sqrt(6.0 / (fan_in + fan_out));
  return uniform_(std::move(t), -a, a);
}
Tensor xavier_normal_(Tensor t, double gain) {
  auto [fan_in, fan_out] = fans(t);
  return normal_(std::move(t), 0, gain * std::sqrt(2.0 / (fan_in + fan_out)));
}
Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity n) {
  auto [fan_in, fan_out] = fans(t);
  const double std = calculate_gain(n, a) / std::sqrt(mode == FanMode::FanIn ? fan_in : fan_out);
  const double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -bound, bound);
}
Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity n) {
  auto [fan_in, fan_out] = fans(t);
  return normal_(std::move(t), 0,
                 calculate_gain(n, a) / std::sqrt(mode == FanMode::FanIn ? fan_in : fan_out));
}

Tensor eye_(Tensor t) {
  if (t.dim() != 2)
    throw Error("nn::init::eye_: expected a 2-dim tensor, got " + shape_str(t.sizes()));
  const int64_t rows = t.size(0), cols = t.size(1);
  return fill(t, eye(std::max(rows, cols), like(t)).narrow(0, 0, rows).narrow(1, 0, cols));
}

Tensor orthogonal_(Tensor t, double gain) {
  if (t.dim() < 2)
    throw Error("nn::init::orthogonal_: expected a tensor of 2 or more dims, got " +
                shape_str(t.sizes()));
  // PyTorch's rule: the QR factors of a normal [rows, cols] matrix (transposed
  // when wide), Q's columns signed so R's diagonal is positive. Gram-Schmidt
  // (twice, for orthogonality in rounding) gives that Q, in double.
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  std::vector<double> a = randn({n, m}, TensorOptions(kFloat64)).to_vector<double>();  // column j: a[j*m..]
  for (int64_t j = 0; j < n; ++j) {
    double* q = &a[static_cast<size_t>(j * m)];
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        const double* p = &a[static_cast<size_t>(k * m)];
        double dot = 0;
        for (int64_t i = 0; i < m; ++i) dot += p[i] * q[i];
        for (int64_t i = 0; i < m; ++i) q[i] -= dot * p[i];
      }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += q[i] * q[i];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < m; ++i) q[i] /= norm;
  }
  // a holds Q^T [n, m]: the rows of t when it is wide, its columns when tall.
  Tensor q = tensor(a, TensorOptions(kFloat64)).reshape({n, m});
  if (rows >= cols) q = q.t();
  return fill(t, q.mul(Scalar(gain)).reshape(t.sizes()).to(t.dtype()).to(t.device()));
}

}  // namespace init

}  // namespace nn
}  // namespace kiln
