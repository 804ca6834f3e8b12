// The losses of frontend/nn_losses.h in PyTorch 1.13's formulas (ATen's
// Loss.cpp): each builds its per-element loss from table ops, then
// apply_reduction reduces it.
#include "frontend/nn_losses.h"

#include <cmath>

#include "frontend/dispatch.h"
#include "frontend/nn_activation.h"
#include "frontend/nn_extra.h"

namespace kiln::nn::functional {

using detail::here;

namespace {

Tensor zero_of(const Tensor& like, Loc l) {
  return zeros({}, TensorOptions(like.dtype()).device(like.device()), l);
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op, Loc l) {
  if (a.sizes() != b.sizes())
    throw Error(std::string(op) + ": expected input and target of the same shape, got " +
                    shape_str(a.sizes()) + " and " + shape_str(b.sizes()),
                here(l));
}

}  // namespace

Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                           const MarginRankingLossOptions& o, Loc l) {
  Tensor per = y.neg(l).mul(x1.sub(x2, 1, l), l).add(Scalar(o.margin()), l).clamp_min(Scalar(0.0), l);
  return apply_reduction(per, o.reduction(), l);
}

Tensor hinge_embedding_loss(const Tensor& x, const Tensor& y, const HingeEmbeddingLossOptions& o,
                            Loc l) {
  const Tensor zero = zero_of(x, l);
  Tensor margin_part = x.neg(l).add(Scalar(o.margin()), l).clamp_min(Scalar(0.0), l);
  Tensor per = where(y.ne(Scalar(1), l), margin_part, zero, l)
                   .add(where(y.ne(Scalar(-1), l), x, zero, l), 1, l);
  return apply_reduction(per, o.reduction(), l);
}

Tensor soft_margin_loss(const Tensor& x, const Tensor& y, const SoftMarginLossOptions& o, Loc l) {
  check_same_shape(x, y, "soft_margin_loss", l);
  return apply_reduction(y.neg(l).mul(x, l).exp(l).log1p(l), o.reduction(), l);
}

Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                             const CosineEmbeddingLossOptions& o, Loc l) {
  if (x1.dim() != x2.dim() || x1.dim() < 1 || x1.dim() > 2)
    throw Error("cosine_embedding_loss: expected inputs [N, D] or [D] of the same rank, got " +
                    shape_str(x1.sizes()) + " and " + shape_str(x2.sizes()),
                here(l));
  const int64_t d = x1.dim() - 1;
  constexpr double kEpsilon = 1e-12;  // PyTorch's, added to each squared norm
  Tensor dot = x1.mul(x2, l).sum({d}, false, l);
  Tensor m1 = x1.mul(x1, l).sum({d}, false, l).add(Scalar(kEpsilon), l);
  Tensor m2 = x2.mul(x2, l).sum({d}, false, l).add(Scalar(kEpsilon), l);
  Tensor cos = dot.div(m1.mul(m2, l).sqrt(l), l);
  const Tensor zero = zero_of(cos, l);
  Tensor pos = where(y.eq(Scalar(1), l), cos.neg(l).add(Scalar(1.0), l), zero, l);
  Tensor neg = where(y.eq(Scalar(-1), l),
                     cos.sub(Scalar(o.margin()), l).clamp_min(Scalar(0.0), l), zero, l);
  return apply_reduction(pos.add(neg, 1, l), o.reduction(), l);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& o, Loc l) {
  if (anchor.dim() != positive.dim() || anchor.dim() != negative.dim())
    throw Error("triplet_margin_loss: expected anchor, positive and negative of the same rank, "
                "got " +
                    shape_str(anchor.sizes()) + ", " + shape_str(positive.sizes()) + " and " +
                    shape_str(negative.sizes()),
                here(l));
  Tensor d_ap = pairwise_distance(anchor, positive, o.p(), o.eps(), false, l);
  Tensor d_an = pairwise_distance(anchor, negative, o.p(), o.eps(), false, l);
  if (o.swap()) d_an = minimum(d_an, pairwise_distance(positive, negative, o.p(), o.eps(), false, l), l);
  Tensor per = d_ap.sub(d_an, 1, l).add(Scalar(o.margin()), l).clamp_min(Scalar(0.0), l);
  return apply_reduction(per, o.reduction(), l);
}

Tensor multilabel_soft_margin_loss(const Tensor& x, const Tensor& y,
                                   const MultiLabelSoftMarginLossOptions& o, Loc l) {
  check_same_shape(x, y, "multilabel_soft_margin_loss", l);
  if (x.dim() != 2)
    throw Error("multilabel_soft_margin_loss: expected input [N, C], got " + shape_str(x.sizes()),
                here(l));
  Tensor per = y.mul(logsigmoid(x, l), l)
                   .add(y.neg(l).add(Scalar(1.0), l).mul(logsigmoid(x.neg(l), l), l), 1, l)
                   .neg(l);
  if (o.weight().defined()) per = per.mul(o.weight(), l);
  return apply_reduction(per.sum({1}, false, l).div(Scalar(double(x.size(1))), l), o.reduction(),
                         l);
}

Tensor poisson_nll_loss(const Tensor& x, const Tensor& y, const PoissonNLLLossOptions& o, Loc l) {
  Tensor per = o.log_input() ? x.exp(l).sub(y.mul(x, l), 1, l)
                             : x.sub(y.mul(x.add(Scalar(o.eps()), l).log(l), l), 1, l);
  if (o.full()) {
    // Stirling: y log y - y + log(2 pi y) / 2, where y > 1 (0 elsewhere); the
    // logs are taken of max(y, 1) so the other branch stays finite.
    Tensor safe = y.clamp_min(Scalar(1.0), l);
    Tensor stirling = safe.mul(safe.log(l), l)
                          .sub(safe, 1, l)
                          .add(safe.mul(Scalar(2 * M_PI), l).log(l).mul(Scalar(0.5), l), 1, l);
    per = per.add(where(y.gt(Scalar(1), l), stirling, zero_of(per, l), l), 1, l);
  }
  return apply_reduction(per, o.reduction(), l);
}

}  // namespace kiln::nn::functional
