// Optimizers and learning-rate schedulers. State (momentum, moments, the step
// count) is kept in tensors and updated with in-place ops under NoGradGuard, so
// an optimizer step inside a trace becomes parameter updates of the compiled
// plan. The learning rate is copied into a 0-dim tensor the step reads, so a
// scheduler (or a direct write of options.lr_) changes it without a retrace.
// The other hyperparameters are plain numbers a traced step reads as
// constants: when one changes, the next call retraces, as torch.compile does
// for Python floats, and KILN_LOG=recompiles names the number.
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::serialize {
class OutputArchive;
class InputArchive;
}  // namespace kiln::serialize

namespace kiln::optim {

/// The base of every optimizer's options (libtorch's OptimizerOptions): the
/// learning rate through a virtual interface, so a program can change it
/// through param_groups() without knowing the optimizer's kind, and a copy.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
};

/// Options of kind `Derived`: the copy (libtorch's OptimizerCloneableOptions).
template <class Derived>
struct OptimizerCloneableOptions : OptimizerOptions {
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

/// Parameters and, optionally, options of their own (libtorch's
/// OptimizerParamGroup): `SGD({OptimizerParamGroup(fc->parameters(),
/// std::make_unique<SGDOptions>(0.1)), OptimizerParamGroup(head->parameters())},
/// SGDOptions(0.01))`. Among several groups, each made without options gets a
/// copy of the optimizer's when it joins (the constructor or add_param_group),
/// as libtorch's: `static_cast<SGDOptions&>(group.options()).lr(0.01)` changes
/// that group's steps only. The one group of an optimizer made from plain
/// parameters uses the optimizer's own options (its `options` member,
/// libtorch's defaults()), so writing either changes its steps. A copy of a
/// group copies its options.
class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor> params)  // NOLINT: implicit, as libtorch
      : params_(std::move(params)) {}
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  OptimizerParamGroup(const OptimizerParamGroup& g);
  OptimizerParamGroup& operator=(const OptimizerParamGroup& g);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  /// Options of its own, or (in an optimizer) the optimizer's.
  bool has_options() const { return options_ || defaults_; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  /// Whether the options are the group's own (not the optimizer's).
  bool owns_options() const { return options_ != nullptr; }

 private:
  friend class Optimizer;
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
  OptimizerOptions* defaults_ = nullptr;  // the optimizer's options, set by the optimizer
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  /// Groups with options of their own (each checked against the optimizer's
  /// kind by the optimizer's constructor) or without.
  explicit Optimizer(std::vector<OptimizerParamGroup> groups);
  Optimizer(const Optimizer& o);
  Optimizer& operator=(const Optimizer& o);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  /// Drops (set_to_none, the default, as in PyTorch 2) or zeroes every gradient.
  void zero_grad(bool set_to_none = true);
  /// Every parameter, group after group.
  const std::vector<Tensor>& parameters() const { return params_; }
  /// Every state tensor (for tracing and saving).
  virtual std::vector<Tensor> state() const = 0;
  /// Writes the optimizer's kind, learning rates, hyperparameters and state
  /// tensors (torch::save(optimizer, path)); load restores the state in place
  /// and the learning rates, after checking the kind and every state shape
  /// (the other hyperparameters stay as constructed). frontend/archive.cpp.
  virtual void save(serialize::OutputArchive& archive) const;
  virtual void load(serialize::InputArchive& archive);
  /// The learning rate of the first group; set_lr sets every group's.
  /// Schedulers set each group's through its options. A traced step reads the
  /// rates through tensors, so a new value, set here, through a group's options
  /// or written into options.lr_, takes effect at the next call without a retrace.
  double lr() const;
  void set_lr(double lr);
  /// The parameter groups (one, holding every parameter, unless the optimizer
  /// was made from groups or given more).
  std::vector<OptimizerParamGroup>& param_groups();
  const std::vector<OptimizerParamGroup>& param_groups() const;
  /// Adds parameters (not inside a trace), with options of their own or the
  /// optimizer's; their state starts as a new parameter's.
  void add_param_group(const OptimizerParamGroup& group);
  /// The optimizer's own options (the `options` member; libtorch's defaults()).
  OptimizerOptions& defaults() { return options_base(); }

 protected:
  /// The options as libtorch's base class.
  virtual OptimizerOptions& options_base() = 0;
  const OptimizerOptions& options_base() const {
    return const_cast<Optimizer*>(this)->options_base();
  }
  /// The options group g's steps use, as the optimizer's kind.
  template <class Options>
  const Options& group_options(size_t g) const {
    return static_cast<const Options&>(param_groups()[g].options());
  }
  /// Throws unless `o` is the optimizer's kind of options (a group's own).
  virtual void check_options(const OptimizerOptions& o) const = 0;
  /// Makes the state of group g's parameters (the constructor and add_param_group).
  virtual void add_state(size_t group) = 0;
  /// The numbers step() reads as constants (all but the learning rate), by
  /// name, of one group's options: a traced step is guarded on them.
  struct Hyperparameter {
    std::string name;
    double value;
  };
  virtual std::vector<Hyperparameter> hyperparameters(const OptimizerOptions& o) const = 0;
  /// Every group's hyperparameters ("group 1: momentum" beyond the first).
  std::vector<Hyperparameter> all_hyperparameters() const;
  virtual const char* name() const = 0;
  /// Called first by step(): copies the learning rates into the tensors the step
  /// reads (and, under a trace, has the plan do so before every call), and
  /// guards the other hyperparameters.
  void begin_step();
  /// Group g's learning rate as a 0-dim tensor of `p`'s dtype on `p`'s device.
  const Tensor& lr_like(size_t g, const Tensor& p) const;
  /// Calls the constructor's add_state for every group (the derived
  /// constructor, once its own members exist).
  void add_all_state();

  std::vector<Tensor> params_;  // every group's, in order

 private:
  std::vector<OptimizerParamGroup> groups_;
  /// Writes each group's learning rate into its tensors when it changed
  /// (outside any trace).
  void sync_lr();

  std::shared_ptr<const int> alive_;  // expires with this optimizer (the guards' weak_ptr)
  /// Per group, the learning rate, 0-dim, one per parameter dtype and device
  /// (made by the first step): a traced step reads it as a captured tensor, not a
  /// constant.
  std::vector<std::vector<Tensor>> lr_;
  std::vector<double> lr_in_tensor_;  // what lr_ holds, per group
};

/// A getter for each option (`SGDOptions::momentum()`), beside the setter.
#define KILN_OPTIM_GET(T, name) \
  T name() const {              \
    return name##_;             \
  }

struct SGDOptions : OptimizerCloneableOptions<SGDOptions> {
  explicit SGDOptions(double lr) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  SGDOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  SGDOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  SGDOptions& dampening(double v) {
    dampening_ = v;
    return *this;
  }
  SGDOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  SGDOptions& nesterov(bool v) {
    nesterov_ = v;
    return *this;
  }
  KILN_OPTIM_GET(double, lr)
  KILN_OPTIM_GET(double, momentum)
  KILN_OPTIM_GET(double, dampening)
  KILN_OPTIM_GET(double, weight_decay)
  KILN_OPTIM_GET(bool, nesterov)
  double lr_, momentum_ = 0, dampening_ = 0, weight_decay_ = 0;
  bool nesterov_ = false;
};

/// Stochastic gradient descent with optional momentum, dampening, Nesterov and weight decay.
/// Momentum buffers start at zero (with dampening 0 this equals PyTorch's first step).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr) : SGD(std::move(params), SGDOptions(lr)) {}
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<OptimizerParamGroup> groups, SGDOptions options);
  void step() override;
  std::vector<Tensor> state() const override;
  SGDOptions options;

 protected:
  OptimizerOptions& options_base() override { return options; }
  void check_options(const OptimizerOptions& o) const override;
  void add_state(size_t group) override;
  std::vector<Hyperparameter> hyperparameters(const OptimizerOptions& o) const override;
  const char* name() const override { return "SGD"; }

 private:
  std::vector<Tensor> momentum_;  // per parameter; undefined in groups without momentum
};

/// Adam's and AdamW's options (AdamWOptions is this with a default weight decay
/// of 0.01, and setters that return it).
struct AdamOptions : OptimizerOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<AdamOptions>(*this);
  }
  AdamOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  /// (beta1, beta2): a std::tuple (libtorch's type), a std::pair or a braced pair.
  AdamOptions& betas(std::tuple<double, double> b) {
    beta1_ = std::get<0>(b);
    beta2_ = std::get<1>(b);
    return *this;
  }
  AdamOptions& beta1(double v) {
    beta1_ = v;
    return *this;
  }
  AdamOptions& beta2(double v) {
    beta2_ = v;
    return *this;
  }
  std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
  double lr() const { return lr_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  AdamOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  AdamOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  /// AMSGrad (Reddi et al.): divide by the running maximum of the second moment.
  AdamOptions& amsgrad(bool v) {
    amsgrad_ = v;
    return *this;
  }
  bool amsgrad() const { return amsgrad_; }
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0;
  bool amsgrad_ = false;
};

/// AdamW's options: Adam's, with a default weight decay of 0.01.
struct AdamWOptions : AdamOptions {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay_ = 1e-2; }
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<AdamWOptions>(*this);
  }
  using AdamOptions::amsgrad;
  using AdamOptions::betas;
  using AdamOptions::eps;
  using AdamOptions::lr;
  using AdamOptions::weight_decay;
  AdamWOptions& lr(double v) { return self(AdamOptions::lr(v)); }
  AdamWOptions& betas(std::tuple<double, double> b) { return self(AdamOptions::betas(b)); }
  AdamWOptions& beta1(double v) { return self(AdamOptions::beta1(v)); }
  AdamWOptions& beta2(double v) { return self(AdamOptions::beta2(v)); }
  AdamWOptions& eps(double v) { return self(AdamOptions::eps(v)); }
  AdamWOptions& weight_decay(double v) { return self(AdamOptions::weight_decay(v)); }
  AdamWOptions& amsgrad(bool v) { return self(AdamOptions::amsgrad(v)); }

 private:
  AdamWOptions& self(AdamOptions&) { return *this; }
};

/// Adam's and AdamW's step and state.
class AdamBase : public Optimizer {
 public:
  std::vector<Tensor> state() const override;

 protected:
  AdamBase(std::vector<OptimizerParamGroup> groups, bool decoupled_weight_decay);
  void step_adam();
  void add_state(size_t group) override;
  std::vector<Hyperparameter> hyperparameters(const OptimizerOptions& o) const override;

 private:
  bool decoupled_;  // AdamW: the weight decay applied to the parameter, not the gradient
  Tensor step_;     // f64 scalar: steps taken (exact to 2^53)
  std::vector<Tensor> m_, v_;
  std::vector<Tensor> v_max_;  // per parameter, with amsgrad: the largest v so far
};

/// Adam (Kingma & Ba), bias-corrected, as torch.optim.Adam (weight decay is L2:
/// added to the gradient).
class Adam : public AdamBase {
 public:
  Adam(std::vector<Tensor> params, double lr) : Adam(std::move(params), AdamOptions(lr)) {}
  Adam(std::vector<Tensor> params, AdamOptions options);
  Adam(std::vector<OptimizerParamGroup> groups, AdamOptions options);
  void step() override { step_adam(); }
  AdamOptions options;

 protected:
  OptimizerOptions& options_base() override { return options; }
  void check_options(const OptimizerOptions& o) const override;
  const char* name() const override { return "Adam"; }
};

/// AdamW (Loshchilov & Hutter), as torch.optim.AdamW: p -= lr * weight_decay * p,
/// then Adam's update. The default weight decay is 0.01.
class AdamW : public AdamBase {
 public:
  AdamW(std::vector<Tensor> params, double lr) : AdamW(std::move(params), AdamWOptions(lr)) {}
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions options);
  void step() override { step_adam(); }
  AdamWOptions options;

 protected:
  OptimizerOptions& options_base() override { return options; }
  void check_options(const OptimizerOptions& o) const override;
  const char* name() const override { return "AdamW"; }
};

struct RMSpropOptions : OptimizerCloneableOptions<RMSpropOptions> {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  RMSpropOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  RMSpropOptions& alpha(double v) {
    alpha_ = v;
    return *this;
  }
  RMSpropOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  RMSpropOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  RMSpropOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  RMSpropOptions& centered(bool v) {
    centered_ = v;
    return *this;
  }
  KILN_OPTIM_GET(double, lr)
  KILN_OPTIM_GET(double, alpha)
  KILN_OPTIM_GET(double, eps)
  KILN_OPTIM_GET(double, weight_decay)
  KILN_OPTIM_GET(double, momentum)
  KILN_OPTIM_GET(bool, centered)
  double lr_, alpha_ = 0.99, eps_ = 1e-8, weight_decay_ = 0, momentum_ = 0;
  bool centered_ = false;
};

/// RMSprop as torch.optim.RMSprop: a running mean of squared gradients (and, when
/// centered, of gradients), optional momentum and weight decay.
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, double lr) : RMSprop(std::move(params), RMSpropOptions(lr)) {}
  RMSprop(std::vector<Tensor> params, RMSpropOptions options);
  RMSprop(std::vector<OptimizerParamGroup> groups, RMSpropOptions options);
  void step() override;
  std::vector<Tensor> state() const override;
  RMSpropOptions options;

 protected:
  OptimizerOptions& options_base() override { return options; }
  void check_options(const OptimizerOptions& o) const override;
  void add_state(size_t group) override;
  std::vector<Hyperparameter> hyperparameters(const OptimizerOptions& o) const override;
  const char* name() const override { return "RMSprop"; }

 private:
  // Per parameter; undefined where the group's options need none.
  std::vector<Tensor> square_avg_, grad_avg_, momentum_;
};

struct AdagradOptions : OptimizerCloneableOptions<AdagradOptions> {
  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  AdagradOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdagradOptions& lr_decay(double v) {
    lr_decay_ = v;
    return *this;
  }
  AdagradOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  AdagradOptions& initial_accumulator_value(double v) {
    initial_accumulator_value_ = v;
    return *this;
  }
  AdagradOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  KILN_OPTIM_GET(double, lr)
  KILN_OPTIM_GET(double, lr_decay)
  KILN_OPTIM_GET(double, weight_decay)
  KILN_OPTIM_GET(double, initial_accumulator_value)
  KILN_OPTIM_GET(double, eps)
  double lr_, lr_decay_ = 0, weight_decay_ = 0, initial_accumulator_value_ = 0, eps_ = 1e-10;
};

/// Adagrad as libtorch's torch::optim::Adagrad: each parameter's sum of squared
/// gradients (starting at initial_accumulator_value) scales its step, the rate
/// decaying as lr / (1 + (step - 1) lr_decay). One step count for the optimizer
/// (libtorch: one per parameter, advancing only with a gradient), as Adam's.
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, double lr) : Adagrad(std::move(params), AdagradOptions(lr)) {}
  Adagrad(std::vector<Tensor> params, AdagradOptions options);
  Adagrad(std::vector<OptimizerParamGroup> groups, AdagradOptions options);
  void step() override;
  std::vector<Tensor> state() const override;
  AdagradOptions options;

 protected:
  OptimizerOptions& options_base() override { return options; }
  void check_options(const OptimizerOptions& o) const override;
  void add_state(size_t group) override;
  std::vector<Hyperparameter> hyperparameters(const OptimizerOptions& o) const override;
  const char* name() const override { return "Adagrad"; }

 private:
  Tensor step_;               // f64 scalar: steps taken
  std::vector<Tensor> sum_;  // per parameter
};

/// A learning-rate schedule: step() once per epoch (after the optimizer's
/// steps) sets each group's learning rate for the next epoch from the rate the
/// group had when the scheduler was made.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  /// Epochs stepped so far.
  int64_t last_epoch() const { return epoch_; }
  /// The first group's starting rate.
  double base_lr() const { return base_lrs_.at(0); }

 protected:
  /// The learning rate for epoch `epoch` of a group that started at `base_lr`
  /// (closed form, as PyTorch's _get_closed_form_lr).
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 private:
  Optimizer& opt_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

/// lr = base_lr * gamma^(epoch / step_size), as torch.optim.lr_scheduler.StepLR.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, as
/// torch.optim.lr_scheduler.CosineAnnealingLR's closed form.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace kiln::optim
