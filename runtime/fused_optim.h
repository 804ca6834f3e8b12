// Multi-tensor optimizer updates for eager steps, as torch's fused Adam and
// SGD: every parameter's update in one pass over its elements (Adam: p, g, m,
// v read once, p, m, v written once), all parameters in one parallel region.
// Op by op, an eager Adam step makes ten passes and nine temporaries a
// parameter; it took a third of a small MLP's eager training step.
//
// The arithmetic is the op-by-op step's (frontend/optim.cpp), in the same
// order and the same type, each operation rounded as the reference kernels and
// the traced kernels round it: results are the same bits (tests compare them).
// The caller passes the scalars already in the parameter's type, computed as
// the op-by-op step computes them.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

/// One parameter's Adam update. All arrays are dense, `n` long, and none
/// overlaps another; `v_max` is null without amsgrad.
template <class T>
struct AdamSlot {
  T* p;
  const T* g;
  T* m;
  T* v;
  T* v_max;
  int64_t n;
};

/// Adam's scalars in the parameter's type. Per element, in this order:
///   p = p * decay                              (decoupled weight decay only)
///   g = g + weight_decay * p                   (L2 weight decay only)
///   m = m * beta1 + g * one_minus_beta1
///   v = v * beta2 + (g * g) * one_minus_beta2
///   s = v, or v_max = maximum(v_max, v)        (amsgrad; NaN-propagating)
///   p = p - m / (sqrt(s) / bc2_sqrt + eps) * step_size
template <class T>
struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  T weight_decay;  // L2 (added to the gradient); used when `l2`
  T decay;         // decoupled (AdamW: 1 - lr * weight_decay); used when `decoupled`
  T bc2_sqrt;      // sqrt(1 - beta2^step)
  T step_size;     // lr / (1 - beta1^step)
  bool l2 = false, decoupled = false;
};

/// Updates every slot, each with the scalars of the same index, in one
/// parallel region.
template <class T>
void adam_update(const std::vector<AdamSlot<T>>& slots, const std::vector<AdamScalars<T>>& scalars);

extern template void adam_update<float>(const std::vector<AdamSlot<float>>&,
                                        const std::vector<AdamScalars<float>>&);
extern template void adam_update<double>(const std::vector<AdamSlot<double>>&,
                                         const std::vector<AdamScalars<double>>&);

/// One parameter's SGD update; `buf` (the momentum buffer) is null without momentum.
template <class T>
struct SgdSlot {
  T* p;
  const T* g;
  T* buf;
  int64_t n;
};

/// SGD's scalars in the parameter's type. Per element, in this order:
///   g = g + weight_decay * p                   (weight decay only)
///   buf = buf * momentum + g * one_minus_dampening   (momentum only; without
///                                              dampening, + g)
///   g = g + momentum * buf (nesterov), else g = buf   (momentum only)
///   p = p - g * lr
template <class T>
struct SgdScalars {
  T lr, weight_decay, momentum, one_minus_dampening;
  bool l2 = false, dampening = false, nesterov = false;
};

template <class T>
void sgd_update(const std::vector<SgdSlot<T>>& slots, const std::vector<SgdScalars<T>>& scalars);

extern template void sgd_update<float>(const std::vector<SgdSlot<float>>&,
                                       const std::vector<SgdScalars<float>>&);
extern template void sgd_update<double>(const std::vector<SgdSlot<double>>&,
                                        const std::vector<SgdScalars<double>>&);

}  // namespace kiln
