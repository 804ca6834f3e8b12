// SGD, Adam, AdamW, RMSprop and the learning-rate schedulers.
#include "frontend/optim.h"

#include <algorithm>
#include <cmath>

#include "frontend/autograd.h"
#include "frontend/trace_state.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor> params)
    : params_(std::move(params)), alive_(std::make_shared<const int>(0)) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].defined() || !params_[i].requires_grad())
      throw Error("optimizer parameter " + std::to_string(i) +
                  " does not require grad (expected tensors with requires_grad(true))");
}

// A copy is another optimizer: guards on the original do not follow it.
Optimizer::Optimizer(const Optimizer& o) : params_(o.params_), alive_(std::make_shared<const int>(0)) {}

Optimizer& Optimizer::operator=(const Optimizer& o) {
  params_ = o.params_;
  alive_ = std::make_shared<const int>(0);
  return *this;
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

double Optimizer::lr() const {
  return const_cast<Optimizer*>(this)->lr_field();
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw Error(std::string(name()) + ": learning rate must be a finite number >= 0, got " +
                std::to_string(lr));
  lr_field() = lr;
}

void Optimizer::sync_lr() {
  const double lr = lr_field();
  const bool same = lr == lr_in_tensor_ || (std::isnan(lr) && std::isnan(lr_in_tensor_));
  if (!lr_.empty() && same) return;
  // The plan reads the tensors once per call: every step it holds must see one value.
  if (const TraceState* st = current_trace())
    for (const Tensor& t : lr_)
      if (st->param_index.count(t.impl()))
        throw Error(std::string(name()) +
                    ": the learning rate changed inside a traced function after a step read it "
                    "(expected set_lr and scheduler steps between calls, outside the traced "
                    "function)");
  TraceScope outside(nullptr);  // a concrete write, never part of a traced step
  NoGradGuard no_grad;
  if (lr_.empty()) {
    for (const Tensor& p : params_)
      if (std::none_of(lr_.begin(), lr_.end(), [&](const Tensor& t) {
            return t.dtype() == p.dtype() && t.device() == p.device();
          }))
        lr_.push_back(full({}, lr, TensorOptions(p.dtype()).device(p.device())));
  } else {
    for (Tensor& t : lr_) t.fill_(lr);
  }
  lr_in_tensor_ = lr;
}

const Tensor& Optimizer::lr_like(const Tensor& p) const {
  for (const Tensor& t : lr_)
    if (t.dtype() == p.dtype() && t.device() == p.device()) return t;
  throw Error(std::string(name()) + ": a parameter changed dtype or device after the first step " +
              "(now " + dtype_name(p.dtype()) + " on " + p.device().str() + ")");
}

void Optimizer::begin_step() {
  sync_lr();
  if (!current_trace()) return;
  sync_before_call(alive_, [this] { sync_lr(); });
  std::vector<std::string> names;
  for (const Hyperparameter& h : hyperparameters()) names.push_back(h.name);
  auto values = [this] {
    std::vector<double> v;
    for (const Hyperparameter& h : hyperparameters()) v.push_back(h.value);
    return v;
  };
  guard_constants(alive_, values, std::string(name()) + "'s hyperparameters", std::move(names));
}

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), options(o) {
  if (o.momentum_ != 0)
    for (const Tensor& p : params_) momentum_.push_back(zeros_like(p));
}

std::vector<Optimizer::Hyperparameter> SGD::hyperparameters() const {
  return {{"momentum", options.momentum_},
          {"dampening", options.dampening_},
          {"weight_decay", options.weight_decay_},
          {"nesterov", options.nesterov_ ? 1.0 : 0.0}};
}

void SGD::step() {
  begin_step();
  if (options.momentum_ != 0 && momentum_.size() != params_.size())
    throw Error("SGD: momentum was set after construction (expected it in SGDOptions)");
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
    p.sub_(g * lr_like(p));
  }
}

// ---- Adam, AdamW ----

namespace {

// A 0-dim f64 tensor as each parameter needs it: cast to the parameter's dtype
// and moved to its device once per kind (a traced step casts once).
class PerParam {
 public:
  explicit PerParam(Tensor f64) : f64_(std::move(f64)) {}
  /// The value in `p`'s dtype, on `p`'s device.
  const Tensor& like(const Tensor& p) {
    for (const Tensor& c : casts_)
      if (c.dtype() == p.dtype() && c.device() == p.device()) return c;
    casts_.push_back(f64_.to(p.device()).to(p.dtype()));
    return casts_.back();
  }

 private:
  Tensor f64_;
  std::vector<Tensor> casts_;
};

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Optimizer(std::move(params)), options(o) {
  // On the parameters' device: a traced step is one graph on one device (PyTorch
  // keeps it there for capturable and fused Adam).
  step_ = zeros({}, TensorOptions(kFloat64).device(params_.empty() ? Device() : params_[0].device()));
  for (const Tensor& p : params_) {
    m_.push_back(zeros_like(p));
    v_.push_back(zeros_like(p));
    if (o.amsgrad_) v_max_.push_back(zeros_like(p));
  }
}

std::vector<Tensor> Adam::state() const {
  std::vector<Tensor> s{step_};
  s.insert(s.end(), m_.begin(), m_.end());
  s.insert(s.end(), v_.begin(), v_.end());
  s.insert(s.end(), v_max_.begin(), v_max_.end());
  return s;
}

std::vector<Optimizer::Hyperparameter> Adam::hyperparameters() const {
  return {{"beta1", options.beta1_},
          {"beta2", options.beta2_},
          {"eps", options.eps_},
          {"weight_decay", options.weight_decay_}};
}

void Adam::step() {
  adam_step(/*decoupled_weight_decay=*/false);
}

void AdamW::step() {
  adam_step(/*decoupled_weight_decay=*/true);
}

void Adam::adam_step(bool decoupled_weight_decay) {
  begin_step();
  NoGradGuard no_grad;
  const double b1 = options.beta1_, b2 = options.beta2_;
  step_.add_(1);
  // Bias corrections as f64 tensor ops of the step count, so a traced step stays
  // correct; each parameter uses them in its own dtype (PyTorch: Python floats).
  const TensorOptions f64 = TensorOptions(kFloat64).device(step_.device());
  PerParam bc1(1 - full({}, b1, f64).pow(step_));
  PerParam bc2_sqrt((1 - full({}, b2, f64).pow(step_)).sqrt());
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options.weight_decay_ != 0) {
      if (decoupled_weight_decay)
        p.mul_(1 - lr_like(p) * options.weight_decay_);
      else
        g = g + options.weight_decay_ * p;
    }
    m_[i].mul_(b1).add_(g, 1 - b1);
    v_[i].mul_(b2).add_(g * g, 1 - b2);
    Tensor second = v_[i];
    if (options.amsgrad_) {  // PyTorch: the maximum of the uncorrected second moments
      if (v_max_.size() != params_.size())
        throw Error(std::string(name()) + ": amsgrad was turned on after the optimizer was made " +
                    "(expected it in the options it was made with)");
      v_max_[i].copy_(maximum(v_max_[i], v_[i]));
      second = v_max_[i];
    }
    // PyTorch's form: denom = sqrt(v) / sqrt(bc2) + eps, p -= (lr / bc1) * m / denom. Two
    // divisions and a square root an element; m / bc1 / denom with sqrt(v / bc2) takes
    // three and a root, and the divider, not memory, then bounds the update (1.3x its time).
    Tensor denom = second.sqrt() / bc2_sqrt.like(p) + options.eps_;
    p.sub_(m_[i] / denom * (lr_like(p) / bc1.like(p)));
  }
}

// ---- RMSprop ----

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions o)
    : Optimizer(std::move(params)), options(o) {
  for (const Tensor& p : params_) {
    square_avg_.push_back(zeros_like(p));
    if (o.centered_) grad_avg_.push_back(zeros_like(p));
    if (o.momentum_ != 0) momentum_.push_back(zeros_like(p));
  }
}

std::vector<Tensor> RMSprop::state() const {
  std::vector<Tensor> s = square_avg_;
  s.insert(s.end(), grad_avg_.begin(), grad_avg_.end());
  s.insert(s.end(), momentum_.begin(), momentum_.end());
  return s;
}

std::vector<Optimizer::Hyperparameter> RMSprop::hyperparameters() const {
  return {{"alpha", options.alpha_},
          {"eps", options.eps_},
          {"weight_decay", options.weight_decay_},
          {"momentum", options.momentum_},
          {"centered", options.centered_ ? 1.0 : 0.0}};
}

void RMSprop::step() {
  begin_step();
  if ((options.centered_ && grad_avg_.size() != params_.size()) ||
      (options.momentum_ != 0 && momentum_.size() != params_.size()))
    throw Error("RMSprop: centered or momentum was set after construction (expected them in "
                "RMSpropOptions)");
  NoGradGuard no_grad;
  const double a = options.alpha_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options.weight_decay_ != 0) g = g + options.weight_decay_ * p;
    square_avg_[i].mul_(a).add_(g * g, 1 - a);
    Tensor avg;
    if (options.centered_) {
      grad_avg_[i].mul_(a).add_(g, 1 - a);
      avg = (square_avg_[i] - grad_avg_[i] * grad_avg_[i]).sqrt() + options.eps_;
    } else {
      avg = square_avg_[i].sqrt() + options.eps_;
    }
    if (options.momentum_ != 0) {
      momentum_[i].mul_(options.momentum_).add_(g / avg);
      p.sub_(momentum_[i] * lr_like(p));
    } else {
      p.sub_(g / avg * lr_like(p));
    }
  }
}

// ---- Learning-rate schedulers ----

LRScheduler::LRScheduler(Optimizer& optimizer) : opt_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::step() {
  ++epoch_;
  opt_.set_lr(lr_at(epoch_));
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0)
    throw Error("StepLR: step_size must be positive, got " + std::to_string(step_size));
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  if (T_max <= 0) throw Error("CosineAnnealingLR: T_max must be positive, got " + std::to_string(T_max));
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double pi = std::acos(-1.0);
  return eta_min_ + (base_lr() - eta_min_) *
                        (1 + std::cos(pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
}

}  // namespace kiln::optim
