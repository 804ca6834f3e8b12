// TensorImpl: the state behind a Tensor handle. Internal to Kiln (not part of
// <kiln/kiln.h>'s documented API), shared by the eager ops, autograd and the
// tracer.
#pragma once

#include <atomic>
#include <memory>

#include "frontend/tensor.h"
#include "ir/graph.h"
#include "runtime/storage.h"

namespace kiln {

struct TapeNode;
struct TraceState;
struct ViewLink;

/// Storage plus a version counter shared by all views of it; in-place writes
/// bump the version so autograd can detect a saved tensor that was overwritten.
struct Buffer {
  std::shared_ptr<Storage> storage;
  uint64_t version = 0;
  /// The version at which a compiled plan left the buffer all zeros (a gradient
  /// cleared by zero_() inside a traced step); any later write bumps `version`.
  uint64_t zero_version = UINT64_MAX;
};

struct TensorImpl {
  // Eager data (null buffer for symbolic tensors).
  std::shared_ptr<Buffer> buffer;
  int64_t offset = 0;  // elements
  TensorType type;     // dtype, shape, device
  Strides strides;     // symbolic tensors too: the layout eager mode would give them

  // Autograd.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<TapeNode> grad_fn;  // null for leaves and constants
  uint32_t output_nr = 0;

  // Tracing: the graph value this tensor stands for, in `trace`.
  TraceState* trace = nullptr;
  Value value;

  /// Set for a view (reshape, slice, permute, expand, detach, ...): the tensor
  /// whose storage it shares, eagerly and traced (frontend/alias.h).
  std::shared_ptr<ViewLink> alias;

  bool symbolic() const { return trace != nullptr; }
  /// The kernel's view of the data (eager only).
  View view() const {
    auto* base = static_cast<char*>(buffer->storage->data());
    return View{base + offset * static_cast<int64_t>(dtype_size(type.dtype)), type.dtype,
                type.shape, strides};
  }
};

/// A tensor's autograd state: 0 no grad, 1 a leaf that requires grad, 2 computed by ops.
inline uint8_t autograd_state(const TensorImpl& t) { return t.grad_fn ? 2 : t.requires_grad ? 1 : 0; }

/// t takes `from`'s autograd history (requires_grad, grad_fn and output_nr).
inline void take_history(TensorImpl& t, const TensorImpl& from) {
  t.requires_grad = from.requires_grad;
  t.grad_fn = from.grad_fn;
  t.output_nr = from.output_nr;
}

/// True when t is a whole dense buffer that a compiled plan left all zeros and
/// nothing has written since.
inline bool known_zero(const TensorImpl& t) {
  return t.buffer && t.buffer->zero_version == t.buffer->version && t.offset == 0 &&
         is_contiguous(t.type.shape, t.strides);
}
inline void mark_zero(TensorImpl& t) { t.buffer->zero_version = t.buffer->version; }

/// A new dense tensor of type t on its device, uninitialised.
std::shared_ptr<TensorImpl> make_dense(const TensorType& t);
/// A new tensor sharing `base`'s buffer with another geometry.
std::shared_ptr<TensorImpl> make_view(const TensorImpl& base, Shape shape, Strides strides,
                                      int64_t offset);

}  // namespace kiln
