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

std::atomic<uint64_t> g_fused{0};

// A tensor the fused loop may read or write as `n` dense elements of `dt`:
// eager, on the CPU, contiguous (a view too: a large randn is one).
bool dense_cpu(const Tensor& t, DType dt, int64_t n) {
  if (!t.defined() || t.dtype() != dt || !t.device().is_cpu() || t.numel() != n) return false;
  const TensorImpl& i = *t.impl();
  return !i.symbolic() && i.buffer && t.is_contiguous();
}

// The scalars of one (learning rate, bias corrections) triple, read from the
// 0-dim tensors the op-by-op step computes with, so they are its values.
template <class T>
AdamScalars<T> scalars_of(const optim::AdamOptions& o, bool decoupled, const Tensor& lr, const Tensor& bc1,
                          const Tensor& bc2_sqrt) {
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
struct Batch {
  std::vector<AdamSlot<T>> slots;
  std::vector<AdamScalars<T>> scalars;
  // Whose scalars the last slot took (the same for every parameter of a group
  // and dtype), so they are computed once.
  const TensorImpl* lr = nullptr;
  const TensorImpl* bc1 = nullptr;
  const TensorImpl* bc2_sqrt = nullptr;
  const optim::AdamOptions* options = nullptr;
};

}  // namespace

struct FusedAdamStep::State {
  Batch<float> f32;
  Batch<double> f64;
  std::vector<std::shared_ptr<Buffer>> written;
};

FusedAdamStep::FusedAdamStep(bool decoupled) : decoupled_(decoupled) {
  if (!current_trace() && settings().eager_kernels) state_ = std::make_unique<State>();
}

FusedAdamStep::~FusedAdamStep() = default;

bool FusedAdamStep::add(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                        const Tensor& v_max, const optim::AdamOptions& o, const Tensor& lr,
                        const Tensor& bc1, const Tensor& bc2_sqrt) {
  if (!state_) return false;
  const DType dt = p.dtype();
  if (dt != DType::f32 && dt != DType::f64) return false;
  const int64_t n = p.numel();
  const bool ams = o.amsgrad_;
  if (!dense_cpu(p, dt, n) || !dense_cpu(g, dt, n) || !dense_cpu(m, dt, n) ||
      !dense_cpu(v, dt, n) || (ams && !dense_cpu(v_max, dt, n)))
    return false;
  // Every array its own storage: the loop reads each element once, in place.
  std::vector<const Buffer*> buffers{p.impl()->buffer.get(), g.impl()->buffer.get(),
                                     m.impl()->buffer.get(), v.impl()->buffer.get()};
  if (ams) buffers.push_back(v_max.impl()->buffer.get());
  for (size_t a = 0; a < buffers.size(); ++a)
    for (size_t b = a + 1; b < buffers.size(); ++b)
      if (buffers[a] == buffers[b]) return false;

  auto take = [&](auto& batch, auto* data) {
    using T = std::remove_pointer_t<decltype(data)>;
    if (batch.scalars.empty() || batch.lr != lr.impl() || batch.bc1 != bc1.impl() ||
        batch.bc2_sqrt != bc2_sqrt.impl() || batch.options != &o) {
      batch.scalars.push_back(scalars_of<T>(o, decoupled_, lr, bc1, bc2_sqrt));
      batch.lr = lr.impl();
      batch.bc1 = bc1.impl();
      batch.bc2_sqrt = bc2_sqrt.impl();
      batch.options = &o;
    } else {
      batch.scalars.push_back(batch.scalars.back());
    }
    batch.slots.push_back({p.data_ptr<T>(), g.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(),
                           ams ? v_max.data_ptr<T>() : nullptr, n});
  };
  if (dt == DType::f32) take(state_->f32, static_cast<float*>(nullptr));
  else take(state_->f64, static_cast<double*>(nullptr));
  // As assign() before an in-place write: a view takes its base's history.
  std::vector<const Tensor*> written{&p, &m, &v};
  if (ams) written.push_back(&v_max);
  for (const Tensor* t : written) {
    sync_view(*t->impl());
    state_->written.push_back(t->impl()->buffer);
  }
  return true;
}

void FusedAdamStep::run() {
  if (!state_) return;
  if (!state_->f32.slots.empty()) adam_update(state_->f32.slots, state_->f32.scalars);
  if (!state_->f64.slots.empty()) adam_update(state_->f64.slots, state_->f64.scalars);
  g_fused.fetch_add(state_->f32.slots.size() + state_->f64.slots.size(), std::memory_order_relaxed);
  for (const std::shared_ptr<Buffer>& b : state_->written) b->version++;  // as an in-place write
  state_ = std::make_unique<State>();
}

uint64_t FusedAdamStep::fused_updates() {
  return g_fused.load(std::memory_order_relaxed);
}

}  // namespace kiln::detail
