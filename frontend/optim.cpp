// SGD, Adam, AdamW, RMSprop and Adagrad (the schedulers: optim_schedule.cpp).
#include "frontend/optim.h"

#include <algorithm>
#include <cmath>

#include "frontend/autograd.h"
#include "frontend/optim_fused.h"
#include "frontend/trace_state.h"

namespace kiln::optim {

// ---- parameter groups ----

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& g) : params_(g.params_) {
  if (g.has_options()) options_ = g.options().clone();
}

OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& g) {
  if (this != &g) {
    params_ = g.params_;
    options_ = g.has_options() ? g.options().clone() : nullptr;
    defaults_ = nullptr;
  }
  return *this;
}

OptimizerOptions& OptimizerParamGroup::options() {
  if (options_) return *options_;
  if (defaults_) return *defaults_;
  throw Error(
      "OptimizerParamGroup::options: the group has no options (made without them, "
      "and not in an optimizer)");
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  return const_cast<OptimizerParamGroup*>(this)->options();
}

// ---- Optimizer ----

Optimizer::Optimizer(std::vector<Tensor> params)
    : Optimizer(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}) {}

Optimizer::Optimizer(std::vector<OptimizerParamGroup> groups)
    : alive_(std::make_shared<const int>(0)) {
  for (OptimizerParamGroup& g : groups) {
    // A parameter that does not require grad is taken, as libtorch's
    // optimizers take it (a frozen layer among a model's parameters()): it
    // has no gradient, so a step leaves it alone until it gets one.
    for (const Tensor& p : g.params()) {
      if (!p.defined())
        throw Error("optimizer parameter " + std::to_string(params_.size()) +
                    " is an undefined tensor (expected a model's parameters)");
      params_.push_back(p);
    }
    groups_.push_back(std::move(g));
    groups_.back().defaults_ = nullptr;
  }
}

// A copy is another optimizer: guards on the original do not follow it.
Optimizer::Optimizer(const Optimizer& o)
    : params_(o.params_), groups_(o.groups_), alive_(std::make_shared<const int>(0)) {}

Optimizer& Optimizer::operator=(const Optimizer& o) {
  params_ = o.params_;
  groups_ = o.groups_;
  lr_.clear();
  lr_in_tensor_.clear();
  alive_ = std::make_shared<const int>(0);
  return *this;
}

std::vector<OptimizerParamGroup>& Optimizer::param_groups() {
  for (OptimizerParamGroup& g : groups_) g.defaults_ = &options_base();
  return groups_;
}

const std::vector<OptimizerParamGroup>& Optimizer::param_groups() const {
  return const_cast<Optimizer*>(this)->param_groups();
}

void Optimizer::add_param_group(const OptimizerParamGroup& group) {
  if (current_trace())
    throw Error(std::string(name()) +
                ": add_param_group inside a traced function (expected it "
                "between calls)");
  if (group.owns_options()) check_options(group.options());
  for (const Tensor& p : group.params())
    if (!p.defined())
      throw Error(std::string(name()) + ": add_param_group: parameter " +
                  std::to_string(&p - group.params().data()) +
                  " is an undefined tensor (expected a model's parameters)");
  // A copy of the optimizer's options when the group has none (libtorch's rule).
  OptimizerParamGroup g(group.params(),
                        group.owns_options() ? group.options().clone() : options_base().clone());
  params_.insert(params_.end(), g.params().begin(), g.params().end());
  groups_.push_back(std::move(g));
  lr_.clear();  // the next step makes every group's rate tensors
  lr_in_tensor_.clear();
  add_state(groups_.size() - 1);
}

void Optimizer::add_all_state() {
  // Several groups: each without options of its own gets a copy of the
  // optimizer's, as libtorch's, so that editing one group's options changes
  // that group only. One group keeps using the optimizer's own (`options`).
  if (groups_.size() > 1)
    for (OptimizerParamGroup& g : groups_)
      if (!g.owns_options()) g.set_options(options_base().clone());
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].owns_options()) check_options(groups_[g].options());
    add_state(g);
  }
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
  return param_groups().at(0).options().get_lr();
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw Error(std::string(name()) + ": learning rate must be a finite number >= 0, got " +
                std::to_string(lr));
  for (OptimizerParamGroup& g : param_groups()) g.options().set_lr(lr);
}

std::vector<Optimizer::Hyperparameter> Optimizer::all_hyperparameters() const {
  std::vector<Hyperparameter> all;
  const std::vector<OptimizerParamGroup>& groups = param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    for (Hyperparameter& h : hyperparameters(groups[g].options())) {
      if (g > 0) h.name = "group " + std::to_string(g) + ": " + h.name;
      all.push_back(std::move(h));
    }
  return all;
}

void Optimizer::sync_lr() {
  const std::vector<OptimizerParamGroup>& groups = param_groups();
  const bool made = lr_.size() == groups.size();
  bool same = made;
  for (size_t g = 0; same && g < groups.size(); ++g) {
    const double lr = groups[g].options().get_lr();
    same = lr == lr_in_tensor_[g] || (std::isnan(lr) && std::isnan(lr_in_tensor_[g]));
  }
  if (same) return;
  // The plan reads the tensors once per call: every step it holds must see one value.
  if (const TraceState* st = current_trace())
    for (const std::vector<Tensor>& group : lr_)
      for (const Tensor& t : group)
        if (st->param_index.count(t.impl()))
          throw Error(std::string(name()) +
                      ": the learning rate changed inside a traced function after a step read it "
                      "(expected set_lr and scheduler steps between calls, outside the traced "
                      "function)");
  TraceScope outside(nullptr);  // a concrete write, never part of a traced step
  NoGradGuard no_grad;
  if (!made) {
    lr_.assign(groups.size(), {});
    lr_in_tensor_.assign(groups.size(), 0);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr = groups[g].options().get_lr();
    std::vector<Tensor>& tensors = lr_[g];
    if (!made) {
      for (const Tensor& p : groups[g].params())
        if (std::none_of(tensors.begin(), tensors.end(), [&](const Tensor& t) {
              return t.dtype() == p.dtype() && t.device() == p.device();
            }))
          tensors.push_back(full({}, lr, TensorOptions(p.dtype()).device(p.device())));
    } else if (lr != lr_in_tensor_[g]) {
      for (Tensor& t : tensors) t.fill_(lr);
    }
    lr_in_tensor_[g] = lr;
  }
}

const Tensor& Optimizer::lr_like(size_t g, const Tensor& p) const {
  for (const Tensor& t : lr_.at(g))
    if (t.dtype() == p.dtype() && t.device() == p.device()) return t;
  throw Error(std::string(name()) + ": a parameter changed dtype or device after the first step " +
              "(now " + dtype_name(p.dtype()) + " on " + p.device().str() + ")");
}

void Optimizer::begin_step() {
  sync_lr();
  if (!current_trace()) return;
  sync_before_call(alive_, [this] { sync_lr(); });
  std::vector<std::string> names;
  for (const Hyperparameter& h : all_hyperparameters()) names.push_back(h.name);
  auto values = [this] {
    std::vector<double> v;
    for (const Hyperparameter& h : all_hyperparameters()) v.push_back(h.value);
    return v;
  };
  guard_constants(alive_, values, std::string(name()) + "'s hyperparameters", std::move(names));
}

namespace {

// Throws unless a group's own options are of the optimizer's kind.
template <class Options>
void check_kind(const OptimizerOptions& o, const char* optimizer) {
  if (!dynamic_cast<const Options*>(&o))
    throw Error(std::string(optimizer) + ": a parameter group's options are of another " +
                "optimizer's kind (expected " + optimizer + "Options)");
}

// A zero tensor like p when `needed`, else an undefined one (a per-parameter
// state slot that the group's options do not use).
Tensor zeros_if(bool needed, const Tensor& p) {
  return needed ? zeros_like(p) : Tensor();
}

// The defined tensors of `slots`, in order.
void append_defined(std::vector<Tensor>& out, const std::vector<Tensor>& slots) {
  for (const Tensor& t : slots)
    if (t.defined()) out.push_back(t);
}

}  // namespace

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), options(o) {
  add_all_state();
}

SGD::SGD(std::vector<OptimizerParamGroup> groups, SGDOptions o)
    : Optimizer(std::move(groups)), options(o) {
  add_all_state();
}

void SGD::check_options(const OptimizerOptions& o) const {
  check_kind<SGDOptions>(o, "SGD");
}

void SGD::add_state(size_t g) {
  const bool momentum = group_options<SGDOptions>(g).momentum_ != 0;
  for (const Tensor& p : param_groups()[g].params()) momentum_.push_back(zeros_if(momentum, p));
}

std::vector<Tensor> SGD::state() const {
  std::vector<Tensor> s;
  append_defined(s, momentum_);
  return s;
}

std::vector<Optimizer::Hyperparameter> SGD::hyperparameters(const OptimizerOptions& base) const {
  const auto& o = static_cast<const SGDOptions&>(base);
  return {{"momentum", o.momentum_},
          {"dampening", o.dampening_},
          {"weight_decay", o.weight_decay_},
          {"nesterov", o.nesterov_ ? 1.0 : 0.0}};
}

void SGD::step() {
  begin_step();
  NoGradGuard no_grad;
  detail::FusedSgdStep fused;  // as Adam's (frontend/optim_fused.h)
  size_t i = 0;
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    const SGDOptions& o = group_options<SGDOptions>(gi);
    for (Tensor& p : param_groups()[gi].params()) {
      Tensor& buf = momentum_[i++];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (o.momentum_ != 0 && !buf.defined())
        throw Error("SGD: momentum was set after construction (expected it in SGDOptions)");
      if (fused.add(p, g, buf, o, lr_like(gi, p))) continue;
      if (o.weight_decay_ != 0) g = g + o.weight_decay_ * p;
      if (o.momentum_ != 0) {
        buf.mul_(o.momentum_).add_(g, 1 - o.dampening_);
        g = o.nesterov_ ? g + o.momentum_ * buf : buf;
      }
      p.sub_(g * lr_like(gi, p));
    }
  }
  fused.run();
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

AdamBase::AdamBase(std::vector<OptimizerParamGroup> groups, bool decoupled_weight_decay)
    : Optimizer(std::move(groups)), decoupled_(decoupled_weight_decay) {
  // On the parameters' device: a traced step is one graph on one device (PyTorch
  // keeps it there for capturable and fused Adam).
  step_ =
      zeros({}, TensorOptions(kFloat64).device(params_.empty() ? Device() : params_[0].device()));
}

void AdamBase::add_state(size_t g) {
  const bool amsgrad = group_options<AdamOptions>(g).amsgrad_;
  for (const Tensor& p : param_groups()[g].params()) {
    m_.push_back(zeros_like(p));
    v_.push_back(zeros_like(p));
    v_max_.push_back(zeros_if(amsgrad, p));
  }
}

std::vector<Tensor> AdamBase::state() const {
  std::vector<Tensor> s{step_};
  s.insert(s.end(), m_.begin(), m_.end());
  s.insert(s.end(), v_.begin(), v_.end());
  append_defined(s, v_max_);
  return s;
}

std::vector<Optimizer::Hyperparameter> AdamBase::hyperparameters(
    const OptimizerOptions& base) const {
  const auto& o = static_cast<const AdamOptions&>(base);
  return {
      {"beta1", o.beta1_}, {"beta2", o.beta2_}, {"eps", o.eps_}, {"weight_decay", o.weight_decay_}};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o)
    : Adam(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, o) {}

Adam::Adam(std::vector<OptimizerParamGroup> groups, AdamOptions o)
    : AdamBase(std::move(groups), /*decoupled_weight_decay=*/false), options(o) {
  add_all_state();
}

void Adam::check_options(const OptimizerOptions& o) const {
  check_kind<AdamOptions>(o, "Adam");
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o)
    : AdamW(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, o) {}

AdamW::AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions o)
    : AdamBase(std::move(groups), /*decoupled_weight_decay=*/true), options(o) {
  add_all_state();
}

void AdamW::check_options(const OptimizerOptions& o) const {
  check_kind<AdamWOptions>(o, "AdamW");
}

void AdamBase::step_adam() {
  begin_step();
  NoGradGuard no_grad;
  step_.add_(1);
  const TensorOptions f64 = TensorOptions(kFloat64).device(step_.device());
  // Eagerly on the CPU, the dense float parameters update in one fused pass
  // (frontend/optim_fused.h), the others op by op below: the same bits.
  detail::FusedAdamStep fused(decoupled_);
  size_t i = 0;
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    const AdamOptions& o = group_options<AdamOptions>(gi);
    const double b1 = o.beta1_, b2 = o.beta2_;
    // Bias corrections as f64 tensor ops of the step count, so a traced step
    // stays correct; each parameter uses them in its own dtype (PyTorch: Python
    // floats).
    PerParam bc1(1 - full({}, b1, f64).pow(step_));
    PerParam bc2_sqrt((1 - full({}, b2, f64).pow(step_)).sqrt());
    for (Tensor& p : param_groups()[gi].params()) {
      const size_t k = i++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (o.amsgrad_ && !v_max_[k].defined())
        throw Error(std::string(name()) + ": amsgrad was turned on after the optimizer was " +
                    "made (expected it in the options it was made with)");
      if (fused.add(p, g, m_[k], v_[k], v_max_[k], o, lr_like(gi, p), bc1.like(p),
                    bc2_sqrt.like(p)))
        continue;
      if (o.weight_decay_ != 0) {
        if (decoupled_)
          p.mul_(1 - lr_like(gi, p) * o.weight_decay_);
        else
          g = g + o.weight_decay_ * p;
      }
      m_[k].mul_(b1).add_(g, 1 - b1);
      v_[k].mul_(b2).add_(g * g, 1 - b2);
      Tensor second = v_[k];
      if (o.amsgrad_) {  // PyTorch: the maximum of the uncorrected second moments
        v_max_[k].copy_(maximum(v_max_[k], v_[k]));
        second = v_max_[k];
      }
      // PyTorch's form: denom = sqrt(v) / sqrt(bc2) + eps, p -= (lr / bc1) * m / denom. Two
      // divisions and a square root an element; m / bc1 / denom with sqrt(v / bc2) takes
      // three and a root, and the divider, not memory, then bounds the update (1.3x its time).
      Tensor denom = second.sqrt() / bc2_sqrt.like(p) + o.eps_;
      p.sub_(m_[k] / denom * (lr_like(gi, p) / bc1.like(p)));
    }
  }
  fused.run();
}

// ---- RMSprop ----

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions o)
    : Optimizer(std::move(params)), options(o) {
  add_all_state();
}

RMSprop::RMSprop(std::vector<OptimizerParamGroup> groups, RMSpropOptions o)
    : Optimizer(std::move(groups)), options(o) {
  add_all_state();
}

void RMSprop::check_options(const OptimizerOptions& o) const {
  check_kind<RMSpropOptions>(o, "RMSprop");
}

void RMSprop::add_state(size_t g) {
  const RMSpropOptions& o = group_options<RMSpropOptions>(g);
  for (const Tensor& p : param_groups()[g].params()) {
    square_avg_.push_back(zeros_like(p));
    grad_avg_.push_back(zeros_if(o.centered_, p));
    momentum_.push_back(zeros_if(o.momentum_ != 0, p));
  }
}

std::vector<Tensor> RMSprop::state() const {
  std::vector<Tensor> s = square_avg_;
  append_defined(s, grad_avg_);
  append_defined(s, momentum_);
  return s;
}

std::vector<Optimizer::Hyperparameter> RMSprop::hyperparameters(
    const OptimizerOptions& base) const {
  const auto& o = static_cast<const RMSpropOptions&>(base);
  return {{"alpha", o.alpha_},
          {"eps", o.eps_},
          {"weight_decay", o.weight_decay_},
          {"momentum", o.momentum_},
          {"centered", o.centered_ ? 1.0 : 0.0}};
}

void RMSprop::step() {
  begin_step();
  NoGradGuard no_grad;
  size_t i = 0;
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    const RMSpropOptions& o = group_options<RMSpropOptions>(gi);
    const double a = o.alpha_;
    for (Tensor& p : param_groups()[gi].params()) {
      const size_t k = i++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if ((o.centered_ && !grad_avg_[k].defined()) || (o.momentum_ != 0 && !momentum_[k].defined()))
        throw Error(
            "RMSprop: centered or momentum was set after construction (expected them in "
            "RMSpropOptions)");
      if (o.weight_decay_ != 0) g = g + o.weight_decay_ * p;
      square_avg_[k].mul_(a).add_(g * g, 1 - a);
      Tensor avg;
      if (o.centered_) {
        grad_avg_[k].mul_(a).add_(g, 1 - a);
        avg = (square_avg_[k] - grad_avg_[k] * grad_avg_[k]).sqrt() + o.eps_;
      } else {
        avg = square_avg_[k].sqrt() + o.eps_;
      }
      if (o.momentum_ != 0) {
        momentum_[k].mul_(o.momentum_).add_(g / avg);
        p.sub_(momentum_[k] * lr_like(gi, p));
      } else {
        p.sub_(g / avg * lr_like(gi, p));
      }
    }
  }
}

// ---- Adagrad ----

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions o)
    : Adagrad(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, o) {}

Adagrad::Adagrad(std::vector<OptimizerParamGroup> groups, AdagradOptions o)
    : Optimizer(std::move(groups)), options(o) {
  step_ =
      zeros({}, TensorOptions(kFloat64).device(params_.empty() ? Device() : params_[0].device()));
  add_all_state();
}

void Adagrad::check_options(const OptimizerOptions& o) const {
  check_kind<AdagradOptions>(o, "Adagrad");
}

void Adagrad::add_state(size_t g) {
  const AdagradOptions& o = group_options<AdagradOptions>(g);
  for (const Tensor& p : param_groups()[g].params())
    sum_.push_back(full_like(p, Scalar(o.initial_accumulator_value_)));
}

std::vector<Tensor> Adagrad::state() const {
  std::vector<Tensor> s{step_};
  s.insert(s.end(), sum_.begin(), sum_.end());
  return s;
}

std::vector<Optimizer::Hyperparameter> Adagrad::hyperparameters(
    const OptimizerOptions& base) const {
  const auto& o = static_cast<const AdagradOptions&>(base);
  return {{"lr_decay", o.lr_decay_},
          {"weight_decay", o.weight_decay_},
          {"eps", o.eps_},
          {"initial_accumulator_value", o.initial_accumulator_value_}};
}

void Adagrad::step() {
  begin_step();
  NoGradGuard no_grad;
  step_.add_(1);
  size_t i = 0;
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    const AdagradOptions& o = group_options<AdagradOptions>(gi);
    // libtorch's clr = lr / (1 + (step - 1) lr_decay): the divisor as f64 tensor
    // ops of the step count (so a traced step stays correct), then, as Adam's
    // bias corrections, in each parameter's dtype.
    PerParam decay(1 + (step_ - 1) * o.lr_decay_);
    for (Tensor& p : param_groups()[gi].params()) {
      const size_t k = i++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (o.weight_decay_ != 0) g = g + o.weight_decay_ * p;
      sum_[k].add_(g * g);
      p.sub_(g / (sum_[k].sqrt() + o.eps_) * (lr_like(gi, p) / decay.like(p)));
    }
  }
}

}  // namespace kiln::optim
