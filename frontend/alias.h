// Views and in-place writes through them, the same eagerly and traced.
//
// A view (reshape, slice, select, narrow, permute, expand, detach) shares the
// storage of the tensor it was made from, as in PyTorch: a write into a view
// changes its base, a write into the base shows in every view of it, and
// gradients follow the data. Eager mode shares the buffer; it re-derives the
// autograd history of a view whose base was written since (PyTorch's view
// regeneration) and, for a write into a view, gives the base the history of a
// scatter of the written value into it (PyTorch's CopySlices).
//
// A trace has no buffers. It records a write into a view as a new value of the
// base: the written value put back through the inverse of each view op (for a
// slice, where(mask, pad(value), base), like JAX's x.at[...].set), and it
// re-derives every view from its base when the base was written after the
// view's value was last derived (PyTorch's functionalization).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attrs.h"
#include "ir/op.h"

namespace kiln {

struct TensorImpl;

/// One view op on the way from a base to a view of it.
struct ViewStep {
  OpKind op{};
  Attrs attrs;
};

/// A view's relation to the tensor whose storage it shares.
struct ViewLink {
  std::shared_ptr<TensorImpl> base;  // owns the storage; never itself a view
  std::vector<ViewStep> chain;       // the view ops from base to this view
  /// The view's history follows the base's: made with grad mode on and no
  /// detach() on the way. Otherwise (a non-differentiable view) it shares only
  /// the data, and keeps a history of its own.
  bool differentiable = true;
  /// The base's write count when this view was last derived from it (eager:
  /// the buffer's version; traced: TraceState::writes).
  uint64_t synced = 0;
  /// The base's geometry that `chain` starts from. An in-place view change of
  /// the base itself (x.t_(), x.unsqueeze_(d), ...) gives the base another
  /// one; the chain no longer applies, and deriving the view again from the
  /// base is refused (check_base_geometry) rather than done wrongly.
  Shape base_shape;
  Strides base_strides;
  int64_t base_offset = 0;
};

namespace detail {

/// Records that `view`, the result of view op `k` on `in`, shares in's storage.
void link_view(const Tensor& in, OpKind k, const Attrs& attrs, const Tensor& view);
/// Brings a view up to date with writes into its base since it was derived:
/// traced, its value (and flag); eagerly, its autograd history.
void sync_view(TensorImpl& t);
/// The number of writes into `base` so far (the eager buffer's version, or the
/// trace's count).
uint64_t base_writes(const TensorImpl& base);
/// Refuses a write into a tensor whose elements share memory (an expand()).
void check_writable(const TensorImpl& t, SourceLoc loc);
/// Writes `value` (already t's shape and dtype) into the view `t`, and so into
/// its base, where a plain write into t would not do: traced, and eagerly when
/// the base's history changes (`taping` and a differentiable view). `taping`:
/// the write is recorded for autograd (grad mode on and a tensor involved
/// requires grad).
void write_view(const Tensor& t, const Tensor& value, bool taping, SourceLoc loc);

}  // namespace detail
}  // namespace kiln
