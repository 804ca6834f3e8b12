// libtorch's losses that nn.h and nn_parity.h do not have: margin ranking,
// hinge embedding, soft margin, cosine embedding, triplet margin, multilabel
// soft margin and Poisson NLL, each with its options struct (which the
// functional form takes too, as libtorch's FuncOptions), functional form and
// module. Composites of table ops (frontend/nn_losses.cpp) in PyTorch 1.13's
// formulas, so they run eagerly, trace and differentiate like the rest.
#pragma once

#include "frontend/nn.h"

namespace kiln::nn {

struct MarginRankingLossOptions {
  KILN_ARG(double, margin) = 0.0;
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct HingeEmbeddingLossOptions {
  KILN_ARG(double, margin) = 1.0;
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct SoftMarginLossOptions {
  SoftMarginLossOptions(Reduction r = Reduction::Mean) : reduction_(r) {}  // NOLINT
  KILN_ARG(Reduction, reduction);
};
struct CosineEmbeddingLossOptions {
  KILN_ARG(double, margin) = 0.0;
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct TripletMarginLossOptions {
  KILN_ARG(double, margin) = 1.0;
  KILN_ARG(double, p) = 2.0;
  KILN_ARG(double, eps) = 1e-6;
  KILN_ARG(bool, swap) = false;
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct MultiLabelSoftMarginLossOptions {
  /// Per class [C], optional.
  KILN_ARG(Tensor, weight);
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct PoissonNLLLossOptions {
  /// input is the log of the rate (else the rate itself).
  KILN_ARG(bool, log_input) = true;
  /// Adds Stirling's approximation of log(target!) where target > 1.
  KILN_ARG(bool, full) = false;
  KILN_ARG(double, eps) = 1e-8;
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};

namespace functional {

/// max(0, -y (x1 - x2) + margin), y in {1, -1}.
Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                           const MarginRankingLossOptions& options = {}, KILN_LOC);
/// x where y != -1, plus max(0, margin - x) where y != 1.
Tensor hinge_embedding_loss(const Tensor& x, const Tensor& y,
                            const HingeEmbeddingLossOptions& options = {}, KILN_LOC);
/// log(1 + exp(-y x)).
Tensor soft_margin_loss(const Tensor& x, const Tensor& y, const SoftMarginLossOptions& options = {},
                        KILN_LOC);
/// 1 - cos(x1, x2) where y == 1, max(0, cos(x1, x2) - margin) where y == -1;
/// x1 and x2 [N, D] (or [D]), cos over dim 1 with 1e-12 added to each squared
/// norm (PyTorch's).
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                             const CosineEmbeddingLossOptions& options = {}, KILN_LOC);
/// max(0, margin + d(a, p) - d(a, n)), d the pairwise distance (with swap, d(a,
/// n) is the smaller of it and d(p, n)).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& options = {}, KILN_LOC);
/// -(y logsigmoid(x) + (1 - y) logsigmoid(-x)) (times weight), the mean over
/// the classes (dim 1), then reduced over the batch.
Tensor multilabel_soft_margin_loss(const Tensor& x, const Tensor& y,
                                   const MultiLabelSoftMarginLossOptions& options = {}, KILN_LOC);
/// exp(x) - y x with log_input, else x - y log(x + eps); full adds
/// y log y - y + log(2 pi y) / 2 where y > 1.
Tensor poisson_nll_loss(const Tensor& x, const Tensor& y, const PoissonNLLLossOptions& options = {},
                        KILN_LOC);

}  // namespace functional

#define KILN_LOSS_MODULE(Name, fn)                                                   \
  class Name##Impl : public Module {                                                 \
   public:                                                                           \
    explicit Name##Impl(const Name##Options& options = {})                           \
        : Module(#Name), options(options) {}                                         \
    Tensor forward(const Tensor& a, const Tensor& b, KILN_LOC) {                     \
      return functional::fn(a, b, options, loc);                                     \
    }                                                                                \
    Name##Options options;                                                           \
  };                                                                                 \
  using Name = ModuleHolder<Name##Impl>;
#define KILN_LOSS_MODULE3(Name, fn)                                                  \
  class Name##Impl : public Module {                                                 \
   public:                                                                           \
    explicit Name##Impl(const Name##Options& options = {})                           \
        : Module(#Name), options(options) {}                                         \
    Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c, KILN_LOC) {    \
      return functional::fn(a, b, c, options, loc);                                  \
    }                                                                                \
    Name##Options options;                                                           \
  };                                                                                 \
  using Name = ModuleHolder<Name##Impl>;
KILN_LOSS_MODULE3(MarginRankingLoss, margin_ranking_loss)
KILN_LOSS_MODULE(HingeEmbeddingLoss, hinge_embedding_loss)
KILN_LOSS_MODULE(SoftMarginLoss, soft_margin_loss)
KILN_LOSS_MODULE3(CosineEmbeddingLoss, cosine_embedding_loss)
KILN_LOSS_MODULE3(TripletMarginLoss, triplet_margin_loss)
KILN_LOSS_MODULE(MultiLabelSoftMarginLoss, multilabel_soft_margin_loss)
KILN_LOSS_MODULE(PoissonNLLLoss, poisson_nll_loss)
#undef KILN_LOSS_MODULE
#undef KILN_LOSS_MODULE3

}  // namespace kiln::nn
