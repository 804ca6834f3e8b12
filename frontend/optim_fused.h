// The eager optimizer steps' multi-tensor path (runtime/fused_optim.h): an
// eager Adam or AdamW step on the CPU updates every dense float parameter in
// one pass, the same bits as op by op. Traced steps, CUDA parameters, views,
// other dtypes and KILN_EAGER_KERNELS=0 (the op-by-op oracle) keep the ops.
#pragma once

#include <memory>

#include "frontend/optim.h"

namespace kiln::detail {

/// Collects the parameters of one eager Adam step that can update fused, then
/// runs them together.
class FusedAdamStep {
 public:
  /// `decoupled`: AdamW's weight decay.
  explicit FusedAdamStep(bool decoupled);
  ~FusedAdamStep();
  FusedAdamStep(const FusedAdamStep&) = delete;
  FusedAdamStep& operator=(const FusedAdamStep&) = delete;

  /// Takes p's update (gradient g, moments m and v, v_max with amsgrad or
  /// undefined) when it can run fused, and returns true; false leaves it to the
  /// caller's ops. `lr`, `bc1` and `bc2_sqrt` are the 0-dim tensors of p's
  /// dtype the op-by-op step uses (learning rate, 1 - beta1^t, sqrt(1 - beta2^t)).
  bool add(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& v_max,
           const optim::AdamOptions& o, const Tensor& lr, const Tensor& bc1,
           const Tensor& bc2_sqrt);
  /// Runs every update taken, in one parallel region a dtype.
  void run();

  /// How many parameters eager steps updated fused in this process (tests).
  static uint64_t fused_updates();

 private:
  struct State;
  bool decoupled_;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::detail
