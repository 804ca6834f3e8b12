// Eager composites as cached compiled functions (eager_composite.h).
#include "frontend/eager_composite.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "frontend/autograd.h"
#include "frontend/function.h"
#include "frontend/jit.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln::detail {
namespace {

// > 0 while this thread runs a composite's compiled function or its eager
// fallback: the body inside runs op by op (or traces), never recursing here.
thread_local int t_depth = 0;

struct Nested {
  Nested() { ++t_depth; }
  ~Nested() { --t_depth; }
  Nested(const Nested&) = delete;
  Nested& operator=(const Nested&) = delete;
};

TraceArgs args_of(const std::vector<Tensor>& tensors) {
  TraceArgs a;
  a.tensors = tensors;
  a.is_tensor.assign(tensors.size(), true);
  return a;
}

// The compiled functions of one composite: its forward, and the gradient of
// each set of operands that needs one (a bitmask), made on first use.
struct Composite {
  std::shared_ptr<TracedCore> forward;
  std::mutex mu;
  std::map<uint32_t, std::shared_ptr<TracedCore>> grad;

  std::shared_ptr<TracedCore> grad_of(const std::string& key, const CompositeBody& body,
                                      uint32_t mask, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<TracedCore>& g = grad[mask];
    if (!g)
      g = std::make_shared<TracedCore>(
          key + "_grad" + std::to_string(mask), SourceLoc{}, [body, mask, n](const TraceArgs& a) {
            // Operands [0, n), then the output's gradient.
            std::vector<Tensor> in(a.tensors.begin(), a.tensors.begin() + static_cast<long>(n)),
                wrt;
            EnableGradGuard grad_on;
            for (size_t i = 0; i < n; ++i)
              if (mask >> i & 1u) {
                in[i] = in[i].detach().requires_grad_();
                wrt.push_back(in[i]);
              }
            return autograd::grad({body(in)}, wrt, {a.tensors[n]});
          });
    return g;
  }
};

std::mutex g_mu;
std::atomic<uint64_t> g_calls{0};
std::unordered_map<std::string, std::shared_ptr<Composite>>& composites() {
  static std::unordered_map<std::string, std::shared_ptr<Composite>> m;
  return m;
}

std::shared_ptr<Composite> composite_of(const std::string& key, const CompositeBody& body) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::shared_ptr<Composite>& c = composites()[key];
  if (!c) {
    c = std::make_shared<Composite>();
    c->forward = std::make_shared<TracedCore>(key, SourceLoc{}, [body](const TraceArgs& a) {
      return std::vector<Tensor>{body(a.tensors)};
    });
  }
  return c;
}

uint64_t buffer_version(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  return impl.buffer ? impl.buffer->version : 0;
}

// The gradients of the operands in `mask` laid out per operand (undefined for
// the others), from `grads` (one per set bit, in order).
std::vector<Tensor> per_operand(std::vector<Tensor> grads, uint32_t mask, size_t n) {
  std::vector<Tensor> out(n);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (mask >> i & 1u) out[i] = std::move(grads[k++]);
  return out;
}

}  // namespace

bool composite_runs_compiled(const std::vector<Tensor>& operands) {
  if (t_depth > 0 || current_trace() || !jit_enabled() || !settings().eager_kernels) return false;
  for (const Tensor& t : operands)
    if (!t.device().is_cpu()) return false;
  return true;
}

Tensor compiled_composite(const std::string& op, const std::string& attrs,
                          const CompositeBody& body, const std::vector<Tensor>& operands, Loc l) {
  const std::string key = op + "_" + attrs;
  const std::shared_ptr<Composite> c = composite_of(key, body);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const size_t n = operands.size();
  uint32_t mask = 0;
  if (grad_mode_enabled())
    for (size_t i = 0; i < n; ++i)
      if (operands[i].requires_grad()) mask |= 1u << i;
  Nested nested;
  if (mask == 0) return c->forward->call(args_of(operands))[0];

  std::shared_ptr<TracedCore> grad = c->grad_of(key, body, mask, n);
  auto call = autograd::detail::new_custom_call(key);
  call->ctx.save_for_backward(operands);
  // The gradient reads the operands again: one written in place since is an
  // error, as PyTorch's, never a gradient of the new values.
  std::vector<uint64_t> versions;
  for (const Tensor& t : operands) versions.push_back(buffer_version(t));
  const SourceLoc loc = SourceLoc::from(l);
  call->backward = [body, grad, mask, n, op, versions, loc](autograd::Context* ctx,
                                                            std::vector<Tensor> g) {
    const std::vector<Tensor>& in = ctx->get_saved_variables();
    for (size_t i = 0; i < n; ++i)
      if (buffer_version(in[i]) != versions[i])
        throw Error("a tensor needed for the gradient of '" + op + "' (operand " +
                        std::to_string(i) +
                        ") was modified by an in-place operation after it was used (expected "
                        "version " +
                        std::to_string(versions[i]) + ", found version " +
                        std::to_string(buffer_version(in[i])) + ")",
                    loc);
    if (g.empty() || !g[0].defined()) return std::vector<Tensor>(n);
    Nested nested;
    if (grad_mode_enabled()) {
      // create_graph: the composite again, op by op, so the gradients have a history.
      std::vector<Tensor> wrt;
      for (size_t i = 0; i < n; ++i)
        if (mask >> i & 1u) wrt.push_back(in[i]);
      return per_operand(autograd::grad({body(in)}, wrt, {g[0]}, true, true), mask, n);
    }
    std::vector<Tensor> a = in;
    a.push_back(g[0]);
    return per_operand(grad->call(args_of(a)), mask, n);
  };
  Tensor y;
  {
    NoGradGuard no_grad;
    y = c->forward->call(args_of(operands))[0];
  }
  return autograd::detail::finish_custom(call, operands, {y}, loc)[0];
}

uint64_t compiled_composite_calls() {
  return g_calls.load(std::memory_order_relaxed);
}

size_t compiled_composites() {
  std::lock_guard<std::mutex> lock(g_mu);
  return composites().size();
}

}  // namespace kiln::detail
