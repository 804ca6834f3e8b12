// nn layers beyond Linear: dropout, layer and batch normalisation, embedding,
// activations, and the losses of classifiers (nll, binary cross entropy, label
// smoothing). All are composites of tensor ops, so each runs eagerly, traces,
// differentiates and fuses like hand-written tensor code.
#include <cmath>
#include <numbers>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/nn.h"
#include "frontend/nn_bag.h"
#include "frontend/trace_state.h"

namespace kiln::nn {

using detail::here;

namespace {

Tensor zero_of(const Tensor& like, Loc l) {
  return zeros({}, TensorOptions(like.dtype()).device(like.device()), l);
}

void check_float(const Tensor& x, const char* op, Loc l) {
  if (!is_floating(x.dtype()))
    throw Error(std::string(op) + ": expected a floating tensor, got " + dtype_name(x.dtype()),
                here(l));
}

}  // namespace

Tensor apply_reduction(const Tensor& per_element, Reduction r, Loc l) {
  switch (r) {
    case Reduction::Mean:
      return per_element.mean(l);
    case Reduction::Sum:
      return per_element.sum(l);
    case Reduction::None:
      return per_element;
  }
  return per_element;
}

// ---- Module state ----

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out(buffers_.begin(), buffers_.end());
  if (recurse)
    for (const auto& [cname, child] : children_)
      for (auto& [bname, b] : child->named_buffers(true)) out.emplace_back(cname + "." + bname, b);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, b] : named_buffers(recurse)) out.push_back(b);
  return out;
}

Tensor& Module::register_buffer(std::string name, Tensor t) {
  buffers_.emplace_back(std::move(name), std::move(t));
  return buffers_.back().second;
}

bool Module::training_for_forward() const {
  std::weak_ptr<const void> alive = weak_from_this();
  if (!alive.expired())
    guard_constants(
        alive, [this] { return std::vector<double>{training_ ? 1.0 : 0.0}; }, name_ + "'s mode",
        {"training"});
  return training_;
}

// ---- functional ----

namespace functional {

Tensor silu(const Tensor& x, Loc l) { return x.mul(x.sigmoid(l), l); }

Tensor gelu(const Tensor& x, const std::string& approximate, Loc l) {
  if (approximate == "none") return x.gelu(l);
  if (approximate != "tanh")
    throw Error("gelu: expected approximate \"none\" or \"tanh\", got \"" + approximate + "\"",
                here(l));
  const double k = std::sqrt(2.0 / std::numbers::pi);
  Tensor inner = x.add(x.mul(x, l).mul(x, l).mul(Scalar(0.044715), l), 1, l).mul(Scalar(k), l);
  return x.mul(Scalar(0.5), l).mul(inner.tanh(l).add(Scalar(1.0), l), l);
}

Tensor leaky_relu(const Tensor& x, double negative_slope, Loc l) {
  return where(x.gt(Scalar(0), l), x, x.mul(Scalar(negative_slope), l), l);
}

Tensor softplus(const Tensor& x, double beta, double threshold, Loc l) {
  if (!(beta != 0)) throw Error("softplus: expected beta != 0, got " + std::to_string(beta), here(l));
  Tensor bx = x.mul(Scalar(beta), l);
  // The exp is taken of min(bx, threshold) so the unused branch never overflows.
  Tensor soft = bx.clamp_max(Scalar(threshold), l).exp(l).log1p(l).div(Scalar(beta), l);
  return where(bx.gt(Scalar(threshold), l), x, soft, l);
}

Tensor softsign(const Tensor& x, Loc l) { return detail::apply(OpKind::softsign, {x}, {}, here(l)); }
Tensor mish(const Tensor& x, Loc l) { return detail::apply(OpKind::mish, {x}, {}, here(l)); }

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps, Loc l) {
  check_float(x, "layer_norm", l);
  const int64_t k = int64_t(normalized_shape.size());
  bool fits = k >= 1 && k <= x.dim();
  for (int64_t i = 0; fits && i < k; ++i)
    fits = x.size(x.dim() - k + i) == normalized_shape[size_t(i)];
  if (!fits)
    throw Error("layer_norm: normalized_shape " + shape_str(normalized_shape) +
                    " is not the trailing shape of the input " + shape_str(x.sizes()),
                here(l));
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && p->sizes() != normalized_shape)
      throw Error("layer_norm: expected weight and bias of shape " + shape_str(normalized_shape) +
                      ", got " + shape_str(p->sizes()),
                  here(l));
  std::vector<int64_t> dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = x.mean(dims, true, l);
  Tensor centered = x.sub(mu, 1, l);
  Tensor var = centered.mul(centered, l).mean(dims, true, l);
  Tensor y = centered.mul(var.add(Scalar(eps), l).rsqrt(l), l);
  if (weight.defined()) y = y.mul(weight, l);
  if (bias.defined()) y = y.add(bias, 1, l);
  return y;
}

namespace {

// norm_per_channel, with the running statistics' update weight either
// `momentum` or, when defined, the 0-D tensor `factor` (BatchNorm's
// 1 / num_batches_tracked for momentum nullopt: data, also inside a trace).
Tensor weighted_norm_per_channel(const char* op, const Tensor& x, const std::vector<int64_t>& dims,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 const Tensor& weight, const Tensor& bias, bool use_input_stats,
                                 double momentum, const Tensor& factor, double eps, Loc l);
// batch_norm, the running statistics updated by `factor` when it is defined
// (BatchNormImpl::forward with momentum nullopt).
Tensor batch_norm_by(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool training, double momentum,
                     const Tensor& factor, double eps, Loc l);

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, Loc l) {
  return batch_norm_by(x, running_mean, running_var, weight, bias, training, momentum, Tensor(),
                       eps, l);
}

namespace {

Tensor batch_norm_by(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool training, double momentum,
                     const Tensor& factor, double eps, Loc l) {
  check_float(x, "batch_norm", l);
  if (x.dim() < 2)
    throw Error("batch_norm: expected an input [N, C, ...], got " + shape_str(x.sizes()), here(l));
  const int64_t c = x.size(1);
  for (const Tensor* p : {&running_mean, &running_var, &weight, &bias})
    if (p->defined() && p->sizes() != Shape{c})
      throw Error("batch_norm: expected per-channel tensors of shape [" + std::to_string(c) +
                      "], got " + shape_str(p->sizes()),
                  here(l));
  std::vector<int64_t> dims = {0};
  int64_t count = x.size(0);
  for (int64_t i = 2; i < x.dim(); ++i) {
    dims.push_back(i);
    count *= x.size(i);
  }
  if (training && count <= 1)
    throw Error("batch_norm: expected more than 1 value per channel when training, got input " +
                    shape_str(x.sizes()),
                here(l));
  return weighted_norm_per_channel("batch_norm", x, dims, running_mean, running_var, weight, bias,
                                   training, momentum, factor, eps, l);
}

}  // namespace

Tensor norm_per_channel(const char* op, const Tensor& x, const std::vector<int64_t>& dims,
                        const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool use_input_stats,
                        double momentum, double eps, Loc l) {
  return weighted_norm_per_channel(op, x, dims, running_mean, running_var, weight, bias,
                                   use_input_stats, momentum, Tensor(), eps, l);
}

namespace {

Tensor weighted_norm_per_channel(const char* op, const Tensor& x, const std::vector<int64_t>& dims,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 const Tensor& weight, const Tensor& bias, bool use_input_stats,
                                 double momentum, const Tensor& factor, double eps, Loc l) {
  const int64_t c = x.size(1);
  Shape per_channel(size_t(x.dim()), 1);
  per_channel[1] = c;
  Tensor mean, var;
  if (use_input_stats) {
    mean = x.mean(dims, true, l);
    Tensor centered = x.sub(mean, 1, l);
    var = centered.mul(centered, l).mean(dims, true, l);
    if (running_mean.defined() && running_var.defined()) {
      NoGradGuard no_grad;
      int64_t count = 1;
      for (int64_t d : dims) count *= x.size(d);
      const double unbias = double(count) / double(count - 1);
      // The statistics as [C]: averaged first over any other dim they still
      // have (instance_norm's batch: PyTorch updates a copy per plane, then
      // averages the copies).
      auto per_c = [&](const Tensor& s) {
        std::vector<int64_t> rest;
        for (int64_t d = 0; d < s.dim(); ++d)
          if (d != 1 && s.size(d) != 1) rest.push_back(d);
        return (rest.empty() ? s : s.mean(rest, true, l)).reshape({c}, l);
      };
      Tensor m = per_c(mean.detach()), v = per_c(var.detach());
      Tensor rm = running_mean, rv = running_var;  // handles sharing the buffers
      if (factor.defined()) {
        const Tensor keep = factor.neg(l).add(Scalar(1), l);
        rm.mul_(keep, l).add_(m.mul(factor, l), 1, l);
        rv.mul_(keep, l).add_(v.mul(factor.mul(Scalar(unbias), l), l), 1, l);
      } else {
        rm.mul_(Scalar(1 - momentum), l).add_(m.mul(Scalar(momentum), l), 1, l);
        rv.mul_(Scalar(1 - momentum), l).add_(v.mul(Scalar(momentum * unbias), l), 1, l);
      }
    }
  } else {
    if (!running_mean.defined() || !running_var.defined())
      throw Error(std::string(op) + ": evaluation mode needs running_mean and running_var",
                  here(l));
    mean = running_mean.reshape(per_channel, l);
    var = running_var.reshape(per_channel, l);
  }
  Tensor y = x.sub(mean, 1, l).mul(var.add(Scalar(eps), l).rsqrt(l), l);
  if (weight.defined()) y = y.mul(weight.reshape(per_channel, l), l);
  if (bias.defined()) y = y.add(bias.reshape(per_channel, l), 1, l);
  return y;
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight, Loc l) {
  if (weight.dim() != 2)
    throw Error("embedding: expected a weight [num_embeddings, dim], got " +
                    shape_str(weight.sizes()),
                here(l));
  // Each index's row, read by a gather (its gradient a scatter_add: O(indices x dim)).
  const int64_t n = indices.numel(), dim = weight.size(1);
  Tensor idx = detail::checked_indices(indices.reshape({n, 1}, l), weight.size(0), "embedding", l);
  Shape out = indices.sizes();
  out.push_back(dim);
  return detail::gather_along(weight, 0, idx.expand({n, dim}, l), l).reshape(out, l);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx, Loc l) {
  Tensor rows = embedding(indices, weight, l);
  if (padding_idx < 0) return rows;
  // The padding rows' values as they are, their gradient cut.
  Tensor at_pad = indices.eq(Scalar(static_cast<long long>(padding_idx)), l).unsqueeze(-1, l);
  return where(at_pad, rows.detach(), rows, l);
}

namespace {

// Per row of log-probabilities [N, C]: minus the entry at the row's class index,
// zero where the index is ignore_index; `valid` marks the rows that count. Other
// indices outside [0, C) are errors under `op`'s name.
struct Rows {
  Tensor nll, valid;
};
Rows nll_rows(const Tensor& logp, const Tensor& target, int64_t ignore_index, const char* op,
              Loc l) {
  if (target.dim() != 1 || target.size(0) != logp.size(0))
    throw Error(std::string(op) + ": expected class indices of shape [" +
                    std::to_string(logp.size(0)) + "], got " + shape_str(target.sizes()),
                here(l));
  Tensor valid = target.ne(Scalar(static_cast<long long>(ignore_index)), l);
  Tensor safe = where(valid, target, zeros({}, TensorOptions(target.dtype()).device(target.device()), l), l);
  Tensor idx = detail::checked_indices(safe, logp.size(1), op, l);
  Tensor picked = detail::gather_along(logp, 1, idx.unsqueeze(1, l), l).squeeze(1, l);
  return {where(valid, picked.neg(l), zero_of(logp, l), l), valid};
}

// The mean over the rows that count (PyTorch's ignore_index convention).
Tensor reduce_rows(const Rows& r, Reduction how, Loc l) {
  if (how == Reduction::Mean) return r.nll.sum(l).div(r.valid.sum(l).to(r.nll.dtype(), l), l);
  return apply_reduction(r.nll, how, l);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction r, int64_t ignore_index,
                Loc l) {
  if (log_probs.dim() != 2)
    throw Error("nll_loss: expected log-probabilities [N, C], got " + shape_str(log_probs.sizes()),
                here(l));
  return reduce_rows(nll_rows(log_probs, target, ignore_index, "nll_loss", l), r, l);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o,
                     Loc l) {
  if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
    throw Error("cross_entropy: expected label_smoothing in [0, 1], got " +
                    std::to_string(o.label_smoothing),
                here(l));
  if (logits.dim() != 2)
    throw Error("cross_entropy: expected logits of shape [N, C], got " + shape_str(logits.sizes()),
                here(l));
  Tensor logp = logits.log_softmax(1, l);
  const double eps = o.label_smoothing;
  if (is_floating(target.dtype())) {  // class probabilities
    if (target.sizes() != logits.sizes())
      throw Error("cross_entropy: probabilities of shape " + shape_str(target.sizes()) +
                      " for logits of shape " + shape_str(logits.sizes()),
                  here(l));
    Tensor t = eps > 0 ? target.mul(Scalar(1 - eps), l).add(Scalar(eps / double(logits.size(1))), l)
                       : target;
    return apply_reduction(logp.mul(t, l).sum(1, false, l).neg(l), o.reduction, l);
  }
  Rows rows = nll_rows(logp, target, o.ignore_index, "cross_entropy", l);
  if (eps > 0) {
    Tensor uniform = where(rows.valid, logp.mean(1, false, l).neg(l), zero_of(logp, l), l);
    rows.nll = rows.nll.mul(Scalar(1 - eps), l).add(uniform.mul(Scalar(eps), l), 1, l);
  }
  return reduce_rows(rows, o.reduction, l);
}

Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, Reduction r, Loc l) {
  check_float(probs, "binary_cross_entropy", l);
  if (probs.sizes() != target.sizes())
    throw Error("binary_cross_entropy: target of shape " + shape_str(target.sizes()) +
                    " for input of shape " + shape_str(probs.sizes()),
                here(l));
  Tensor lp = probs.log(l).clamp_min(Scalar(-100.0), l);
  Tensor lq = probs.neg(l).log1p(l).clamp_min(Scalar(-100.0), l);
  Tensor y = target.to(probs.dtype(), l);
  Tensor per = y.mul(lp, l).add(y.neg(l).add(Scalar(1.0), l).mul(lq, l), 1, l).neg(l);
  return apply_reduction(per, r, l);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, Reduction r,
                                        const Tensor& pos_weight, Loc l) {
  check_float(logits, "binary_cross_entropy_with_logits", l);
  if (logits.sizes() != target.sizes())
    throw Error("binary_cross_entropy_with_logits: target of shape " + shape_str(target.sizes()) +
                    " for input of shape " + shape_str(logits.sizes()),
                here(l));
  Tensor y = target.to(logits.dtype(), l);
  // log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0), without overflow.
  Tensor log_sig_neg = logits.abs(l).neg(l).exp(l).log1p(l).add(logits.neg(l).relu(l), 1, l);
  Tensor per;
  if (pos_weight.defined()) {
    Tensor w = pos_weight.sub(Scalar(1.0), l).mul(y, l).add(Scalar(1.0), l);
    per = y.neg(l).add(Scalar(1.0), l).mul(logits, l).add(w.mul(log_sig_neg, l), 1, l);
  } else {
    per = y.neg(l).add(Scalar(1.0), l).mul(logits, l).add(log_sig_neg, 1, l);
  }
  return apply_reduction(per, r, l);
}

}  // namespace functional

// ---- modules ----

DropoutImpl::DropoutImpl(double p) : Module("Dropout"), p(p) {
  if (!(p >= 0 && p <= 1))
    throw Error("Dropout: expected a probability in [0, 1], got " + std::to_string(p));
}
Tensor DropoutImpl::forward(const Tensor& x, Loc l) {
  return functional::dropout(x, p, training_for_forward(), l);
}
std::string DropoutImpl::repr() const {
  std::ostringstream s;
  s << "Dropout(p=" << p << ")";
  return s.str();
}

LayerNormImpl::LayerNormImpl(Shape shape, double eps, bool affine)
    : Module("LayerNorm"), normalized_shape(std::move(shape)), eps(eps) {
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}
Tensor LayerNormImpl::forward(const Tensor& x, Loc l) {
  return functional::layer_norm(x, normalized_shape, weight, bias, eps, l);
}
std::string LayerNormImpl::repr() const {
  std::ostringstream s;
  s << "LayerNorm(" << shape_str(normalized_shape) << ", eps=" << eps
    << ", elementwise_affine=" << (weight.defined() ? "true" : "false") << ")";
  return s.str();
}

BatchNormImpl::BatchNormImpl(int64_t n, int spatial, double eps, double momentum)
    : Module(spatial == 2 ? "BatchNorm2d" : "BatchNorm1d"),
      num_features(n),
      spatial_dims(spatial),
      eps(eps),
      momentum(momentum) {
  if (n <= 0) throw Error(name_ + ": expected num_features > 0, got " + std::to_string(n));
  weight = register_parameter("weight", ones({n}));
  bias = register_parameter("bias", zeros({n}));
  running_mean = register_buffer("running_mean", zeros({n}));
  running_var = register_buffer("running_var", ones({n}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
}
BatchNormImpl::BatchNormImpl(const BatchNormOptions& o, int spatial)
    : Module(spatial == 2 ? "BatchNorm2d" : "BatchNorm1d"),
      num_features(o.num_features()),
      spatial_dims(spatial),
      eps(o.eps()),
      momentum(o.momentum()) {
  const int64_t n = num_features;
  if (n <= 0) throw Error(name_ + ": expected num_features > 0, got " + std::to_string(n));
  if (o.affine()) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  if (o.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

Tensor BatchNormImpl::forward(const Tensor& x, Loc l) {
  const bool ok = spatial_dims == 2 ? x.dim() == 4 : (x.dim() == 2 || x.dim() == 3);
  if (!ok || x.size(1) != num_features)
    throw Error(name_ + ": expected an input " +
                    (spatial_dims == 2 ? "[N, " + std::to_string(num_features) + ", H, W]"
                                       : "[N, " + std::to_string(num_features) + "] or [N, " +
                                             std::to_string(num_features) + ", L]") +
                    ", got " + shape_str(x.sizes()),
                here(l));
  // Without running statistics (track_running_stats false) the batch's are used always.
  const bool batch_stats = !running_mean.defined() || training_for_forward();
  if (!batch_stats || !running_mean.defined())
    return functional::batch_norm(x, running_mean, running_var, weight, bias, batch_stats,
                                  momentum.value_or(0.1), eps, l);
  {
    NoGradGuard no_grad;
    num_batches_tracked.add_(Scalar(1), l);
  }
  // Without a momentum, the cumulative average: each batch weighted by
  // 1 / batches seen.
  Tensor factor;
  if (!momentum) {
    NoGradGuard no_grad;
    factor = num_batches_tracked.to(x.dtype(), l).reciprocal(l);
  }
  return functional::batch_norm_by(x, running_mean, running_var, weight, bias, true,
                                   momentum.value_or(0.0), factor, eps, l);
}
std::string BatchNormImpl::repr() const {
  std::ostringstream s;
  s << name_ << "(" << num_features << ", eps=" << eps << ", momentum=";
  if (momentum) s << *momentum; else s << "None";
  s << ")";
  return s.str();
}

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o)
    : Module("Embedding"), num_embeddings(o.num_embeddings()), embedding_dim(o.embedding_dim()) {
  padding_idx = detail::register_embedding_table(
      *this, "Embedding(" + std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) + ")",
      num_embeddings, embedding_dim, o.padding_idx(), o._weight(),
      o.max_norm() || o.scale_grad_by_freq() || o.sparse(), weight);
}
Embedding Embedding::from_pretrained(const Tensor& embeddings,
                                     const EmbeddingFromPretrainedOptions& o) {
  if (embeddings.dim() != 2)
    throw Error("Embedding::from_pretrained: expected embeddings [V, D], got " +
                shape_str(embeddings.sizes()));
  Embedding e(EmbeddingOptions(embeddings.size(0), embeddings.size(1))
                  ._weight(embeddings)
                  .padding_idx(o.padding_idx())
                  .max_norm(o.max_norm())
                  .norm_type(o.norm_type())
                  .scale_grad_by_freq(o.scale_grad_by_freq())
                  .sparse(o.sparse()));
  e->weight.requires_grad_(!o.freeze());
  return e;
}

Tensor EmbeddingImpl::forward(const Tensor& indices, Loc l) {
  return functional::embedding(indices, weight, padding_idx, l);
}
std::string EmbeddingImpl::repr() const {
  return "Embedding(" + std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) + ")";
}

Tensor GELUImpl::forward(const Tensor& x, Loc l) { return functional::gelu(x, approximate, l); }
Tensor SiLUImpl::forward(const Tensor& x, Loc l) { return functional::silu(x, l); }

}  // namespace kiln::nn
