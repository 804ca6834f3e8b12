// Checks beyond eager == traced, for what eager and traced share and so cannot
// find by comparing: an Adam that checks each eager step against Adam's
// formula evaluated in double precision on the host (a precision bug such as
// a float32 step count), and each eager result against the shape and value
// PyTorch gives (a shape rule or an empty reduction both modes get wrong).
#pragma once

#include <string>
#include <vector>

#include "frontend/optim.h"
#include "tools/fuzz/program.h"

namespace kiln::fuzz {

/// How the result of `in` differs from what PyTorch gives (Instr::shape,
/// Instr::value), or "" when it agrees.
std::string pytorch_mismatch(const Instr& in, const Tensor& result);

/// The fuzzer's Adam: eps 1e-3, so a gradient that is zero up to rounding (the
/// sum of a softmax) moves the parameters by rounding-sized steps, not by lr
/// times its sign, which would turn ulps into differences the comparison sees.
inline optim::AdamOptions adam_options() {
  return optim::AdamOptions(0.01).eps(1e-3);
}
inline constexpr const char* kAdamSpelling = "optim::AdamOptions(0.01).eps(1e-3)";

class CheckedAdam : public optim::Adam {
 public:
  CheckedAdam(std::vector<Tensor> params, optim::AdamOptions options);
  void step() override;
  /// The first step that differed from the formula ("" if none).
  const std::string& mismatch() const { return mismatch_; }

 private:
  std::vector<std::vector<double>> m_ref_, v_ref_;
  double t_ = 0;
  std::string mismatch_;
};

}  // namespace kiln::fuzz
