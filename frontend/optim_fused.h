// The eager optimizer steps' multi-tensor path (runtime/fused_optim.h): an
// eager Adam, AdamW or SGD step on the CPU updates every dense float parameter
// in one pass, the same bits as op by op. Traced steps, CUDA parameters,
// strided tensors, other dtypes and KILN_EAGER_KERNELS=0 (the op-by-op oracle)
// keep the ops.
#pragma once

#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "frontend/optim.h"

namespace kiln {
struct Buffer;
}

namespace kiln::detail {

/// What the fused steps share: which parameters they may take, and the
/// in-place writes they count. A step collects the parameters it takes, then
/// runs them together.
class FusedStep {
 public:
  FusedStep();
  ~FusedStep();
  FusedStep(const FusedStep&) = delete;
  FusedStep& operator=(const FusedStep&) = delete;

  /// How many parameters eager steps updated fused in this process, and in
  /// how many passes (parallel regions) (tests).
  static uint64_t fused_updates();
  static uint64_t fused_passes();

 protected:
  /// True when p and every defined one of `others` is an eager dense CPU array
  /// of p's numel and float dtype (f32 or f64), each with its own storage (the
  /// loop reads every element once, in place).
  bool can_take(const Tensor& p, std::initializer_list<const Tensor*> others) const;
  /// Whether an update taken but not yet run writes the storage of any of
  /// `tensors` (a parameter listed twice, a strided view of a parameter listed
  /// as another, a gradient in another parameter's storage): add() runs those
  /// first, whether it takes the next update or leaves it to the ops, so the
  /// updates keep the op-by-op step's order.
  bool pending(std::initializer_list<const Tensor*> tensors) const;
  /// The tensors a taken update writes: views take their base's history now,
  /// as assign() does, and each buffer's version moves at finish().
  void will_write(std::initializer_list<const Tensor*> tensors);
  /// After the update ran: the writes counted, and how many parameters it
  /// updated in how many passes.
  void finish(std::pair<size_t, size_t> updates_and_passes);

  bool enabled_;

 private:
  std::vector<std::shared_ptr<Buffer>> written_;
};

class FusedAdamStep : public FusedStep {
 public:
  /// `decoupled`: AdamW's weight decay.
  explicit FusedAdamStep(bool decoupled);
  ~FusedAdamStep();

  /// Takes p's update (gradient g, moments m and v, v_max with amsgrad or
  /// undefined) when it can run fused, and returns true; false leaves it to the
  /// caller's ops. `lr`, `bc1` and `bc2_sqrt` are the 0-dim tensors of p's
  /// dtype the op-by-op step uses (learning rate, 1 - beta1^t, sqrt(1 - beta2^t)).
  bool add(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& v_max,
           const optim::AdamOptions& o, const Tensor& lr, const Tensor& bc1,
           const Tensor& bc2_sqrt);
  /// Runs every update taken, in one parallel region a dtype.
  void run();

 private:
  struct State;
  bool decoupled_;
  std::unique_ptr<State> state_;
};

class FusedSgdStep : public FusedStep {
 public:
  FusedSgdStep();
  ~FusedSgdStep();

  /// Takes p's update (gradient g, momentum buffer `buf`, undefined without
  /// momentum) when it can run fused; `lr` is the 0-dim tensor of p's dtype the
  /// op-by-op step uses.
  bool add(const Tensor& p, const Tensor& g, const Tensor& buf, const optim::SGDOptions& o,
           const Tensor& lr);
  void run();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::detail
