// Optimizers. State (momentum, Adam moments, the step count) is kept in
// tensors and updated with in-place ops under NoGradGuard, so an optimizer
// step inside a trace becomes parameter updates of the compiled plan.
#pragma once

#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  /// Drops (set_to_none, the default, as in PyTorch 2) or zeroes every gradient.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& parameters() const { return params_; }
  /// Every state tensor (for tracing and saving).
  virtual std::vector<Tensor> state() const = 0;

 protected:
  std::vector<Tensor> params_;
};

struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
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

 private:
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& lr(double v) { lr_ = v; return *this; }
  AdamOptions& betas(std::pair<double, double> b) { beta1_ = b.first; beta2_ = b.second; return *this; }
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0;
};

/// Adam (Kingma & Ba), bias-corrected, as torch.optim.Adam.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr) : Adam(std::move(params), AdamOptions(lr)) {}
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  std::vector<Tensor> state() const override;
  AdamOptions options;

 private:
  Tensor step_;  // f64 scalar: steps taken (exact to 2^53)
  std::vector<Tensor> m_, v_;
};

}  // namespace kiln::optim
