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
/// through param_groups() without knowing the optimizer's kind.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
};

/// The parameters an optimizer updates and its options (every Kiln optimizer
/// has one group): `static_cast<optim::SGDOptions&>(group.options()).lr(0.01)`
/// changes the optimizer's own options.
class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor>& params, OptimizerOptions& options)
      : params_(&params), options_(&options) {}
  std::vector<Tensor>& params() { return *params_; }
  const std::vector<Tensor>& params() const { return *params_; }
  OptimizerOptions& options() { return *options_; }
  const OptimizerOptions& options() const { return *options_; }
  bool has_options() const { return true; }

 private:
  std::vector<Tensor>* params_;
  OptimizerOptions* options_;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  Optimizer(const Optimizer& o);
  Optimizer& operator=(const Optimizer& o);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  /// Drops (set_to_none, the default, as in PyTorch 2) or zeroes every gradient.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& parameters() const { return params_; }
  /// Every state tensor (for tracing and saving).
  virtual std::vector<Tensor> state() const = 0;
  /// Writes the optimizer's kind, learning rate, hyperparameters and state
  /// tensors (torch::save(optimizer, path)); load restores the state in place
  /// and the learning rate, after checking the kind and every state shape
  /// (the other hyperparameters stay as constructed). frontend/archive.cpp.
  virtual void save(serialize::OutputArchive& archive) const;
  virtual void load(serialize::InputArchive& archive);
  /// The learning rate (options.lr_); schedulers set it. A traced step reads it
  /// through a tensor, so a new value, set here or written into options.lr_,
  /// takes effect at the next call without a retrace.
  double lr() const;
  void set_lr(double lr);
  /// libtorch's view of the parameters and options: one group, holding every
  /// parameter and the optimizer's options (frontend/archive.cpp).
  std::vector<OptimizerParamGroup>& param_groups();

 protected:
  /// The learning-rate field of the options.
  virtual double& lr_field() = 0;
  /// The options as libtorch's base class.
  virtual OptimizerOptions& options_base() = 0;
  /// The numbers step() reads as constants, by name (all but the learning
  /// rate): a traced step is guarded on them.
  struct Hyperparameter {
    const char* name;
    double value;
  };
  virtual std::vector<Hyperparameter> hyperparameters() const = 0;
  virtual const char* name() const = 0;
  /// Called first by step(): copies the learning rate into the tensors the step
  /// reads (and, under a trace, has the plan do so before every call), and
  /// guards the other hyperparameters.
  void begin_step();
  /// The learning rate as a 0-dim tensor of `p`'s dtype on `p`'s device.
  const Tensor& lr_like(const Tensor& p) const;

  std::vector<Tensor> params_;

 private:
  std::vector<OptimizerParamGroup> groups_;
  /// Writes lr_field() into lr_ when it changed (outside any trace).
  void sync_lr();

  std::shared_ptr<const int> alive_;  // expires with this optimizer (the guards' weak_ptr)
  /// The learning rate, 0-dim, one per parameter dtype and device (made by the
  /// first step): a traced step reads it as a captured tensor, not a constant.
  std::vector<Tensor> lr_;
  double lr_in_tensor_ = 0;  // what lr_ holds
};

struct SGDOptions : OptimizerOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  double lr_, momentum_ = 0, dampening_ = 0, weight_decay_ = 0;
  bool nesterov_ = false;
};

/// Stochastic gradient descent with optional momentum, dampening, Nesterov and weight decay.
/// Momentum buffers start at zero (with dampening 0 this equals PyTorch's first step).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr) : SGD(std::move(params), SGDOptions(lr)) {}
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  std::vector<Tensor> state() const override { return momentum_; }
  SGDOptions options;

 protected:
  double& lr_field() override { return options.lr_; }
  OptimizerOptions& options_base() override { return options; }
  std::vector<Hyperparameter> hyperparameters() const override;
  const char* name() const override { return "SGD"; }

 private:
  std::vector<Tensor> momentum_;
};

struct AdamOptions : OptimizerOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  AdamOptions& lr(double v) { lr_ = v; return *this; }
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
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  /// AMSGrad (Reddi et al.): divide by the running maximum of the second moment.
  AdamOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }
  bool amsgrad() const { return amsgrad_; }
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0;
  bool amsgrad_ = false;
};

/// Adam (Kingma & Ba), bias-corrected, as torch.optim.Adam (weight decay is L2:
/// added to the gradient). AdamW is the same with decoupled weight decay.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr) : Adam(std::move(params), AdamOptions(lr)) {}
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  std::vector<Tensor> state() const override;
  AdamOptions options;

 protected:
  /// Adam's step with the weight decay added to the gradient (L2) or, decoupled,
  /// applied to the parameter before the update (AdamW).
  void adam_step(bool decoupled_weight_decay);
  double& lr_field() override { return options.lr_; }
  OptimizerOptions& options_base() override { return options; }
  std::vector<Hyperparameter> hyperparameters() const override;
  const char* name() const override { return "Adam"; }

 private:
  Tensor step_;  // f64 scalar: steps taken (exact to 2^53)
  std::vector<Tensor> m_, v_;
  std::vector<Tensor> v_max_;  // with amsgrad: the largest v so far
};

/// AdamW's options: Adam's, with a default weight decay of 0.01.
struct AdamWOptions : OptimizerOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  AdamWOptions& lr(double v) { lr_ = v; return *this; }
  AdamWOptions& betas(std::tuple<double, double> b) {
    beta1_ = std::get<0>(b);
    beta2_ = std::get<1>(b);
    return *this;
  }
  AdamWOptions& beta1(double v) {
    beta1_ = v;
    return *this;
  }
  AdamWOptions& beta2(double v) {
    beta2_ = v;
    return *this;
  }
  AdamWOptions& eps(double v) { eps_ = v; return *this; }
  AdamWOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  AdamWOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }
  bool amsgrad() const { return amsgrad_; }
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 1e-2;
  bool amsgrad_ = false;
  AdamOptions adam() const {
    return AdamOptions(lr_).betas({beta1_, beta2_}).eps(eps_).weight_decay(weight_decay_).amsgrad(
        amsgrad_);
  }
};

/// AdamW (Loshchilov & Hutter), as torch.optim.AdamW: p -= lr * weight_decay * p,
/// then Adam's update. The default weight decay is 0.01.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr) : AdamW(std::move(params), AdamWOptions(lr)) {}
  AdamW(std::vector<Tensor> params, AdamWOptions options)
      : Adam(std::move(params), options.adam()) {}
  void step() override;

 protected:
  const char* name() const override { return "AdamW"; }
};

struct RMSpropOptions : OptimizerOptions {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  RMSpropOptions& lr(double v) { lr_ = v; return *this; }
  RMSpropOptions& alpha(double v) { alpha_ = v; return *this; }
  RMSpropOptions& eps(double v) { eps_ = v; return *this; }
  RMSpropOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  RMSpropOptions& momentum(double v) { momentum_ = v; return *this; }
  RMSpropOptions& centered(bool v) { centered_ = v; return *this; }
  double lr_, alpha_ = 0.99, eps_ = 1e-8, weight_decay_ = 0, momentum_ = 0;
  bool centered_ = false;
};

/// RMSprop as torch.optim.RMSprop: a running mean of squared gradients (and, when
/// centered, of gradients), optional momentum and weight decay.
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, double lr) : RMSprop(std::move(params), RMSpropOptions(lr)) {}
  RMSprop(std::vector<Tensor> params, RMSpropOptions options);
  void step() override;
  std::vector<Tensor> state() const override;
  RMSpropOptions options;

 protected:
  double& lr_field() override { return options.lr_; }
  OptimizerOptions& options_base() override { return options; }
  std::vector<Hyperparameter> hyperparameters() const override;
  const char* name() const override { return "RMSprop"; }

 private:
  std::vector<Tensor> square_avg_, grad_avg_, momentum_;
};

/// A learning-rate schedule: step() once per epoch (after the optimizer's
/// steps) sets the optimizer's learning rate for the next epoch.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  /// Epochs stepped so far.
  int64_t last_epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }

 protected:
  /// The learning rate for epoch `epoch` (closed form, as PyTorch's _get_closed_form_lr).
  virtual double lr_at(int64_t epoch) const = 0;

 private:
  Optimizer& opt_;
  double base_lr_;
  int64_t epoch_ = 0;
};

/// lr = base_lr * gamma^(epoch / step_size), as torch.optim.lr_scheduler.StepLR.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch) const override;

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
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace kiln::optim
