// libtorch's modules and functions that nn.h, nn_conv.h and nn_parity.h do
// not have: GroupNorm, the activation modules (ELU, SELU, Softplus, Mish,
// Hardtanh, PReLU), Unflatten, AdaptiveMaxPool2d, KLDivLoss, CosineSimilarity
// and PairwiseDistance, with their options and functional forms. Each is a
// composite of table ops (frontend/nn_extra.cpp), so it runs eagerly, traces
// and differentiates like the rest.
#pragma once

#include <vector>

#include "frontend/nn.h"
#include "frontend/nn_conv.h"

namespace kiln::nn {

/// How kl_div reduces: as the other losses (Reduction), or BatchMean: the sum
/// divided by the batch size (the first dim), the KL divergence's definition.
struct KLDivReduction {
  enum Kind { None, Mean, Sum, BatchMean };
  KLDivReduction(Kind k = Mean) : kind(k) {}  // NOLINT: implicit, as libtorch's variant
  KLDivReduction(Reduction r)                 // NOLINT
      : kind(r == Reduction::None  ? None
             : r == Reduction::Sum ? Sum
                                   : Mean) {}
  Kind kind;
};

namespace functional {

/// Normalises x [N, C, ...] over each of num_groups groups of C / num_groups
/// channels (biased variance), then scales and shifts per channel by weight and
/// bias [C] when given (torch.nn.functional.group_norm).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5, KILN_LOC);
/// x where x > 0, weight * x elsewhere; weight [1] or [C] (per channel, dim 1).
Tensor prelu(const Tensor& x, const Tensor& weight, KILN_LOC);
/// The maximum over output_size bins per plane (bin i of n over a dim of size s
/// is [floor(i s / n), ceil((i + 1) s / n)), overlapping when n does not divide
/// s). The gradient goes to each bin's first maximum in row-major order, as
/// PyTorch's.
Tensor adaptive_max_pool2d(const Tensor& input, ExpandingArray2 output_size, KILN_LOC);
/// The Kullback-Leibler divergence of the distribution `target` from the
/// log-probabilities `input`: target (log target - input), 0 where target is 0;
/// with log_target the target is given as log-probabilities:
/// exp(target) (target - input).
Tensor kl_div(const Tensor& input, const Tensor& target, KLDivReduction reduction = {},
              bool log_target = false, KILN_LOC);
/// x with dim `dim` split into `sizes` (one may be -1).
Tensor unflatten(const Tensor& x, int64_t dim, const std::vector<int64_t>& sizes, KILN_LOC);
/// The cosine of the angle between x1 and x2 (broadcast) along `dim`:
/// sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps)) (PyTorch 1.13's form: each
/// norm clamped on its own; the gradient flows through the clamped norm as
/// through the norm).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8,
                         KILN_LOC);
/// The p-norm of x1 - x2 + eps over the last dim (torch.nn.functional.pairwise_distance).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false, KILN_LOC);

}  // namespace functional

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  KILN_ARG(int64_t, num_groups);
  KILN_ARG(int64_t, num_channels);
  KILN_ARG(double, eps) = 1e-5;
  /// Whether there is a per-channel weight (ones) and bias (zeros).
  KILN_ARG(bool, affine) = true;
};
class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels)
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  explicit GroupNormImpl(const GroupNormOptions& options);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  GroupNormOptions options;
  Tensor weight, bias;
};

/// The activation modules' options. inplace is accepted; the result is the same.
struct ELUOptions {
  KILN_ARG(double, alpha) = 1.0;
  KILN_ARG(bool, inplace) = false;
};
struct SELUOptions {
  SELUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(bool, inplace);
};
struct SoftplusOptions {
  KILN_ARG(double, beta) = 1.0;
  KILN_ARG(double, threshold) = 20.0;
};
struct HardtanhOptions {
  KILN_ARG(double, min_val) = -1.0;
  KILN_ARG(double, max_val) = 1.0;
  KILN_ARG(bool, inplace) = false;
};
/// PReLU: num_parameters slopes (1, or the input's channels), each starting at init.
struct PReLUOptions {
  KILN_ARG(int64_t, num_parameters) = 1;
  KILN_ARG(double, init) = 0.25;
};

class ELUImpl : public Module {
 public:
  explicit ELUImpl(const ELUOptions& options = {}) : Module("ELU"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  ELUOptions options;
};
class SELUImpl : public Module {
 public:
  explicit SELUImpl(const SELUOptions& options = {}) : Module("SELU"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  SELUOptions options;
};
class SoftplusImpl : public Module {
 public:
  explicit SoftplusImpl(const SoftplusOptions& options = {})
      : Module("Softplus"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  SoftplusOptions options;
};
class MishImpl : public Module {
 public:
  MishImpl() : Module("Mish") {}
  Tensor forward(const Tensor& x, KILN_LOC);
};
class HardtanhImpl : public Module {
 public:
  explicit HardtanhImpl(const HardtanhOptions& options = {});
  Tensor forward(const Tensor& x, KILN_LOC);
  HardtanhOptions options;
};
class PReLUImpl : public Module {
 public:
  explicit PReLUImpl(const PReLUOptions& options = {});
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  PReLUOptions options;
  Tensor weight;
};

struct UnflattenOptions {
  UnflattenOptions(int64_t dim, std::vector<int64_t> sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  KILN_ARG(int64_t, dim);
  KILN_ARG(std::vector<int64_t>, sizes);
};
class UnflattenImpl : public Module {
 public:
  UnflattenImpl(int64_t dim, std::vector<int64_t> sizes)
      : UnflattenImpl(UnflattenOptions(dim, std::move(sizes))) {}
  explicit UnflattenImpl(const UnflattenOptions& options) : Module("Unflatten"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  UnflattenOptions options;
};

struct AdaptiveMaxPool2dOptions {
  AdaptiveMaxPool2dOptions(ExpandingArray2 output_size)  // NOLINT: implicit, as libtorch
      : output_size_(output_size) {}
  KILN_ARG(ExpandingArray2, output_size);
};
class AdaptiveMaxPool2dImpl : public Module {
 public:
  explicit AdaptiveMaxPool2dImpl(const AdaptiveMaxPool2dOptions& options)
      : Module("AdaptiveMaxPool2d"), options(options) {}
  /// AdaptiveMaxPool2d(1), as libtorch's: the output size alone.
  explicit AdaptiveMaxPool2dImpl(ExpandingArray2 output_size)
      : AdaptiveMaxPool2dImpl(AdaptiveMaxPool2dOptions(output_size)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  AdaptiveMaxPool2dOptions options;
};

struct CosineSimilarityOptions {
  KILN_ARG(int64_t, dim) = 1;
  KILN_ARG(double, eps) = 1e-8;
};
struct PairwiseDistanceOptions {
  KILN_ARG(double, p) = 2.0;
  KILN_ARG(double, eps) = 1e-6;
  KILN_ARG(bool, keepdim) = false;
};
class CosineSimilarityImpl : public Module {
 public:
  explicit CosineSimilarityImpl(const CosineSimilarityOptions& options = {})
      : Module("CosineSimilarity"), options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2, KILN_LOC);
  CosineSimilarityOptions options;
};
class PairwiseDistanceImpl : public Module {
 public:
  explicit PairwiseDistanceImpl(const PairwiseDistanceOptions& options = {})
      : Module("PairwiseDistance"), options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2, KILN_LOC);
  PairwiseDistanceOptions options;
};

struct KLDivLossOptions {
  KILN_ARG(KLDivReduction, reduction) = KLDivReduction::Mean;
  KILN_ARG(bool, log_target) = false;
};
class KLDivLossImpl : public Module {
 public:
  explicit KLDivLossImpl(const KLDivLossOptions& options = {})
      : Module("KLDivLoss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC);
  KLDivLossOptions options;
};

using GroupNorm = ModuleHolder<GroupNormImpl>;
using ELU = ModuleHolder<ELUImpl>;
using SELU = ModuleHolder<SELUImpl>;
using Softplus = ModuleHolder<SoftplusImpl>;
using Mish = ModuleHolder<MishImpl>;
using Hardtanh = ModuleHolder<HardtanhImpl>;
using PReLU = ModuleHolder<PReLUImpl>;
using Unflatten = ModuleHolder<UnflattenImpl>;
using AdaptiveMaxPool2d = ModuleHolder<AdaptiveMaxPool2dImpl>;
using KLDivLoss = ModuleHolder<KLDivLossImpl>;
using CosineSimilarity = ModuleHolder<CosineSimilarityImpl>;
using PairwiseDistance = ModuleHolder<PairwiseDistanceImpl>;

}  // namespace kiln::nn
