// nn: modules with parameters (libtorch style). A module type `Foo` is a
// handle (ModuleHolder<FooImpl>) with pointer semantics: `seq->parameters()`,
// `seq(x)`. Submodules and parameters are registered by name.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;

  /// Parameters of this module and (recursively) its children, in registration order.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Parameters with dotted names ("0.weight", "fc1.bias").
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// Buffers (running statistics and other state that is not a parameter), like
  /// named_parameters.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  /// Training mode (the default) or evaluation mode, recursively.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// is_training() for a forward whose ops depend on the mode (dropout, batch
  /// norm): inside a trace, the compiled function is guarded on it, so a call
  /// after train()/eval() changed it retraces.
  bool training_for_forward() const;
  /// Drops (set_to_none, the default) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  /// Moves every parameter and buffer of this module and its children to
  /// `device` in place, as libtorch's module->to(device): each tensor keeps its
  /// handle, so parameters(), members such as lin->weight and an optimizer built
  /// on them all see the moved data. requires_grad stays, and gradients move
  /// with their parameters (as in PyTorch). Optimizer state (momentum, Adam's
  /// moments) does not move: build the optimizer after to(). On an error (no
  /// CUDA device, out of memory) nothing has moved. Not inside a trace.
  void to(Device device, KILN_LOC);
  void to(DeviceType device, KILN_LOC) { to(Device(device), loc); }
  const std::string& name() const { return name_; }
  /// "Linear(in_features=1000, out_features=100, bias=true)"-style description.
  virtual std::string repr() const { return name_ + "()"; }

  Tensor& register_parameter(std::string name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(std::string name, Tensor t);
  template <class Holder>
  Holder register_module(std::string name, Holder h) {
    children_.emplace_back(std::move(name), h.ptr());
    return h;
  }
  void register_module_ptr(std::string name, std::shared_ptr<Module> m) {
    children_.emplace_back(std::move(name), std::move(m));
  }

 protected:
  std::string name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Pointer-semantics handle to a module implementation.
template <class Impl>
class ModuleHolder {
 public:
  template <class... Args>
  explicit ModuleHolder(Args&&... args) : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl* operator->() const { return impl_.get(); }
  Impl& operator*() const { return *impl_; }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  /// Calls forward(), passing the caller's source line when forward takes one.
  decltype(auto) operator()(const Tensor& x, KILN_LOC) const {
    if constexpr (requires(Impl& m) { m.forward(x, loc); })
      return impl_->forward(x, loc);
    else
      return impl_->forward(x);
  }
  decltype(auto) operator()(const Tensor& a, const Tensor& b, KILN_LOC) const {
    if constexpr (requires(Impl& m) { m.forward(a, b, loc); })
      return impl_->forward(a, b, loc);
    else
      return impl_->forward(a, b);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

/// y = x W^T + b, initialised like PyTorch (uniform in +-1/sqrt(in_features)).
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias;
  int64_t in_features, out_features;
};

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& x, KILN_LOC) { return x.relu(loc); }
};
class SigmoidImpl : public Module {
 public:
  SigmoidImpl() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x, KILN_LOC) { return x.sigmoid(loc); }
};
class TanhImpl : public Module {
 public:
  TanhImpl() : Module("Tanh") {}
  Tensor forward(const Tensor& x, KILN_LOC) { return x.tanh(loc); }
};
/// Wraps any Tensor -> Tensor callable as a module (torch::nn::Functional).
class FunctionalImpl : public Module {
 public:
  explicit FunctionalImpl(std::function<Tensor(const Tensor&)> f) : Module("Functional"), f_(std::move(f)) {}
  Tensor forward(const Tensor& x) { return f_(x); }

 private:
  std::function<Tensor(const Tensor&)> f_;
};

/// Runs its modules in order; children are named "0", "1", ...
class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class... Holders>
  explicit SequentialImpl(Holders&&... hs) : Module("Sequential") {
    (push_back(std::forward<Holders>(hs)), ...);
  }
  template <class Holder>
  void push_back(Holder h) {
    auto impl = h.ptr();
    steps_.push_back([impl](const Tensor& x) { return impl->forward(x); });
    register_module_ptr(std::to_string(children_.size()), impl);
  }
  Tensor forward(const Tensor& x);
  size_t size() const { return steps_.size(); }
  std::string repr() const override;

 private:
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};

/// Mean (default), sum or no reduction of a per-element loss.
enum class Reduction { Mean, Sum, None };

/// Squared error: mean((input - target)^2).
class MSELossImpl : public Module {
 public:
  explicit MSELossImpl(Reduction r = Reduction::Mean) : Module("MSELoss"), reduction(r) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC);
  Reduction reduction;
};

/// Cross entropy of logits [N, C] against class indices [N] (int64) or
/// class probabilities [N, C].
class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(Reduction r = Reduction::Mean) : Module("CrossEntropyLoss"), reduction(r) {}
  Tensor forward(const Tensor& logits, const Tensor& target, KILN_LOC);
  Reduction reduction;
};

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  double p;
};
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};
/// BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]): one
/// implementation, the input rank checked per kind.
class BatchNormImpl : public Module {
 public:
  BatchNormImpl(int64_t num_features, int spatial_dims, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias, running_mean, running_var;
  int64_t num_features;
  int spatial_dims;
  double eps, momentum;
};
class BatchNorm1dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm1dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNormImpl(num_features, 1, eps, momentum) {}
};
class BatchNorm2dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm2dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNormImpl(num_features, 2, eps, momentum) {}
};
/// A table of num_embeddings vectors of size embedding_dim, initialised N(0, 1).
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices, KILN_LOC);
  std::string repr() const override;
  Tensor weight;
  int64_t num_embeddings, embedding_dim;
};
class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x, KILN_LOC) { return x.flatten(start_dim, end_dim, loc); }
  int64_t start_dim, end_dim;
};
class GELUImpl : public Module {
 public:
  explicit GELUImpl(std::string approximate = "none") : Module("GELU"), approximate(std::move(approximate)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string approximate;
};
class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  Tensor forward(const Tensor& x, KILN_LOC);
};

using Linear = ModuleHolder<LinearImpl>;
using Dropout = ModuleHolder<DropoutImpl>;
using LayerNorm = ModuleHolder<LayerNormImpl>;
using BatchNorm1d = ModuleHolder<BatchNorm1dImpl>;
using BatchNorm2d = ModuleHolder<BatchNorm2dImpl>;
using Embedding = ModuleHolder<EmbeddingImpl>;
using Flatten = ModuleHolder<FlattenImpl>;
using GELU = ModuleHolder<GELUImpl>;
using SiLU = ModuleHolder<SiLUImpl>;
using ReLU = ModuleHolder<ReLUImpl>;
using Sigmoid = ModuleHolder<SigmoidImpl>;
using Tanh = ModuleHolder<TanhImpl>;
using Functional = ModuleHolder<FunctionalImpl>;
using Sequential = ModuleHolder<SequentialImpl>;
using MSELoss = ModuleHolder<MSELossImpl>;
using CrossEntropyLoss = ModuleHolder<CrossEntropyLossImpl>;

/// A per-element loss reduced as `r` says (the losses' last step).
Tensor apply_reduction(const Tensor& per_element, Reduction r, KILN_LOC);

/// Options of cross_entropy: class indices equal to ignore_index count for
/// nothing (not in the mean either); label_smoothing mixes the one-hot target
/// with the uniform distribution (PyTorch's definition).
struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};

namespace functional {
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r = Reduction::Mean, KILN_LOC);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction r = Reduction::Mean, KILN_LOC);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options,
                     KILN_LOC);
Tensor one_hot(const Tensor& indices, int64_t num_classes, KILN_LOC);
/// Negative log likelihood of log-probabilities [N, C] at class indices [N].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction r = Reduction::Mean,
                int64_t ignore_index = -100, KILN_LOC);
/// -(y log p + (1 - y) log(1 - p)), each log clamped at -100 as in PyTorch.
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, Reduction r = Reduction::Mean,
                            KILN_LOC);
/// binary_cross_entropy(sigmoid(x), y) computed stably from the logits;
/// pos_weight (optional, broadcast over the last dim) weighs the positive term.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction r = Reduction::Mean,
                                        const Tensor& pos_weight = Tensor(), KILN_LOC);
Tensor silu(const Tensor& x, KILN_LOC);
/// approximate: "none" (the erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none", KILN_LOC);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01, KILN_LOC);
/// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0, KILN_LOC);
/// Zeroes each element with probability p and scales the rest by 1 / (1 - p)
/// when training; the identity otherwise. Draws from the generator (manual_seed).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, KILN_LOC);
/// Normalises over the trailing dims `normalized_shape` (biased variance),
/// then scales and shifts by weight and bias when given.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5, KILN_LOC);
/// Normalises x [N, C, ...] per channel: with the batch's statistics when
/// training (and then updates running_mean/running_var in place, the variance
/// unbiased, by `momentum`), else with the running ones.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5, KILN_LOC);
/// Rows of `weight` [V, D] at integer indices of any shape: [..., D].
Tensor embedding(const Tensor& indices, const Tensor& weight, KILN_LOC);
/// softmax(q k^T * scale + mask) v over the last two dims, as PyTorch's
/// F.scaled_dot_product_attention: q [..., L, E], k [..., S, E], v [..., S, Ev]
/// (leading dims broadcast) -> [..., L, Ev]; scale defaults to 1/sqrt(E);
/// is_causal lets query i see keys j <= i. Without attn_mask and dropout it is
/// one op that streams over blocks of keys (runtime/attention.h): no L x S
/// matrix is held, forward or backward (the gradient recomputes it block by
/// block). attn_mask (bool: true = take part; or float: added to the scores)
/// and dropout_p > 0 use the composite of matmul, softmax and dropout, which
/// holds the scores, as PyTorch's math kernel does.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    KILN_LOC);
}  // namespace functional

namespace utils {
/// Scales the gradients of `params` in place so that their joint norm (the
/// norm_type-norm of all elements; INFINITY for the largest magnitude) is at
/// most max_norm, as torch.nn.utils.clip_grad_norm_: each gradient is multiplied
/// by min(1, max_norm / (total + 1e-6)). Returns the total norm before
/// clipping, a 0-dim tensor; nothing is read back to the host, so a traced step
/// clips inside its plan. Parameters without a gradient are skipped.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       KILN_LOC);
}  // namespace utils

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace kiln::nn
