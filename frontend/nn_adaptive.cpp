// AdaptiveLogSoftmaxWithLoss (nn_adaptive.h) as a composite of table ops.
//
//   head      log_softmax(input W_h^T + b_h) over shortlist + n_clusters columns,
//             read at the target (shortlist) or at the target's cluster column
//   cluster i log_softmax(input P_i^T O_i^T) read at the row's target -
//             cutoffs[i], for the rows whose target is in cluster i only, 0 for
//             the others: the projection input P_i^T for every row (small),
//             then the cluster_logprob op (runtime/cluster_logprob.h), whose
//             work is proportional to the cluster's rows, as PyTorch's
//             index_select of them
//   output    the cluster's value plus the head's: PyTorch's sum, in its order
// A log-softmax read at one column is that column's logit (the row's dot
// product with the column's weights) minus the row's logsumexp
// (log_softmax_at): no [N, cluster size] matrix of log-probabilities is kept.
//
// Every shape depends on the input's alone, so a trace records one graph for
// any targets (the row selection happens inside cluster_logprob's kernel); the
// targets' range is checked by check_index (at once eagerly, by the plan when
// traced). adaptive_log_prob (every class of every row) stays dense.
#include "frontend/nn_adaptive.h"

#include <cmath>
#include <sstream>
#include <string>

#include "frontend/dispatch.h"

namespace kiln::nn {

using detail::here;

namespace {

constexpr const char* kName = "AdaptiveLogSoftmaxWithLoss";

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// What the weights say: in_features, the shortlist and every cluster's bounds.
struct Layout {
  int64_t in_features = 0, shortlist = 0;
  std::vector<int64_t> bounds;  // shortlist, then each cluster's end; the last is n_classes
};

Layout layout_of(const Tensor& head_weight, const Tensor& head_bias,
                 const functional::AdaptiveTail& tail, Loc l) {
  const int64_t clusters = static_cast<int64_t>(tail.size());
  if (!head_weight.defined() || head_weight.dim() != 2 || head_weight.size(0) <= clusters)
    throw Error(
        std::string(kName) + ": expected a head weight [shortlist + " + std::to_string(clusters) +
            " clusters, in_features] with a shortlist of " + "at least one class, got " +
            (head_weight.defined() ? shape_str(head_weight.sizes()) : "an undefined tensor"),
        here(l));
  Layout s;
  s.in_features = head_weight.size(1);
  s.shortlist = head_weight.size(0) - clusters;
  if (head_bias.defined() && head_bias.sizes() != Shape{head_weight.size(0)})
    throw Error(std::string(kName) + ": expected a head bias [" +
                    std::to_string(head_weight.size(0)) + "], got " + shape_str(head_bias.sizes()),
                here(l));
  s.bounds.push_back(s.shortlist);
  for (int64_t i = 0; i < clusters; ++i) {
    const Tensor &p = tail[i].first, &o = tail[i].second;
    const bool ok = p.defined() && o.defined() && p.dim() == 2 && o.dim() == 2 &&
                    p.size(1) == s.in_features && o.size(1) == p.size(0) && o.size(0) > 0;
    if (!ok)
      throw Error(std::string(kName) + ": expected cluster " + std::to_string(i) +
                      "'s weights to be a projection [hsz, " + std::to_string(s.in_features) +
                      "] and an output layer [osz > 0, hsz], got " +
                      (p.defined() ? shape_str(p.sizes()) : "undefined") + " and " +
                      (o.defined() ? shape_str(o.sizes()) : "undefined"),
                  here(l));
    s.bounds.push_back(s.bounds.back() + o.size(0));
  }
  return s;
}

void check_input(const Tensor& input, int64_t rank, int64_t in_features, const char* what, Loc l) {
  if (!is_floating(input.dtype()))
    throw Error(
        std::string(kName) + ": expected a floating input, got " + dtype_name(input.dtype()),
        here(l));
  if (input.dim() != rank || input.size(-1) != in_features)
    throw Error(std::string(kName) + ": expected an input " + (rank == 2 ? "[N, " : "[") +
                    std::to_string(in_features) + "]" + what + ", got " + shape_str(input.sizes()),
                here(l));
}

Tensor linear_no_bias(const Tensor& x, const Tensor& w, Loc l) {
  return x.matmul(w.t(l), l);
}

Tensor head_output_of(const Tensor& input, const Tensor& weight, const Tensor& bias, Loc l) {
  const Tensor y = linear_no_bias(input, weight, l);
  return bias.defined() ? y.add(bias, 1, l) : y;
}

Tensor cluster_output(const Tensor& input, const std::pair<Tensor, Tensor>& w, Loc l) {
  return linear_no_bias(linear_no_bias(input, w.first, l), w.second, l);
}

// log_softmax(features W^T + bias, 1) read at one column per row (the head):
// the column's logit, as the row's dot product with the column's weights,
// minus the row's logsumexp. No [N, columns] matrix of log-probabilities is
// made, and the gradient of the picked logit is N rows of weights
// (index_select's), not a scatter into a matrix of the logits' size: the
// backward makes one pass over the logits (softmax times the row's gradient).
Tensor log_softmax_at(const Tensor& features, const Tensor& weight, const Tensor& bias,
                      const Tensor& logits, const Tensor& columns, Loc l) {
  Tensor picked = features.mul(weight.index_select(0, columns, l), l).sum(1, false, l);
  if (bias.defined()) picked = picked.add(bias.index_select(0, columns, l), 1, l);
  return picked.sub(logits.logsumexp(1, false, l), 1, l);
}

// log_prob from the head's output: the shortlist's columns, then each
// cluster's log-probabilities plus the head's log-probability of the cluster.
Tensor full_log_prob(const Tensor& input, const Tensor& head_output,
                     const functional::AdaptiveTail& tail, int64_t shortlist, Loc l) {
  const Tensor head_lp = head_output.log_softmax(1, l);
  std::vector<Tensor> pieces{head_lp.narrow(1, 0, shortlist, l)};
  for (size_t i = 0; i < tail.size(); ++i)
    pieces.push_back(cluster_output(input, tail[i], l)
                         .log_softmax(1, l)
                         .add(head_lp.narrow(1, shortlist + static_cast<int64_t>(i), 1, l), 1, l));
  return cat(pieces, 1, l);
}

}  // namespace

namespace functional {

ASMoutput adaptive_log_softmax_with_loss(const Tensor& input, const Tensor& target,
                                         const Tensor& head_weight, const Tensor& head_bias,
                                         const AdaptiveTail& tail, Loc l) {
  const Layout s = layout_of(head_weight, head_bias, tail, l);
  const int64_t n_classes = s.bounds.back();
  const bool batched = target.dim() == 1;
  if (target.dim() > 1)
    throw Error(std::string(kName) +
                    ": expected a target of 0 or 1 dims (one class per row), got " +
                    shape_str(target.sizes()),
                here(l));
  check_input(input, batched ? 2 : 1, s.in_features,
              batched ? " for a target [N]" : " for a 0-dim target", l);
  if (batched && input.size(0) != target.size(0))
    throw Error(std::string(kName) + ": expected input and target of the same batch size, got " +
                    shape_str(input.sizes()) + " and " + shape_str(target.sizes()),
                here(l));
  const Tensor x = batched ? input : input.unsqueeze(0, l);
  const Tensor t =
      detail::checked_indices(batched ? target : target.unsqueeze(0, l), n_classes, kName, l);
  const TensorOptions ints = TensorOptions(t.dtype()).device(t.device());

  // Each cluster for the rows whose target it holds (0 for the others).
  Tensor output, gather_inds = t;
  for (size_t i = 0; i < tail.size(); ++i) {
    const int64_t low = s.bounds[i], high = s.bounds[i + 1];
    Tensor in_cluster = t.ge(Scalar(low), l);
    if (high < n_classes) in_cluster = in_cluster & t.lt(Scalar(high), l);
    const Tensor hidden = linear_no_bias(x, tail[i].first, l);
    const Tensor kept = detail::cluster_log_prob(hidden, tail[i].second, t, low, l);
    output = output.defined() ? output.add(kept, 1, l) : kept;
    gather_inds =
        where(in_cluster, full({}, Scalar(s.shortlist + static_cast<int64_t>(i)), ints, l),
              gather_inds, l);
  }
  const Tensor head = log_softmax_at(x, head_weight, head_bias,
                                     head_output_of(x, head_weight, head_bias, l), gather_inds, l);
  output = output.defined() ? output.add(head, 1, l) : head;
  const Tensor loss = output.neg(l).mean(l);
  return ASMoutput(batched ? output : output.squeeze(0, l), loss);
}

Tensor adaptive_log_prob(const Tensor& input, const Tensor& head_weight, const Tensor& head_bias,
                         const AdaptiveTail& tail, Loc l) {
  const Layout s = layout_of(head_weight, head_bias, tail, l);
  check_input(input, 2, s.in_features, "", l);
  return full_log_prob(input, head_output_of(input, head_weight, head_bias, l), tail, s.shortlist,
                       l);
}

}  // namespace functional

AdaptiveLogSoftmaxWithLossImpl::AdaptiveLogSoftmaxWithLossImpl(AdaptiveLogSoftmaxWithLossOptions o)
    : Module(kName), options(std::move(o)) {
  const SourceLoc where = SourceLoc::from(options.loc);
  const std::vector<int64_t>& c = options.cutoffs();
  const int64_t in = options.in_features(), n = options.n_classes();
  if (in <= 0 || n < 2)
    throw Error(std::string(kName) + ": expected in_features >= 1 and n_classes >= 2, got " +
                    std::to_string(in) + " and " + std::to_string(n),
                where);
  bool increasing = !c.empty() && c.front() >= 1 && c.back() <= n - 1;
  for (size_t i = 1; increasing && i < c.size(); ++i) increasing = c[i] > c[i - 1];
  if (!increasing)
    throw Error(std::string(kName) +
                    ": expected cutoffs that increase strictly, each in [1, n_classes - 1 = " +
                    std::to_string(n - 1) + "], got " + list_str(c),
                where);
  if (!(options.div_value() > 0) || !std::isfinite(options.div_value()))
    throw Error(std::string(kName) + ": expected a positive div_value, got " +
                    std::to_string(options.div_value()),
                where);
  cutoffs = c;
  cutoffs.push_back(n);
  shortlist_size = cutoffs[0];
  n_clusters = static_cast<int64_t>(cutoffs.size()) - 1;
  head_size = shortlist_size + n_clusters;
  head = register_module("head", Linear(LinearOptions(in, head_size).bias(options.head_bias())));
  tail = register_module("tail", ModuleList());
  for (int64_t i = 0; i < n_clusters; ++i) {
    const auto hsz =
        static_cast<int64_t>(double(in) / std::pow(options.div_value(), double(i + 1)));
    if (hsz < 1) {
      std::ostringstream s;
      s << kName << ": cluster " << i << " would project " << in << " features to " << in << " / "
        << options.div_value() << "^" << i + 1
        << " < 1 (expected fewer cutoffs or a smaller div_value)";
      throw Error(s.str(), where);
    }
    const int64_t osz = cutoffs[i + 1] - cutoffs[i];
    tail->push_back(Sequential(Linear(LinearOptions(in, hsz).bias(false)),
                               Linear(LinearOptions(hsz, osz).bias(false))));
  }
}

functional::AdaptiveTail AdaptiveLogSoftmaxWithLossImpl::tail_weights() const {
  functional::AdaptiveTail w;
  for (size_t i = 0; i < tail->size(); ++i) {
    const auto seq = tail->ptr<SequentialImpl>(i);
    w.emplace_back(seq->ptr(0)->as<LinearImpl>()->weight, seq->ptr(1)->as<LinearImpl>()->weight);
  }
  return w;
}

ASMoutput AdaptiveLogSoftmaxWithLossImpl::forward(const Tensor& input, const Tensor& target,
                                                  Loc l) {
  return functional::adaptive_log_softmax_with_loss(input, target, head->weight, head->bias,
                                                    tail_weights(), l);
}

Tensor AdaptiveLogSoftmaxWithLossImpl::log_prob(const Tensor& input, Loc l) {
  return functional::adaptive_log_prob(input, head->weight, head->bias, tail_weights(), l);
}

Tensor AdaptiveLogSoftmaxWithLossImpl::_get_full_log_prob(const Tensor& input,
                                                          const Tensor& head_output, Loc l) {
  check_input(input, 2, options.in_features(), "", l);
  if (head_output.sizes() != Shape{input.size(0), head_size})
    throw Error(std::string(kName) + ": expected a head output [" + std::to_string(input.size(0)) +
                    ", " + std::to_string(head_size) + "], got " + shape_str(head_output.sizes()),
                here(l));
  return full_log_prob(input, head_output, tail_weights(), shortlist_size, l);
}

Tensor AdaptiveLogSoftmaxWithLossImpl::predict(const Tensor& input, Loc l) {
  check_input(input, 2, options.in_features(), "", l);
  const Tensor head_output = head_output_of(input, head->weight, head->bias, l);
  const Tensor best_head = head_output.argmax(1, false, l);
  const Tensor best = _get_full_log_prob(input, head_output, l).argmax(1, false, l);
  return where(best_head.lt(Scalar(shortlist_size), l), best_head, best, l);
}

}  // namespace kiln::nn
