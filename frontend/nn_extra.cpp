// GroupNorm, the activation modules, PReLU, Unflatten, AdaptiveMaxPool2d and
// KLDivLoss (frontend/nn_extra.h). Composites of table ops:
//   group_norm           the channels viewed as [N, groups, rest], layer_norm's
//                        statistics over the last dim, then the per-channel affine
//   prelu                where(x > 0, x, weight x)
//   adaptive_max_pool2d  max_pool2d when the output divides the input; else one
//                        narrow and max(dim) per bin, width first, then height
//                        (so a tie goes to the row-major first maximum)
//   kl_div               xlogy(t, t) - t x with the log taken of a safe t
//   cosine_similarity    each input over its clamped norm, multiplied and summed
//   pairwise_distance    norm(x1 - x2 + eps) over the last dim
#include "frontend/nn_extra.h"

#include <sstream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/nn_parity.h"
#include "ir/shape.h"

namespace kiln::nn {

using detail::here;

namespace functional {

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps, Loc l) {
  if (!is_floating(x.dtype()))
    throw Error(std::string("group_norm: expected a floating tensor, got ") + dtype_name(x.dtype()),
                here(l));
  if (x.dim() < 2)
    throw Error("group_norm: expected an input [N, C, ...], got " + shape_str(x.sizes()), here(l));
  const int64_t c = x.size(1);
  if (num_groups <= 0 || c % num_groups != 0)
    throw Error("group_norm: expected the " + std::to_string(c) +
                    " channels to be divisible by num_groups, got num_groups " +
                    std::to_string(num_groups),
                here(l));
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && p->sizes() != Shape{c})
      throw Error("group_norm: expected weight and bias of shape [" + std::to_string(c) +
                      "], got " + shape_str(p->sizes()),
                  here(l));
  Tensor g = x.reshape({x.size(0), num_groups, -1}, l);
  Tensor mu = g.mean({2}, true, l);
  Tensor centered = g.sub(mu, 1, l);
  Tensor var = centered.mul(centered, l).mean({2}, true, l);
  Tensor y = centered.mul(var.add(Scalar(eps), l).rsqrt(l), l).reshape(x.sizes(), l);
  Shape per_channel(size_t(x.dim()), 1);
  per_channel[1] = c;
  if (weight.defined()) y = y.mul(weight.reshape(per_channel, l), l);
  if (bias.defined()) y = y.add(bias.reshape(per_channel, l), 1, l);
  return y;
}

Tensor prelu(const Tensor& x, const Tensor& weight, Loc l) {
  if (weight.dim() != 1)
    throw Error("prelu: expected a weight of one dim, got " + shape_str(weight.sizes()), here(l));
  Tensor w = weight;
  if (weight.numel() != 1) {
    if (x.dim() < 2 || x.size(1) != weight.numel())
      throw Error("prelu: " + std::to_string(weight.numel()) + " slopes for an input of shape " +
                      shape_str(x.sizes()) + " (expected one slope, or one per channel: dim 1)",
                  here(l));
    Shape per_channel(size_t(x.dim()), 1);
    per_channel[1] = weight.numel();
    w = weight.reshape(per_channel, l);
  } else if (x.dim() > 0) {
    w = weight.reshape({}, l);
  }
  return where(x.gt(Scalar(0.0), l), x, x.mul(w, l), l);
}

namespace {

// The maximum over `bins` bins of dim `d` (size s): bin i is [floor(i s / bins),
// ceil((i + 1) s / bins)).
Tensor max_over_bins(const Tensor& x, int64_t d, int64_t bins, Loc l) {
  const int64_t s = x.size(d);
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t start = i * s / bins, end = ((i + 1) * s + bins - 1) / bins;
    parts.push_back(std::get<0>(x.narrow(d, start, end - start, l).max(d, true, l)));
  }
  return cat(parts, d, l);
}

}  // namespace

Tensor adaptive_max_pool2d(const Tensor& input, ExpandingArray2 output_size, Loc l) {
  if (input.dim() != 3 && input.dim() != 4)
    throw Error("adaptive_max_pool2d: expected an input [N, C, H, W] or [C, H, W], got " +
                    shape_str(input.sizes()),
                here(l));
  const int64_t oh = output_size[0], ow = output_size[1];
  const int64_t h = input.size(-2), w = input.size(-1);
  if (oh <= 0 || ow <= 0 || h <= 0 || w <= 0)
    throw Error(
        "adaptive_max_pool2d: expected a positive output size and a non-empty input, got "
        "output_size " +
            output_size.str() + " for input " + shape_str(input.sizes()),
        here(l));
  if (h % oh == 0 && w % ow == 0)
    return kiln::max_pool2d(input, {h / oh, w / ow}, std::nullopt, 0, 1, false, l);
  const int64_t hd = input.dim() - 2, wd = input.dim() - 1;
  return max_over_bins(max_over_bins(input, wd, ow, l), hd, oh, l);
}

Tensor kl_div(const Tensor& input, const Tensor& target, KLDivReduction reduction, bool log_target,
              Loc l) {
  if (!is_floating(input.dtype()))
    throw Error(std::string("kl_div: expected floating log-probabilities, got ") +
                    dtype_name(input.dtype()),
                here(l));
  Tensor per;
  if (log_target) {
    per = target.exp(l).mul(target.sub(input, 1, l), l);
  } else {
    // xlogy(t, t): 0 where t is 0, whose log is taken of 1 so that no inf or
    // NaN reaches the value or either gradient.
    Tensor zero = target.eq(Scalar(0.0), l);
    Tensor one = ones({}, TensorOptions(target.dtype()).device(target.device()), l);
    Tensor safe = where(zero, one, target, l);
    Tensor tlogt = where(zero, zeros_like(target), target.mul(safe.log(l), l), l);
    per = tlogt.sub(target.mul(input, l), 1, l);
  }
  switch (reduction.kind) {
    case KLDivReduction::None:
      return per;
    case KLDivReduction::Sum:
      return per.sum(l);
    case KLDivReduction::Mean:
      return per.mean(l);
    case KLDivReduction::BatchMean:
      return input.dim() == 0 ? per.sum(l) : per.sum(l).div(Scalar(double(input.size(0))), l);
  }
  return per;
}

Tensor unflatten(const Tensor& x, int64_t dim, const std::vector<int64_t>& sizes, Loc l) {
  return x.unflatten(dim, sizes, l);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps, Loc l) {
  const Shape shape = broadcast_shapes(x1.sizes(), x2.sizes());
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    throw Error("cosine_similarity: dim " + std::to_string(dim) +
                    " out of range for inputs broadcast to " + shape_str(shape),
                here(l));
  // Each squared norm clamped to at least eps^2 in value only: the gradient is
  // the unclamped one's (PyTorch clamps in place under no_grad).
  auto unit = [&](const Tensor& x) {
    Tensor xe = x.expand(shape, l);
    Tensor sq = xe.mul(xe, l).sum({d}, true, l);
    Tensor floor_gap = sq.detach().clamp_min(Scalar(eps * eps), l).sub(sq.detach(), 1, l);
    return xe.div(sq.add(floor_gap, 1, l).sqrt(l), l);
  };
  return unit(x1).mul(unit(x2), l).sum({d}, false, l);
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim,
                         Loc l) {
  const int64_t last = std::max(x1.dim(), x2.dim()) - 1;
  if (last < 0)
    throw Error("pairwise_distance: expected inputs of at least one dim, got " +
                    shape_str(x1.sizes()) + " and " + shape_str(x2.sizes()),
                here(l));
  return x1.sub(x2, 1, l).add(Scalar(eps), l).norm(p, last, keepdim, l);
}

}  // namespace functional

GroupNormImpl::GroupNormImpl(const GroupNormOptions& o) : Module("GroupNorm"), options(o) {
  if (o.num_groups() <= 0 || o.num_channels() <= 0 || o.num_channels() % o.num_groups() != 0)
    throw Error("GroupNorm(" + std::to_string(o.num_groups()) + ", " +
                std::to_string(o.num_channels()) +
                "): expected num_channels divisible by a positive num_groups");
  if (o.affine()) {
    weight = register_parameter("weight", ones({o.num_channels()}));
    bias = register_parameter("bias", zeros({o.num_channels()}));
  }
}
Tensor GroupNormImpl::forward(const Tensor& x, Loc l) {
  if (x.dim() < 2 || x.size(1) != options.num_channels())
    throw Error("GroupNorm: expected an input [N, " + std::to_string(options.num_channels()) +
                    ", ...], got " + shape_str(x.sizes()),
                here(l));
  return functional::group_norm(x, options.num_groups(), weight, bias, options.eps(), l);
}
std::string GroupNormImpl::repr() const {
  std::ostringstream s;
  s << "GroupNorm(" << options.num_groups() << ", " << options.num_channels()
    << ", eps=" << options.eps() << ", affine=" << (options.affine() ? "true" : "false") << ")";
  return s.str();
}

Tensor ELUImpl::forward(const Tensor& x, Loc l) {
  return functional::elu(x, options.alpha(), l);
}
Tensor SELUImpl::forward(const Tensor& x, Loc l) {
  return functional::selu(x, l);
}
Tensor SoftplusImpl::forward(const Tensor& x, Loc l) {
  return functional::softplus(x, options.beta(), options.threshold(), l);
}
Tensor MishImpl::forward(const Tensor& x, Loc l) {
  return functional::mish(x, l);
}

HardtanhImpl::HardtanhImpl(const HardtanhOptions& o) : Module("Hardtanh"), options(o) {
  if (!(o.max_val() > o.min_val()))
    throw Error("Hardtanh: expected max_val > min_val, got min_val " + std::to_string(o.min_val()) +
                " and max_val " + std::to_string(o.max_val()));
}
Tensor HardtanhImpl::forward(const Tensor& x, Loc l) {
  return functional::hardtanh(x, options.min_val(), options.max_val(), l);
}

PReLUImpl::PReLUImpl(const PReLUOptions& o) : Module("PReLU"), options(o) {
  if (o.num_parameters() <= 0)
    throw Error("PReLU: expected num_parameters > 0, got " + std::to_string(o.num_parameters()));
  weight = register_parameter("weight", full({o.num_parameters()}, o.init()));
}
Tensor PReLUImpl::forward(const Tensor& x, Loc l) {
  return functional::prelu(x, weight, l);
}
std::string PReLUImpl::repr() const {
  return "PReLU(num_parameters=" + std::to_string(options.num_parameters()) + ")";
}

Tensor UnflattenImpl::forward(const Tensor& x, Loc l) {
  return functional::unflatten(x, options.dim(), options.sizes(), l);
}
Tensor AdaptiveMaxPool2dImpl::forward(const Tensor& x, Loc l) {
  return functional::adaptive_max_pool2d(x, options.output_size(), l);
}
Tensor KLDivLossImpl::forward(const Tensor& input, const Tensor& target, Loc l) {
  return functional::kl_div(input, target, options.reduction(), options.log_target(), l);
}

Tensor CosineSimilarityImpl::forward(const Tensor& x1, const Tensor& x2, Loc l) {
  return functional::cosine_similarity(x1, x2, options.dim(), options.eps(), l);
}

Tensor PairwiseDistanceImpl::forward(const Tensor& x1, const Tensor& x2, Loc l) {
  return functional::pairwise_distance(x1, x2, options.p(), options.eps(), options.keepdim(), l);
}

}  // namespace kiln::nn
