// The state of one trace in progress: the graph being recorded, and the
// concrete tensors captured from outside (which become parameters, read by
// reference at every call). One trace is active per thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frontend/tensor.h"
#include "ir/builder.h"
#include "passes/saved_values.h"

namespace kiln {

namespace autograd {
struct CustomCall;
}

/// The .grad of a tensor as seen inside a trace: gradients are trace state,
/// read at the start (a captured grad is a parameter) and written back after
/// the compiled plan runs.
struct GradSlot {
  std::shared_ptr<TensorImpl> owner;    // the tensor whose .grad this is
  std::shared_ptr<TensorImpl> initial;  // the concrete grad at trace time (null if none)
  Value initial_value;                  // its parameter value, when it was read
  bool initial_zero = false;            // the initial grad is known to be zeros (read as a constant)
  bool assigned = false;                // set by the user (set_grad), not only accumulated by backward()
  Tensor current;                       // symbolic, or undefined
};

/// Plain numbers the body read as constants (an optimizer's learning rate): the
/// cached plan holds while `read()` still gives `expected`, else the call
/// retraces, as torch.compile's guards on Python numbers do.
struct ConstantGuard {
  std::weak_ptr<const void> alive;  // expires with the object whose numbers these are
  std::function<std::vector<double>()> read;
  std::vector<double> expected;
  std::string what;                // "SGD's hyperparameters"
  std::vector<std::string> names;  // one per number ("lr", "momentum", ...)
};

/// A host number the body reads through a captured tensor instead of as a
/// constant (an optimizer's learning rate): `sync()` copies the number into the
/// tensor when it changed. It runs before every call of the cached plan, so a
/// new number takes effect without a retrace.
struct HostSync {
  std::weak_ptr<const void> alive;  // expires with the object that owns number and tensor
  std::function<void()> sync;
};

struct TraceState {
  Graph graph;
  Builder builder{graph};
  /// Captured tensors, in parameter index order.
  std::vector<std::shared_ptr<TensorImpl>> params;
  std::unordered_map<const TensorImpl*, int64_t> param_index;
  /// Parameter index -> the symbolic value it currently holds (after in-place updates).
  std::unordered_map<int64_t, Value> param_current;

  /// The values recorded ops saved for their gradients (record_saved), and the
  /// writes so far into each tensor (by storage_of): a saved value written since
  /// is stale, and a view derived at an older count is derived again.
  SavedValues saved;

  /// Arguments and captured tensors given a new history by an in-place write
  /// with grad on, with the requires_grad flag eager mode would now show. After
  /// the call they take the call's history (or lose theirs), as eagerly.
  std::unordered_map<const TensorImpl*, bool> taped_writes;

  /// Symbolic argument tensors, in order (an in-place write gives one a new
  /// value; gradients are taken with respect to the value it had when called,
  /// its arg node).
  std::vector<std::shared_ptr<TensorImpl>> args;
  /// Per argument: it requires grad, as called (a gradient target: the call
  /// sends its gradient to the argument's .grad, or on through its history).
  std::vector<char> arg_leaf;
  /// Per argument: computed by ops that require grad (not a leaf: an in-place
  /// write with grad on is allowed, as eagerly).
  std::vector<char> arg_computed;
  /// Gradient state per tensor (keyed by the eager tensor, or the symbolic argument).
  std::unordered_map<const TensorImpl*, GradSlot> grads;
  /// Keeps traced custom functions alive while their backward may be traced.
  std::vector<std::shared_ptr<autograd::CustomCall>> custom_calls;
  /// Per node: a backward() without retain_graph went through it, which in
  /// eager mode frees what its op saved.
  std::vector<char> freed;
  /// Arguments whose .grad() the body read while it held only this call's
  /// gradient (eager mode would also see a gradient from before the call).
  std::vector<int64_t> arg_grads_read;
  /// Captured tensors whose .grad() the body read.
  std::unordered_set<const TensorImpl*> captured_grads_read;
  /// Numbers read as constants that a later call must still find (guard_constants).
  std::vector<ConstantGuard> constant_guards;
  /// Host numbers to copy into their tensors before each call (sync_before_call).
  std::vector<HostSync> host_syncs;

  /// The graph value for an operand: symbolic tensors of this trace as they
  /// are, concrete tensors as (new or existing) parameters.
  Value value_of(const Tensor& t, SourceLoc loc);
  /// t.to(device) inside this trace. A compiled graph runs on one device, so
  /// only a value built from creation ops alone (a literal, a constant, an
  /// arange, and what is computed from them) moves: it is built again on
  /// `device`. A value computed from the arguments or captured tensors, or a
  /// tensor with data (the call would keep the copy made while tracing), is an
  /// error naming the fix: move it before the call.
  Tensor moved_to(const Tensor& t, Device device, SourceLoc loc);
  /// The tensor whose write count stands for t's storage (saved): a symbolic
  /// view's base, else t itself (captured tensors are parameters of their own).
  static std::shared_ptr<TensorImpl> storage_of(const std::shared_ptr<TensorImpl>& t);
  /// Records what node `id` (a recorded op on `operands` giving `result`) saved.
  void record_saved(NodeId id, const std::vector<Tensor>& operands, const Tensor& result);
  /// Before an in-place write of `value` into `target`: if value's op saved
  /// target's current contents, it keeps them (keep_overwritten, eagerly).
  void keep_overwritten(const Tensor& value, const TensorImpl& target, SourceLoc loc);
  /// Whether `t` requires grad at this point of the trace (a captured tensor's
  /// flag can change by an in-place write, as eager mode's would).
  bool requires_grad(const TensorImpl& t) const;
  /// A symbolic tensor for a value of this trace.
  Tensor wrap(Value v, bool requires_grad = false);
  /// builder.op(k, operands) recorded at the user's line `loc`.
  Value op_at(SourceLoc loc, OpKind k, std::vector<Value> operands);
  /// A symbolic argument, requiring grad as the call's tensor did (`computed`:
  /// the call's tensor has a history of its own).
  Tensor add_arg(int64_t index, const TensorType& t, bool requires_grad, bool computed = false);

  /// x.grad() inside the trace (`user_read`: the body reads it, as opposed to
  /// backward() accumulating into it).
  Tensor grad_of(const Tensor& t, SourceLoc loc, bool user_read = true);
  /// x.set_grad(g) inside the trace (`assigned`: by the user, not by backward()).
  void set_grad(const Tensor& t, const Tensor& g, bool assigned = true);
  /// The position of a symbolic argument of this trace, or -1.
  int64_t arg_position(const TensorImpl* t) const;
  /// Whether `t` is a leaf that requires grad: an argument called with a leaf
  /// that requires grad, or a captured leaf that requires grad.
  bool is_grad_leaf(const TensorImpl& t) const;
  /// Gradients of `roots` (seeded with `seeds`) with respect to `wrt` (empty:
  /// every leaf that requires grad and is reachable), as graph values.
  /// With accumulate, they are added into the leaves' grad slots (and the
  /// leaves reached are added to `accumulated` when given).
  /// Without retain_graph, the nodes it goes through count as freed.
  std::vector<Tensor> backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                               const std::vector<Tensor>& wrt, bool accumulate, bool retain_graph,
                               bool create_graph, SourceLoc loc,
                               std::vector<Tensor>* accumulated = nullptr);
};

/// The trace recording on this thread, or nullptr.
TraceState* current_trace();

/// Under a trace: the traced plan holds only while `read()` gives what it gives
/// now (the numbers belong to an object kept alive by `alive`); a later call
/// that finds other numbers retraces, with `what` in the reason
/// (KILN_LOG=recompiles). Outside a trace: nothing.
void guard_constants(std::weak_ptr<const void> alive, std::function<std::vector<double>()> read,
                     std::string what, std::vector<std::string> names);

/// Under a trace: the compiled plan runs `sync()` (while `alive` lives) before
/// each call, to copy host numbers into tensors the body read. Outside: nothing.
void sync_before_call(std::weak_ptr<const void> alive, std::function<void()> sync);

/// Makes `t` the current trace for its scope (nesting restores the previous).
class TraceScope {
 public:
  explicit TraceScope(TraceState* t);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  TraceState* prev_;
};

}  // namespace kiln
