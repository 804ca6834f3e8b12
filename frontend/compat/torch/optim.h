// torch::optim on Kiln: Kiln's optimizers are libtorch's names; the schedulers
// are libtorch's own (below), whose rules differ from Kiln's (PyTorch's Python).
#pragma once

#include <algorithm>
#include <vector>

#include "torch/functions.h"

namespace torch {
namespace optim {
using namespace kiln::optim;

/// libtorch's C++ LRScheduler: step() asks get_lrs() for every group's new rate
/// and sets it, then counts the step. A schedule of one's own overrides
/// get_lrs(), reading get_current_lrs() and step_count_.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {}
  virtual ~LRScheduler() = default;
  void step() {
    const std::vector<double> lrs = get_lrs();
    std::vector<OptimizerParamGroup>& groups = optimizer_.param_groups();
    TORCH_CHECK(lrs.size() == groups.size(), "LRScheduler: get_lrs() gave ", lrs.size(),
                " rates for ", groups.size(), " parameter groups");
    for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(lrs[g]);
    ++step_count_;
  }

 protected:
  virtual std::vector<double> get_lrs() = 0;
  std::vector<double> get_current_lrs() const {
    std::vector<double> lrs;
    for (const OptimizerParamGroup& g : optimizer_.param_groups())
      lrs.push_back(g.options().get_lr());
    return lrs;
  }
  unsigned step_count_ = 0;

 private:
  Optimizer& optimizer_;
};

/// libtorch's C++ StepLR: unlike PyTorch's Python scheduler (and
/// kiln::optim::StepLR), it takes no step when constructed, so its first step()
/// leaves the rates as they are and every step_size-th one after that
/// multiplies each group's current rate by gamma.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, unsigned step_size, double gamma = 0.1)
      : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
    TORCH_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  }

 private:
  std::vector<double> get_lrs() override {
    std::vector<double> lrs = get_current_lrs();
    if (step_count_ != 0 && step_count_ % step_size_ == 0)
      for (double& lr : lrs) lr *= gamma_;
    return lrs;
  }
  const unsigned step_size_;
  const double gamma_;
};
}  // namespace optim
}  // namespace torch
