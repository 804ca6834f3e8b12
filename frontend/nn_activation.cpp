// The activations of frontend/nn_activation.h, composites of table ops:
//   logsigmoid   (x - |x|) / 2 - log1p(exp(-|x|))  (no overflow for large |x|)
//   softmin      softmax(-x)
//   softshrink   where(x > l, x - l, where(x < -l, x + l, 0))
//   hardshrink   where(|x| > l, x, 0)
//   threshold    where(x > t, x, value)
//   celu         where(x > 0, x, alpha expm1(x / alpha)), the exp of x <= 0 only
//   glu          a sigmoid(b) of x's two halves
//   hardsigmoid  where(x <= -3, 0, where(x >= 3, 1, (x + 3) / 6))
//   hardswish    where(x < -3, 0 x, where(x > 3, x, x (x + 3) / 6))
// (the last two in PyTorch's order of operations, and with its gradients at
// the kinks: hardsigmoid's 0 at +-3, hardswish's x / 3 + 1/2 at +-3).
#include "frontend/nn_activation.h"

#include "frontend/dispatch.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

using detail::here;

namespace functional {

namespace {

Tensor zero_like(const Tensor& x, Loc l) {
  return zeros({}, TensorOptions(x.dtype()).device(x.device()), l);
}

}  // namespace

Tensor logsigmoid(const Tensor& x, Loc l) {
  // min(x, 0) as (x - |x|) / 2: at 0 its gradient is 1/2 (|x|'s is 0 there), so
  // the whole is 1 - sigmoid(x) everywhere, as PyTorch's.
  Tensor a = x.abs(l);
  return x.sub(a, 1, l).mul(Scalar(0.5), l).sub(a.neg(l).exp(l).log1p(l), 1, l);
}

Tensor softmin(const Tensor& x, int64_t dim, Loc l) { return x.neg(l).softmax(dim, l); }

Tensor tanhshrink(const Tensor& x, Loc l) { return x.sub(x.tanh(l), 1, l); }

Tensor softshrink(const Tensor& x, double lambda, Loc l) {
  if (lambda < 0)
    throw Error("softshrink: expected lambda >= 0, got " + std::to_string(lambda), here(l));
  Tensor low = where(x.lt(Scalar(-lambda), l), x.add(Scalar(lambda), l), zero_like(x, l), l);
  return where(x.gt(Scalar(lambda), l), x.sub(Scalar(lambda), l), low, l);
}

Tensor hardshrink(const Tensor& x, double lambda, Loc l) {
  return where(x.abs(l).gt(Scalar(lambda), l), x, zero_like(x, l), l);
}

Tensor threshold(const Tensor& x, double threshold, double value, Loc l) {
  return where(x.gt(Scalar(threshold), l), x,
               full({}, Scalar(value), TensorOptions(x.dtype()).device(x.device()), l), l);
}

Tensor celu(const Tensor& x, double alpha, Loc l) {
  if (alpha == 0) throw Error("celu: alpha must not be 0", here(l));
  // The exponential of the non-positive part only: where's other branch must
  // stay finite, or its zero gradient times an infinite one is NaN.
  Tensor positive = x.gt(Scalar(0.0), l);
  Tensor non_positive = where(positive, zero_like(x, l), x, l);
  return where(positive, x, non_positive.div(Scalar(alpha), l).expm1(l).mul(Scalar(alpha), l), l);
}

Tensor glu(const Tensor& x, int64_t dim, Loc l) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (d < 0 || d >= x.dim())
    throw Error("glu: dim " + std::to_string(dim) + " out of range for an input of shape " +
                    shape_str(x.sizes()),
                here(l));
  if (x.size(d) % 2 != 0)
    throw Error("glu: halving dim " + std::to_string(dim) + " of an input of shape " +
                    shape_str(x.sizes()) + " (expected an even size)",
                here(l));
  const int64_t half = x.size(d) / 2;
  return x.narrow(d, 0, half, l).mul(x.narrow(d, half, half, l).sigmoid(l), l);
}

Tensor hardsigmoid(const Tensor& x, Loc l) {
  const TensorOptions o = TensorOptions(x.dtype()).device(x.device());
  Tensor inside = x.add(Scalar(3), l).div(Scalar(6), l);
  return where(x.le(Scalar(-3), l), zero_like(x, l),
               where(x.ge(Scalar(3), l), full({}, Scalar(1), o, l), inside, l), l);
}

Tensor hardswish(const Tensor& x, Loc l) {
  Tensor inside = x.mul(x.add(Scalar(3), l), l).div(Scalar(6), l);
  // Below -3, x times 0 as PyTorch's x min(max(x + 3, 0), 6) / 6: -0 for finite
  // x, NaN for -inf.
  return where(x.lt(Scalar(-3), l), x.mul(Scalar(0), l), where(x.gt(Scalar(3), l), x, inside, l),
               l);
}

}  // namespace functional

Tensor HardsigmoidImpl::call(const Tensor& x, const NoOptions&, Loc l) {
  return functional::hardsigmoid(x, l);
}
Tensor HardswishImpl::call(const Tensor& x, const NoOptions&, Loc l) {
  return functional::hardswish(x, l);
}
Tensor ReLU6Impl::call(const Tensor& x, const ReLU6Options&, Loc l) {
  return functional::relu6(x, l);
}
Tensor SoftsignImpl::call(const Tensor& x, const NoOptions&, Loc l) {
  return functional::softsign(x, l);
}
Tensor LogSigmoidImpl::call(const Tensor& x, const NoOptions&, Loc l) {
  return functional::logsigmoid(x, l);
}
Tensor SoftminImpl::call(const Tensor& x, const SoftminOptions& o, Loc l) {
  return functional::softmin(x, o.dim(), l);
}
Tensor TanhshrinkImpl::call(const Tensor& x, const NoOptions&, Loc l) {
  return functional::tanhshrink(x, l);
}
Tensor SoftshrinkImpl::call(const Tensor& x, const SoftshrinkOptions& o, Loc l) {
  return functional::softshrink(x, o.lambda(), l);
}
Tensor HardshrinkImpl::call(const Tensor& x, const HardshrinkOptions& o, Loc l) {
  return functional::hardshrink(x, o.lambda(), l);
}
Tensor ThresholdImpl::call(const Tensor& x, const ThresholdOptions& o, Loc l) {
  return functional::threshold(x, o.threshold(), o.value(), l);
}
Tensor CELUImpl::call(const Tensor& x, const CELUOptions& o, Loc l) {
  return functional::celu(x, o.alpha(), l);
}
Tensor GLUImpl::call(const Tensor& x, const GLUOptions& o, Loc l) {
  return functional::glu(x, o.dim(), l);
}

}  // namespace kiln::nn
