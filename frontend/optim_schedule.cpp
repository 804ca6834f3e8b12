// The learning-rate schedulers of frontend/optim.h: StepLR and
// CosineAnnealingLR, each a closed form of the epoch.
#include <cmath>

#include "frontend/optim.h"

namespace kiln::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : opt_(optimizer) {
  for (const OptimizerParamGroup& g : optimizer.param_groups())
    base_lrs_.push_back(g.options().get_lr());
}

void LRScheduler::step() {
  ++epoch_;
  std::vector<OptimizerParamGroup>& groups = opt_.param_groups();
  if (groups.size() != base_lrs_.size())
    throw Error("LRScheduler: the optimizer has " + std::to_string(groups.size()) +
                " parameter groups, " + std::to_string(base_lrs_.size()) +
                " when the scheduler was made (expected groups added before the scheduler)");
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr = lr_at(epoch_, base_lrs_[g]);
    if (!(lr >= 0) || !std::isfinite(lr))
      throw Error("LRScheduler: learning rate must be a finite number >= 0, got " +
                  std::to_string(lr));
    groups[g].options().set_lr(lr);
  }
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0)
    throw Error("StepLR: step_size must be positive, got " + std::to_string(step_size));
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  if (T_max <= 0)
    throw Error("CosineAnnealingLR: T_max must be positive, got " + std::to_string(T_max));
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double pi = std::acos(-1.0);
  return eta_min_ +
         (base_lr - eta_min_) *
             (1 + std::cos(pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
}

}  // namespace kiln::optim
