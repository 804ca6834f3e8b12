// The adaptive softmax (Grave et al. 2017, "Efficient softmax approximation for
// GPUs") as libtorch's torch::nn::AdaptiveLogSoftmaxWithLoss: a head over the
// most frequent classes plus one entry per tail cluster, and per cluster a
// projection to in_features / div_value^(i+1) features followed by the
// cluster's own softmax. A language model with a large vocabulary pays for a
// head of cutoffs[0] + n_clusters outputs and small projections instead of an
// output layer over the whole vocabulary.
//
// PyTorch computes each tail cluster only for the rows whose targets fall in it
// (a data-dependent number of rows). Kiln's traced plans have static shapes, so
// the selection happens inside one library op per cluster (cluster_logprob,
// runtime/cluster_logprob.h): a [N] result, 0 for the rows outside the
// cluster, whose work (and whose gradient's) is proportional to the cluster's
// rows. The same output and loss (and gradients) as PyTorch, with shapes that
// depend only on the input's.
#pragma once

#include <utility>
#include <vector>

#include "frontend/nn.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

/// AdaptiveLogSoftmaxWithLoss's arguments. cutoffs: the first class of each
/// tail cluster, increasing, each in [1, n_classes - 1]; classes below
/// cutoffs[0] are the head's shortlist. The options remember the line that made
/// them, so the module's constructor names it in its errors.
struct AdaptiveLogSoftmaxWithLossOptions {
  AdaptiveLogSoftmaxWithLossOptions(int64_t in_features, int64_t n_classes,
                                    std::vector<int64_t> cutoffs, KILN_LOC)
      : in_features_(in_features), n_classes_(n_classes), cutoffs_(std::move(cutoffs)), loc(loc) {}
  KILN_ARG(int64_t, in_features);
  KILN_ARG(int64_t, n_classes);
  KILN_ARG(std::vector<int64_t>, cutoffs);
  /// Cluster i projects to in_features / div_value^(i+1) features (rounded down).
  KILN_ARG(double, div_value) = 4.;
  /// Whether the head has a bias (the tail never has one).
  KILN_ARG(bool, head_bias) = false;
  Loc loc;
};

/// What AdaptiveLogSoftmaxWithLoss's forward returns: the log-probability of
/// each row's target ([N]; [] for a single example) and the loss, the mean of
/// -output. Unlike libtorch since 1.5 (where loss is a double read back with
/// item(), so it carries no gradient), loss is a 0-dim tensor, as in PyTorch's
/// Python module: it trains, and it traces.
struct ASMoutput {
  ASMoutput(Tensor output, Tensor loss) : output(std::move(output)), loss(std::move(loss)) {}
  Tensor output;
  Tensor loss;
};

namespace functional {

/// The tail's weights, one pair per cluster: the projection [hsz_i, in_features]
/// and the cluster's output layer [osz_i, hsz_i] (neither has a bias).
using AdaptiveTail = std::vector<std::pair<Tensor, Tensor>>;

/// AdaptiveLogSoftmaxWithLoss's forward with its weights passed: input [N, in]
/// with target [N] (or input [in] with a 0-dim target), head_weight
/// [shortlist + n_clusters, in], head_bias [shortlist + n_clusters] or
/// undefined. The cutoffs follow from the shapes: shortlist = head rows -
/// n_clusters, then each cluster's osz_i classes. A target outside
/// [0, n_classes) is an error (traced: when the plan runs).
ASMoutput adaptive_log_softmax_with_loss(const Tensor& input, const Tensor& target,
                                         const Tensor& head_weight, const Tensor& head_bias,
                                         const AdaptiveTail& tail, KILN_LOC);
/// The log-probabilities of every class, [N, n_classes], for input [N, in]
/// (AdaptiveLogSoftmaxWithLoss::log_prob with its weights passed).
Tensor adaptive_log_prob(const Tensor& input, const Tensor& head_weight, const Tensor& head_bias,
                         const AdaptiveTail& tail, KILN_LOC);

}  // namespace functional

/// torch::nn::AdaptiveLogSoftmaxWithLoss: parameters "head.weight" (and
/// "head.bias"), "tail.<i>.0.weight" (the projection) and "tail.<i>.1.weight"
/// (the cluster's outputs), as PyTorch names them, so a state_dict saved there
/// loads here (load_safetensors).
class AdaptiveLogSoftmaxWithLossImpl : public Module {
 public:
  explicit AdaptiveLogSoftmaxWithLossImpl(AdaptiveLogSoftmaxWithLossOptions options);
  /// The log-probability of each target and their mean negative (the loss).
  /// input [N, in_features] with target [N] (int), or [in_features] with a 0-dim target.
  ASMoutput forward(const Tensor& input, const Tensor& target, KILN_LOC);
  /// log-probabilities of every class, [N, n_classes], for input [N, in_features].
  Tensor log_prob(const Tensor& input, KILN_LOC);
  /// The most probable class of each row, [N] int64: the head's argmax where it
  /// is in the shortlist, else the argmax of the full log-probabilities (the
  /// same answer as PyTorch's, computed for every row, without a branch on data).
  Tensor predict(const Tensor& input, KILN_LOC);
  /// log_prob given the head's output for the same input (libtorch's helper).
  Tensor _get_full_log_prob(const Tensor& input, const Tensor& head_output, KILN_LOC);
  /// The tail's weights, cluster by cluster (functional::AdaptiveTail).
  functional::AdaptiveTail tail_weights() const;

  AdaptiveLogSoftmaxWithLossOptions options;
  /// The options' cutoffs followed by n_classes.
  std::vector<int64_t> cutoffs;
  int64_t shortlist_size = 0, n_clusters = 0, head_size = 0;
  Linear head{nullptr};
  /// One Sequential(Linear(in, hsz, no bias), Linear(hsz, osz, no bias)) per cluster.
  ModuleList tail{nullptr};
};
using AdaptiveLogSoftmaxWithLoss = ModuleHolder<AdaptiveLogSoftmaxWithLossImpl>;

}  // namespace kiln::nn
