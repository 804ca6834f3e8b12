// Multi-tensor Adam and SGD for eager steps (fused_optim.h). Built with
// -fno-math-errno and -ffp-contract=off (runtime/CMakeLists.txt): sqrt is the
// instruction, correctly rounded like the reference kernels' std::sqrt and the
// traced kernels' llvm.sqrt (without the flag GCC keeps a scalar call for errno
// and the loop does not vectorise), and no multiply-add is contracted into an
// FMA, which rounds once where the other kernels round twice.
#include "runtime/fused_optim.h"

#include <cmath>

#include "runtime/thread_pool.h"
#include "runtime/vector_exp.h"  // KILN_VECTOR_CLONES

namespace kiln {
namespace {

// One slot's elements [begin, end), with the weight decay and amsgrad chosen
// at compile time so the loop has no branch.
template <class T, bool kL2, bool kDecoupled, bool kAmsgrad>
[[gnu::always_inline]] inline void adam_loop(const AdamSlot<T>& s, const AdamScalars<T>& c,
                                             int64_t begin, int64_t end) {
  T* __restrict p = s.p;
  const T* __restrict g = s.g;
  T* __restrict m = s.m;
  T* __restrict v = s.v;
  T* __restrict v_max = s.v_max;
  for (int64_t i = begin; i < end; ++i) {
    T pi = p[i];
    T gi = g[i];
    if constexpr (kDecoupled) pi = pi * c.decay;
    if constexpr (kL2) gi = gi + c.weight_decay * pi;
    const T mi = m[i] * c.beta1 + gi * c.one_minus_beta1;
    const T vi = v[i] * c.beta2 + (gi * gi) * c.one_minus_beta2;
    T second = vi;
    if constexpr (kAmsgrad) {
      const T old = v_max[i];
      second = (old > vi || old != old) ? old : vi;  // NaN-propagating, as maximum
      v_max[i] = second;
    }
    const T denom = std::sqrt(second) / c.bc2_sqrt + c.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - (mi / denom) * c.step_size;
  }
}

template <class T>
[[gnu::always_inline]] inline void adam_range_impl(const AdamSlot<T>& s, const AdamScalars<T>& c,
                                                   int64_t begin, int64_t end) {
  const bool ams = s.v_max != nullptr;
  if (c.decoupled) {
    if (ams) adam_loop<T, false, true, true>(s, c, begin, end);
    else adam_loop<T, false, true, false>(s, c, begin, end);
  } else if (c.l2) {
    if (ams) adam_loop<T, true, false, true>(s, c, begin, end);
    else adam_loop<T, true, false, false>(s, c, begin, end);
  } else {
    if (ams) adam_loop<T, false, false, true>(s, c, begin, end);
    else adam_loop<T, false, false, false>(s, c, begin, end);
  }
}

KILN_VECTOR_CLONES void adam_range(const AdamSlot<float>& s, const AdamScalars<float>& c,
                                   int64_t begin, int64_t end) {
  adam_range_impl(s, c, begin, end);
}
KILN_VECTOR_CLONES void adam_range(const AdamSlot<double>& s, const AdamScalars<double>& c,
                                   int64_t begin, int64_t end) {
  adam_range_impl(s, c, begin, end);
}

template <class T, bool kL2, bool kMomentum, bool kDampening, bool kNesterov>
[[gnu::always_inline]] inline void sgd_loop(const SgdSlot<T>& s, const SgdScalars<T>& c,
                                            int64_t begin, int64_t end) {
  T* __restrict p = s.p;
  const T* __restrict g = s.g;
  T* __restrict buf = s.buf;
  for (int64_t i = begin; i < end; ++i) {
    const T pi = p[i];
    T gi = g[i];
    if constexpr (kL2) gi = gi + c.weight_decay * pi;
    if constexpr (kMomentum) {
      const T b = buf[i] * c.momentum + (kDampening ? gi * c.one_minus_dampening : gi);
      buf[i] = b;
      gi = kNesterov ? gi + c.momentum * b : b;
    }
    p[i] = pi - gi * c.lr;
  }
}

template <class T, bool kL2>
[[gnu::always_inline]] inline void sgd_range_l2(const SgdSlot<T>& s, const SgdScalars<T>& c,
                                                int64_t begin, int64_t end) {
  if (!s.buf) return sgd_loop<T, kL2, false, false, false>(s, c, begin, end);
  if (c.dampening) {
    if (c.nesterov) sgd_loop<T, kL2, true, true, true>(s, c, begin, end);
    else sgd_loop<T, kL2, true, true, false>(s, c, begin, end);
  } else {
    if (c.nesterov) sgd_loop<T, kL2, true, false, true>(s, c, begin, end);
    else sgd_loop<T, kL2, true, false, false>(s, c, begin, end);
  }
}

template <class T>
[[gnu::always_inline]] inline void sgd_range_impl(const SgdSlot<T>& s, const SgdScalars<T>& c,
                                                  int64_t begin, int64_t end) {
  if (c.l2) sgd_range_l2<T, true>(s, c, begin, end);
  else sgd_range_l2<T, false>(s, c, begin, end);
}

KILN_VECTOR_CLONES void sgd_range(const SgdSlot<float>& s, const SgdScalars<float>& c,
                                  int64_t begin, int64_t end) {
  sgd_range_impl(s, c, begin, end);
}
KILN_VECTOR_CLONES void sgd_range(const SgdSlot<double>& s, const SgdScalars<double>& c,
                                  int64_t begin, int64_t end) {
  sgd_range_impl(s, c, begin, end);
}

// Runs range(slot k, scalars k, lo, hi) over every slot's elements, the slots
// laid end to end and cut into parallel chunks that may cross from one slot
// into the next.
template <class Slot, class Scalars, class Range>
void for_slots(const std::vector<Slot>& slots, const std::vector<Scalars>& scalars, Range range) {
  int64_t total = 0;
  for (const Slot& s : slots) total += s.n;
  parallel_for(total, kElementwiseGrain, [&](int64_t b, int64_t e) {
    for_each_part(
        slots.size(), [&](size_t k) { return slots[k].n; }, b, e,
        [&](size_t k, int64_t lo, int64_t hi) { range(slots[k], scalars[k], lo, hi); });
  });
}

}  // namespace

template <class T>
void adam_update(const std::vector<AdamSlot<T>>& slots, const std::vector<AdamScalars<T>>& scalars) {
  for_slots(slots, scalars, [](const AdamSlot<T>& s, const AdamScalars<T>& c, int64_t lo,
                               int64_t hi) { adam_range(s, c, lo, hi); });
}

template <class T>
void sgd_update(const std::vector<SgdSlot<T>>& slots, const std::vector<SgdScalars<T>>& scalars) {
  for_slots(slots, scalars, [](const SgdSlot<T>& s, const SgdScalars<T>& c, int64_t lo,
                               int64_t hi) { sgd_range(s, c, lo, hi); });
}

template void adam_update<float>(const std::vector<AdamSlot<float>>&,
                                 const std::vector<AdamScalars<float>>&);
template void adam_update<double>(const std::vector<AdamSlot<double>>&,
                                  const std::vector<AdamScalars<double>>&);
template void sgd_update<float>(const std::vector<SgdSlot<float>>&,
                                const std::vector<SgdScalars<float>>&);
template void sgd_update<double>(const std::vector<SgdSlot<double>>&,
                                 const std::vector<SgdScalars<double>>&);

}  // namespace kiln
