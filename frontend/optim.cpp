// SGD and Adam.
#include "frontend/optim.h"

#include "frontend/autograd.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].defined() || !params_[i].requires_grad())
      throw Error("optimizer parameter " + std::to_string(i) +
                  " does not require grad (expected tensors with requires_grad(true))");
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    if (set_to_none)
      p.set_grad(Tensor());
    else
      p.grad().zero_();
  }
}

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), options(o) {
  if (o.momentum_ != 0)
    for (const Tensor& p : params_) momentum_.push_back(zeros_like(p));
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options.weight_decay_ != 0) g = g + options.weight_decay_ * p;
    if (options.momentum_ != 0) {
      Tensor& buf = momentum_[i];
      buf.mul_(options.momentum_).add_(g, 1 - options.dampening_);
      g = options.nesterov_ ? g + options.momentum_ * buf : buf;
    }
    p.sub_(g, options.lr_);
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Optimizer(std::move(params)), options(o) {
  step_ = zeros({}, kFloat64);
  for (const Tensor& p : params_) {
    m_.push_back(zeros_like(p));
    v_.push_back(zeros_like(p));
  }
}

std::vector<Tensor> Adam::state() const {
  std::vector<Tensor> s{step_};
  s.insert(s.end(), m_.begin(), m_.end());
  s.insert(s.end(), v_.begin(), v_.end());
  return s;
}

void Adam::step() {
  NoGradGuard no_grad;
  const double b1 = options.beta1_, b2 = options.beta2_;
  step_.add_(1);
  // Bias corrections as f64 tensor ops of the step count, so a traced step stays
  // correct; each parameter uses them in its own dtype (PyTorch: Python floats).
  Tensor bc1_f64 = 1 - full({}, b1, kFloat64).pow(step_);
  Tensor bc2_f64 = 1 - full({}, b2, kFloat64).pow(step_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor bc1 = bc1_f64.to(p.dtype()), bc2 = bc2_f64.to(p.dtype());
    if (options.weight_decay_ != 0) g = g + options.weight_decay_ * p;
    m_[i].mul_(b1).add_(g, 1 - b1);
    v_[i].mul_(b2).add_(g * g, 1 - b2);
    Tensor denom = (v_[i] / bc2).sqrt() + options.eps_;
    p.sub_(m_[i] / bc1 / denom * options.lr_);
  }
}

}  // namespace kiln::optim
