// Checks beyond eager == traced: an Adam that checks each eager step against
// Adam's formula evaluated in double precision on the host (the eager and the
// traced step share their code, so comparing them cannot find a precision bug
// such as a float32 step count).
#pragma once

#include <string>
#include <vector>

#include "frontend/optim.h"

namespace kiln::fuzz {

class CheckedAdam : public optim::Adam {
 public:
  CheckedAdam(std::vector<Tensor> params, double lr);
  void step() override;
  /// The first step that differed from the formula ("" if none).
  const std::string& mismatch() const { return mismatch_; }

 private:
  std::vector<std::vector<double>> m_ref_, v_ref_;
  double t_ = 0;
  std::string mismatch_;
};

}  // namespace kiln::fuzz
