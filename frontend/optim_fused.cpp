#include "frontend/optim_fused.h"

#include <atomic>
#include <utility>
#include <vector>

#include "frontend/alias.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/fused_optim.h"

namespace kiln::detail {
namespace {

std::atomic<uint64_t> g_fused{0}, g_passes{0};

// A tensor the fused loop may read or write as `n` dense elements of `dt`:
// eager, on the CPU, contiguous (a view too: a large randn is one).
bool dense_cpu(const Tensor& t, DType dt, int64_t n) {
  if (!t.defined() || t.dtype() != dt || !t.device().is_cpu() || t.numel() != n) return false;
  const TensorImpl& i = *t.impl();
  return !i.symbolic() && i.buffer && t.is_contiguous();
}

// The slots and scalars of one dtype, for runtime/fused_optim.h.
template <class Slot, class Scalars>
struct Batch {
  std::vector<Slot> slots;
  std::vector<Scalars> scalars;
};

// Runs update(slots, scalars) over each dtype's batch that has slots; returns
// how many parameters and passes that was (for FusedStep::finish).
template <class State, class Update>
std::pair<size_t, size_t> run_batches(const State& s, Update update) {
  if (!s.f32.slots.empty()) update(s.f32.slots, s.f32.scalars);
  if (!s.f64.slots.empty()) update(s.f64.slots, s.f64.scalars);
  return {s.f32.slots.size() + s.f64.slots.size(),
          size_t{!s.f32.slots.empty()} + size_t{!s.f64.slots.empty()}};
}

// Calls f(batch, T*{}) with the batch of p's dtype (f32 or f64: can_take's).
template <class F, class B32, class B64>
void with_batch(const Tensor& p, B32& f32, B64& f64, F f) {
  if (p.dtype() == DType::f32) f(f32, static_cast<float*>(nullptr));
  else f(f64, static_cast<double*>(nullptr));
}

// Adam's scalars, read from the 0-dim tensors the op-by-op step computes with,
// so they are its values.
template <class T>
AdamScalars<T> adam_scalars(const optim::AdamOptions& o, bool decoupled, const Tensor& lr,
                            const Tensor& bc1, const Tensor& bc2_sqrt) {
  AdamScalars<T> c{};
  c.beta1 = static_cast<T>(o.beta1_);
  c.one_minus_beta1 = static_cast<T>(1 - o.beta1_);
  c.beta2 = static_cast<T>(o.beta2_);
  c.one_minus_beta2 = static_cast<T>(1 - o.beta2_);
  c.eps = static_cast<T>(o.eps_);
  c.weight_decay = static_cast<T>(o.weight_decay_);
  c.bc2_sqrt = bc2_sqrt.item<T>();
  c.step_size = (lr / bc1).item<T>();
  c.l2 = o.weight_decay_ != 0 && !decoupled;
  c.decoupled = o.weight_decay_ != 0 && decoupled;
  c.decay = c.decoupled ? (1 - lr * o.weight_decay_).item<T>() : T(1);
  return c;
}

template <class T>
SgdScalars<T> sgd_scalars(const optim::SGDOptions& o, const Tensor& lr) {
  SgdScalars<T> c{};
  c.lr = lr.item<T>();
  c.weight_decay = static_cast<T>(o.weight_decay_);
  c.momentum = static_cast<T>(o.momentum_);
  c.one_minus_dampening = static_cast<T>(1 - o.dampening_);
  c.l2 = o.weight_decay_ != 0;
  c.dampening = 1 - o.dampening_ != 1;  // add_(g, alpha) multiplies unless alpha is 1
  c.nesterov = o.nesterov_;
  return c;
}

}  // namespace

// ---- FusedStep ----

FusedStep::FusedStep() : enabled_(!current_trace() && settings().eager_kernels) {}

FusedStep::~FusedStep() = default;

uint64_t FusedStep::fused_updates() {
  return g_fused.load(std::memory_order_relaxed);
}

uint64_t FusedStep::fused_passes() {
  return g_passes.load(std::memory_order_relaxed);
}

bool FusedStep::can_take(const Tensor& p, std::initializer_list<const Tensor*> others) const {
  if (!enabled_) return false;
  const DType dt = p.dtype();
  const int64_t n = p.numel();
  if ((dt != DType::f32 && dt != DType::f64) || !dense_cpu(p, dt, n)) return false;
  std::vector<const Buffer*> buffers{p.impl()->buffer.get()};
  for (const Tensor* t : others) {
    if (!t->defined()) continue;
    if (!dense_cpu(*t, dt, n)) return false;
    buffers.push_back(t->impl()->buffer.get());
  }
  for (size_t a = 0; a < buffers.size(); ++a)
    for (size_t b = a + 1; b < buffers.size(); ++b)
      if (buffers[a] == buffers[b]) return false;
  return true;
}

bool FusedStep::pending(std::initializer_list<const Tensor*> tensors) const {
  for (const Tensor* t : tensors)
    if (t->defined())
      for (const std::shared_ptr<Buffer>& b : written_)
        if (b == t->impl()->buffer) return true;
  return false;
}

void FusedStep::will_write(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    sync_view(*t->impl());
    written_.push_back(t->impl()->buffer);
  }
}

void FusedStep::finish(std::pair<size_t, size_t> updates_and_passes) {
  const auto [updates, passes] = updates_and_passes;
  for (const std::shared_ptr<Buffer>& b : written_) b->version++;  // as an in-place write
  written_.clear();
  g_fused.fetch_add(updates, std::memory_order_relaxed);
  g_passes.fetch_add(passes, std::memory_order_relaxed);
}

// ---- Adam, AdamW ----

template <class T>
struct AdamBatch : Batch<AdamSlot<T>, AdamScalars<T>> {
  // Whose scalars the last slot took (the same for every parameter of a group),
  // so they are computed once a group.
  const TensorImpl* lr = nullptr;
  const optim::AdamOptions* options = nullptr;
};

struct FusedAdamStep::State {
  AdamBatch<float> f32;
  AdamBatch<double> f64;
};

FusedAdamStep::FusedAdamStep(bool decoupled)
    : decoupled_(decoupled), state_(std::make_unique<State>()) {}

FusedAdamStep::~FusedAdamStep() = default;

bool FusedAdamStep::add(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                        const Tensor& v_max, const optim::AdamOptions& o, const Tensor& lr,
                        const Tensor& bc1, const Tensor& bc2_sqrt) {
  const Tensor none;
  const bool ams = o.amsgrad_;
  // Whether taken or left to the ops, an update reading or writing a pending
  // one's storage runs after it.
  if (pending({&p, &g, &m, &v, ams ? &v_max : &none})) run();
  if (!can_take(p, {&g, &m, &v, ams ? &v_max : &none})) return false;
  with_batch(p, state_->f32, state_->f64, [&](auto& batch, auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    // bc1 and bc2_sqrt are made with lr once a group and dtype: lr names them.
    if (batch.scalars.empty() || batch.lr != lr.impl() || batch.options != &o) {
      batch.scalars.push_back(adam_scalars<T>(o, decoupled_, lr, bc1, bc2_sqrt));
      batch.lr = lr.impl();
      batch.options = &o;
    } else {
      batch.scalars.push_back(batch.scalars.back());
    }
    batch.slots.push_back({p.data_ptr<T>(), g.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(),
                           ams ? v_max.data_ptr<T>() : nullptr, p.numel()});
  });
  will_write({&p, &m, &v, ams ? &v_max : &none});
  return true;
}

void FusedAdamStep::run() {
  finish(run_batches(*state_, [](const auto& slots, const auto& scalars) {
    adam_update(slots, scalars);
  }));
  state_ = std::make_unique<State>();
}

// ---- SGD ----

struct FusedSgdStep::State {
  Batch<SgdSlot<float>, SgdScalars<float>> f32;
  Batch<SgdSlot<double>, SgdScalars<double>> f64;
};

FusedSgdStep::FusedSgdStep() : state_(std::make_unique<State>()) {}

FusedSgdStep::~FusedSgdStep() = default;

bool FusedSgdStep::add(const Tensor& p, const Tensor& g, const Tensor& buf,
                       const optim::SGDOptions& o, const Tensor& lr) {
  const Tensor none;
  const bool momentum = o.momentum_ != 0;
  if (pending({&p, &g, momentum ? &buf : &none})) run();
  if (!can_take(p, {&g, momentum ? &buf : &none})) return false;
  with_batch(p, state_->f32, state_->f64, [&](auto& batch, auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    batch.scalars.push_back(sgd_scalars<T>(o, lr));
    batch.slots.push_back(
        {p.data_ptr<T>(), g.data_ptr<T>(), momentum ? buf.data_ptr<T>() : nullptr, p.numel()});
  });
  will_write({&p, momentum ? &buf : &none});
  return true;
}

void FusedSgdStep::run() {
  finish(run_batches(*state_, [](const auto& slots, const auto& scalars) {
    sgd_update(slots, scalars);
  }));
  state_ = std::make_unique<State>();
}

}  // namespace kiln::detail
