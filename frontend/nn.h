// nn: modules with parameters (libtorch style). A module type `Foo` is a
// handle (ModuleHolder<FooImpl>) with pointer semantics: `seq->parameters()`,
// `seq(x)`. Submodules and parameters are registered by name.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/ordered_dict.h"
#include "frontend/tensor.h"

/// One option of a libtorch-style options struct: a setter that returns the
/// struct (for chaining, `LinearOptions(4, 2).bias(false)`), a getter, and the
/// field `name_` (followed by its default: `KILN_ARG(double, eps) = 1e-5;`).
#define KILN_ARG(T, name)          \
  auto& name(const T& new_value) { \
    this->name##_ = new_value;     \
    return *this;                  \
  }                                \
  const T& name() const {          \
    return name##_;                \
  }                                \
  T name##_

namespace kiln::serialize {
class OutputArchive;
class InputArchive;
}  // namespace kiln::serialize

namespace kiln::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;

  /// Parameters of this module and (recursively) its children, in registration order.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Parameters with dotted names ("0.weight", "fc1.bias"), in order; each item
  /// has key()/value() and first/second.
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  /// Buffers (running statistics and other state that is not a parameter), like
  /// named_parameters.
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const {
    return OrderedDict<std::string, std::shared_ptr<Module>>(children_.begin(), children_.end());
  }
  /// This module and every descendant, depth first (this one first unless
  /// include_self is false); named_modules() names them with dotted paths ("" for this one).
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules(const std::string& prefix = "",
                                                                  bool include_self = true);
  /// Calls fn on this module and every descendant, depth first (libtorch's apply).
  void apply(const std::function<void(Module&)>& fn);
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
  /// libtorch's forms: non_blocking is accepted (copies complete before return).
  void to(Device device, bool non_blocking, KILN_LOC) { to(device, loc); }
  /// Converts every floating parameter and buffer (and gradient) to `dtype` in
  /// place, keeping each tensor's handle, as module->to(torch::kFloat64).
  /// Integer buffers keep their dtype, as in PyTorch. Not inside a trace.
  void to(DType dtype, bool non_blocking = false, KILN_LOC);
  void to(Device device, DType dtype, bool non_blocking = false, KILN_LOC) {
    to(device, loc);
    to(dtype, non_blocking, loc);
  }
  const std::string& name() const { return name_; }
  /// This module as a T (a module type or its holder, nn::Linear), or nullptr.
  template <class T>
  auto* as() {
    if constexpr (requires { typename T::ContainedType; })
      return dynamic_cast<typename T::ContainedType*>(this);
    else
      return dynamic_cast<T*>(this);
  }
  /// Writes the parameters and buffers by name, and each child as a nested
  /// archive (libtorch's Module::save); load reads them back in place, every
  /// tensor keeping its handle (frontend/archive.cpp).
  virtual void save(serialize::OutputArchive& archive) const;
  virtual void load(serialize::InputArchive& archive);
  /// "Linear(in_features=1000, out_features=100, bias=true)"-style description.
  /// The default: the module's name (a module of your own: its class name)
  /// and its children, one per line, as libtorch prints a module.
  virtual std::string repr() const;

  /// A deep copy (libtorch's clone()): a new module of this type and options,
  /// its parameters and buffers copies of these (and their requires_grad, and the
  /// training mode), moved to `device` when given. Linear, LayerNorm, Dropout,
  /// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder have one;
  /// the default throws (a module of one's own: override it, returning
  /// copied_into(a new module of the type)).
  virtual std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const;

  Tensor& register_parameter(std::string name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(std::string name, Tensor t);
  template <class Holder>
    requires requires(const Holder& h) { h.ptr(); }
  Holder register_module(std::string name, Holder h) {
    children_.emplace_back(std::move(name), h.ptr());
    return h;
  }
  /// A child held by shared_ptr (std::make_shared<Net>()).
  template <class M>
    requires std::is_base_of_v<Module, M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }
  /// Replaces the child registered as `name` (libtorch's replace_module).
  template <class Holder>
    requires requires(const Holder& h) { h.ptr(); }
  Holder replace_module(const std::string& name, Holder h) {
    for (auto& [n, c] : children_)
      if (n == name) c = h.ptr();
    return h;
  }
  void register_module_ptr(std::string name, std::shared_ptr<Module> m) {
    children_.emplace_back(std::move(name), std::move(m));
  }

 protected:
  /// clone()'s second half: copies this module's parameter and buffer values,
  /// their requires_grad and the training modes into `fresh` (a new module of
  /// this type and options: the same names and shapes), then moves it to `device`.
  std::shared_ptr<Module> copied_into(std::shared_ptr<Module> fresh,
                                      const std::optional<Device>& device) const;

  std::string name_;
  bool training_ = true;
  OrderedDict<std::string, Tensor> params_ = OrderedDict<std::string, Tensor>("Parameter");
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Pointer-semantics handle to a module implementation.
template <class Impl>
class ModuleHolder {
 public:
  using ContainedType = Impl;
  template <class... Args>
  explicit ModuleHolder(Args&&... args) : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  /// An empty holder, to be assigned later (libtorch's `nn::Linear fc{nullptr}`).
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit, as libtorch
  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  Impl* get() const { return impl_.get(); }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }
  /// The contained module's operator[] (a ModuleList's, a ModuleDict's, ...).
  template <class Arg>
    requires requires(Impl& m, Arg&& a) { m[std::forward<Arg>(a)]; }
  decltype(auto) operator[](Arg&& arg) const {
    return (*checked())[std::forward<Arg>(arg)];
  }
  /// Calls forward() with any other arguments.
  template <class... A>
    requires(sizeof...(A) == 0 || sizeof...(A) > 2 ||
             !std::conjunction_v<std::is_convertible<A, const Tensor&>...>)
  decltype(auto) operator()(A&&... a) const {
    return checked()->forward(std::forward<A>(a)...);
  }
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
  Impl* checked() const {
    if (!impl_)
      throw Error("an empty module holder was used (it was made from nullptr and not assigned)");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

/// y = x W^T + b, initialised like PyTorch (uniform in +-1/sqrt(in_features)).
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  KILN_ARG(int64_t, in_features);
  KILN_ARG(int64_t, out_features);
  KILN_ARG(bool, bias) = true;
};

class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  explicit LinearImpl(const LinearOptions& o)
      : LinearImpl(o.in_features(), o.out_features(), o.bias()) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<LinearImpl>(in_features, out_features, bias.defined()), device);
  }
  Tensor weight, bias;
  int64_t in_features, out_features;
};

/// ReLU's options: inplace is accepted (the result is the same).
struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(bool, inplace);
};
class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  explicit ReLUImpl(const ReLUOptions&) : ReLUImpl() {}
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
/// Wraps a function of a tensor as a module (torch::nn::Functional): a lambda,
/// or a function passed by name with arguments bound after the input, as
/// Functional(torch::leaky_relu, 0.2) or Functional(kiln::softmax, 1). The
/// source line of the forward() call reaches the function (its TensorAt first
/// parameter, or its trailing source_location one).
class FunctionalImpl : public Module {
 public:
  template <class F, class... Args>
  explicit FunctionalImpl(F f, Args... args)
      : Module("Functional"),
        f_([f = std::move(f), ... args = std::move(args)](const Tensor& x, Loc loc) {
          if constexpr (std::is_invocable_v<const F&, TensorAt, const Args&...>)
            return Tensor(f(TensorAt(x, loc), args...));
          else if constexpr (std::is_invocable_v<const F&, const Tensor&, const Args&..., Loc>)
            return Tensor(f(x, args..., loc));
          else
            return Tensor(f(x, args...));
        }) {}
  Tensor forward(const Tensor& x, KILN_LOC) { return f_(x, loc); }

 private:
  std::function<Tensor(const Tensor&, Loc)> f_;
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
    requires requires(const Holder& h) { h.ptr(); }
  void push_back(Holder h) { push_back(std::to_string(children_.size()), h.ptr()); }
  template <class Holder>
    requires requires(const Holder& h) { h.ptr(); }
  void push_back(std::string name, Holder h) { push_back(std::move(name), h.ptr()); }
  /// A module held by shared_ptr, optionally named (else "0", "1", ...).
  template <class M>
    requires std::is_base_of_v<Module, M>
  void push_back(std::shared_ptr<M> impl) {
    push_back(std::to_string(children_.size()), std::move(impl));
  }
  template <class M>
    requires std::is_base_of_v<Module, M>
  void push_back(std::string name, std::shared_ptr<M> impl) {
    steps_.push_back([impl](const Tensor& x, Loc loc) {
      if constexpr (requires(M & m) { m.forward(x, loc); })
        return Tensor(impl->forward(x, loc));
      else
        return Tensor(impl->forward(x));
    });
    register_module_ptr(std::move(name), impl);
  }
  Tensor forward(const Tensor& x, KILN_LOC);
  /// The i-th module.
  std::shared_ptr<Module> ptr(size_t i) const { return children_.at(i).second; }
  std::shared_ptr<Module> operator[](size_t i) const { return ptr(i); }
  size_t size() const { return steps_.size(); }
  std::string repr() const override;

 private:
  std::vector<std::function<Tensor(const Tensor&, Loc)>> steps_;
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
struct CrossEntropyOptions;
class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(Reduction r = Reduction::Mean) : Module("CrossEntropyLoss"), reduction(r) {}
  /// With ignore_index and label_smoothing too.
  explicit CrossEntropyLossImpl(const CrossEntropyOptions& o);
  Tensor forward(const Tensor& logits, const Tensor& target, KILN_LOC);
  Reduction reduction;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};

/// Dropout's options (also Dropout2d's). inplace is accepted; the result is the same.
struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(double, p);
  KILN_ARG(bool, inplace) = false;
};

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  explicit DropoutImpl(const DropoutOptions& o) : DropoutImpl(o.p()) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<DropoutImpl>(p), device);
  }
  double p;
};
struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  KILN_ARG(Shape, normalized_shape);
  KILN_ARG(double, eps) = 1e-5;
  KILN_ARG(bool, elementwise_affine) = true;
};

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNormImpl(const LayerNormOptions& o)
      : LayerNormImpl(o.normalized_shape(), o.eps(), o.elementwise_affine()) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<LayerNormImpl>(normalized_shape, eps, weight.defined()),
                       device);
  }
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};
/// BatchNorm's options: without `affine` there is no weight and bias; without
/// track_running_stats no running statistics, and the batch's are used always.
/// A momentum of nullopt makes the running statistics a cumulative average
/// (each batch weighted 1 / num_batches_tracked), as libtorch's.
struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  KILN_ARG(int64_t, num_features);
  KILN_ARG(double, eps) = 1e-5;
  KILN_ARG(std::optional<double>, momentum) = 0.1;
  KILN_ARG(bool, affine) = true;
  KILN_ARG(bool, track_running_stats) = true;
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;

/// BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]): one
/// implementation, the input rank checked per kind.
class BatchNormImpl : public Module {
 public:
  BatchNormImpl(int64_t num_features, int spatial_dims, double eps = 1e-5, double momentum = 0.1);
  BatchNormImpl(const BatchNormOptions& o, int spatial_dims);
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias, running_mean, running_var;
  /// With running statistics: an int64 0-D buffer counting the training
  /// batches seen (libtorch's), which momentum nullopt averages by.
  Tensor num_batches_tracked;
  int64_t num_features;
  int spatial_dims;
  double eps;
  std::optional<double> momentum;
};
class BatchNorm1dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm1dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNormImpl(num_features, 1, eps, momentum) {}
  explicit BatchNorm1dImpl(const BatchNormOptions& o) : BatchNormImpl(o, 1) {}
};
class BatchNorm2dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm2dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNormImpl(num_features, 2, eps, momentum) {}
  explicit BatchNorm2dImpl(const BatchNormOptions& o) : BatchNormImpl(o, 2) {}
};
/// A table of num_embeddings vectors of size embedding_dim, initialised N(0, 1)
/// (or given as _weight). With padding_idx (negative counts from the end), that
/// row starts at zero and receives no gradient. max_norm, scale_grad_by_freq
/// and sparse are not supported: the module refuses them.
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  KILN_ARG(int64_t, num_embeddings);
  KILN_ARG(int64_t, embedding_dim);
  KILN_ARG(std::optional<int64_t>, padding_idx);
  KILN_ARG(std::optional<double>, max_norm);
  KILN_ARG(double, norm_type) = 2.0;
  KILN_ARG(bool, scale_grad_by_freq) = false;
  KILN_ARG(bool, sparse) = false;
  KILN_ARG(Tensor, _weight);
};

class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& o);
  Tensor forward(const Tensor& indices, KILN_LOC);
  std::string repr() const override;
  Tensor weight;
  int64_t num_embeddings, embedding_dim;
  /// The padding row, in [0, num_embeddings), or -1 for none.
  int64_t padding_idx = -1;
};
struct FlattenOptions {
  KILN_ARG(int64_t, start_dim) = 1;
  KILN_ARG(int64_t, end_dim) = -1;
};

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  explicit FlattenImpl(const FlattenOptions& o) : FlattenImpl(o.start_dim(), o.end_dim()) {}
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
/// The table gets no gradient unless freeze is false (libtorch's
/// EmbeddingFromPretrainedOptions).
struct EmbeddingFromPretrainedOptions {
  KILN_ARG(bool, freeze) = true;
  KILN_ARG(std::optional<int64_t>, padding_idx);
  KILN_ARG(std::optional<double>, max_norm);
  KILN_ARG(double, norm_type) = 2.0;
  KILN_ARG(bool, scale_grad_by_freq) = false;
  KILN_ARG(bool, sparse) = false;
};
/// Embedding's holder, with libtorch's from_pretrained.
class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  /// An embedding over `embeddings` [V, D] itself (not a copy), frozen unless told.
  static Embedding from_pretrained(const Tensor& embeddings,
                                   const EmbeddingFromPretrainedOptions& options = {});
};
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

/// How pad fills the new border: a constant; the input mirrored about its
/// edge element (reflect: the edge is not repeated); the edge element repeated
/// (replicate); or the other end of the input (circular: wrapping around).
enum class PadMode { Constant, Reflect, Replicate, Circular };
const char* pad_mode_name(PadMode mode);

namespace functional {
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r = Reduction::Mean, KILN_LOC);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction r = Reduction::Mean, KILN_LOC);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options,
                     KILN_LOC);
/// [..., num_classes] int64: 1 at each index, 0 elsewhere (torch.nn.functional.one_hot).
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
/// x / (1 + |x|): the op table's composite softsign (ops.def), one fused kernel when traced.
Tensor softsign(const Tensor& x, KILN_LOC);
/// x tanh(softplus(x)): the op table's composite mish (ops.def).
Tensor mish(const Tensor& x, KILN_LOC);
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
/// batch_norm's and instance_norm's shared body, their checks done: x [N, C,
/// ...] normalised by the mean and biased variance over `dims` when
/// use_input_stats (running_mean and running_var, when given, then updated
/// with those statistics averaged over the dims but the channels', the
/// variance unbiased), else by running_mean and running_var; then scaled and
/// shifted per channel by weight and bias when given. `op` names errors.
Tensor norm_per_channel(const char* op, const Tensor& x, const std::vector<int64_t>& dims,
                        const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool use_input_stats,
                        double momentum, double eps, Loc l);
/// Rows of `weight` [V, D] at integer indices of any shape: [..., D]. The rows
/// read at padding_idx (when >= 0) pass no gradient to the weight.
Tensor embedding(const Tensor& indices, const Tensor& weight, KILN_LOC);
Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx, KILN_LOC);
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
/// Clamps every gradient of `params` to [-clip_value, clip_value] in place, as
/// torch.nn.utils.clip_grad_value_. Parameters without a gradient are skipped.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value, KILN_LOC);
}  // namespace utils

std::ostream& operator<<(std::ostream& os, const Module& m);
/// Prints the module a holder holds (std::cout << model).
template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& m) {
  return os << static_cast<const Module&>(*m);
}

}  // namespace kiln::nn
