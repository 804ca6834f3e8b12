// Autograd: the tape that eager ops record when an input requires grad, grad
// mode, NoGradGuard, and backward(). There is one autodiff (DESIGN.md): a
// backward turns the tape into an IR graph, runs passes/autodiff on it, and
// evaluates the gradient graph op by op with the eager kernels.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attrs.h"
#include "ir/op.h"
#include "passes/autodiff.h"

namespace kiln {

struct TensorImpl;
struct TapeNode;
namespace autograd {
struct CustomCall;
}

/// Where a taped op's operand came from.
struct TapeEdge {
  std::shared_ptr<TapeNode> fn;      // the op that produced it (non-leaf)
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;  // a leaf that requires grad
};

/// Data an op saved for its backward, with the version it had then. As in
/// PyTorch, only what a gradient actually reads must still be intact: backward
/// checks the version (and that a first backward did not free it) on use.
struct SavedTensor {
  std::shared_ptr<TensorImpl> data;  // detached alias of the tensor (no grad_fn); null once freed
  uint64_t version = 0;
  TensorType type;                   // kept when the data is freed
  /// For a copy kept before an in-place write (keep_overwritten): the version
  /// the overwritten tensor had, i.e. which saved uses this copy stands for.
  uint64_t kept_from = UINT64_MAX;
};

/// One recorded op.
struct TapeNode {
  OpKind op{};
  Attrs attrs;
  SourceLoc loc;
  std::vector<TapeEdge> next;             // one per operand
  std::vector<SavedTensor> inputs;        // operand values
  std::vector<SavedTensor> outputs;       // result values
  std::shared_ptr<autograd::CustomCall> custom;  // for `custom` nodes
  /// When it was recorded (a process-wide count): backward rebuilds the graph
  /// in this order, the order a trace records the same ops in, so gradient
  /// contributions add up in the same order eagerly and traced.
  uint64_t seq = 0;
};

/// Whether ops record the tape (thread-local; on by default).
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

/// Disables gradient recording in its scope (torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(false); }
  ~NoGradGuard() { set_grad_mode(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Enables gradient recording in its scope (torch::AutoGradMode(true)).
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(true); }
  ~EnableGradGuard() { set_grad_mode(prev_); }

 private:
  bool prev_;
};

namespace autograd {
/// Gradients of `outputs` with respect to `inputs` without accumulating into
/// .grad() (torch::autograd::grad). Undefined tensors for unreachable inputs
/// when allow_unused, else an error.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false, KILN_LOC);
/// Called after a backward() that accumulates into .grad, with its line and
/// the leaves whose .grad it accumulated into (those it reached).
using PostBackwardHook = std::function<void(SourceLoc, const std::vector<Tensor>& accumulated)>;
/// Calls `fn` after every backward() that accumulates into .grad (eagerly, or
/// recorded inside a trace), on the thread that ran it; returns an id for
/// remove_post_backward_hook. DistributedDataParallel averages gradients here.
int add_post_backward_hook(PostBackwardHook fn);
void remove_post_backward_hook(int id);
}  // namespace autograd

namespace detail {
/// Records an eager op on the tape if grad mode is on and an operand requires grad.
void record_op(OpKind op, const Attrs& attrs, SourceLoc loc, const std::vector<Tensor>& inputs,
               const std::vector<Tensor>& outputs,
               std::shared_ptr<autograd::CustomCall> custom = nullptr);
/// Before an in-place write into `target` of `value`: if the op that computed
/// `value` saved `target`'s old contents for its gradient, it keeps a copy.
void keep_overwritten(const TensorImpl& value, const TensorImpl& target);
/// The gradients of custom nodes (autograd::Function calls) for build_gradients:
/// the user's backward, run eagerly or, inside a trace, on symbolic gradients.
const CustomVjp& custom_function_vjp();
/// Every backward in its scope keeps the graph (as with retain_graph), on this
/// thread: KILN_CHECK's eager run must not free what the compiled run then needs.
class RetainGraphsGuard {
 public:
  RetainGraphsGuard();
  ~RetainGraphsGuard();
  RetainGraphsGuard(const RetainGraphsGuard&) = delete;
  RetainGraphsGuard& operator=(const RetainGraphsGuard&) = delete;

 private:
  bool prev_;
};
/// The leaves that require grad which the tape reaches from `roots` (each once).
std::vector<std::shared_ptr<TensorImpl>> history_leaves(std::vector<const TapeNode*> roots);
/// The error of a backward that reaches values an earlier backward freed.
Error freed_graph_error(OpKind op, SourceLoc loc);
/// The error of a backward whose gradient of `op` reads a value an in-place
/// write replaced since (its version `expected` then, `found` now).
Error modified_saved_error(OpKind op, uint64_t expected, uint64_t found, SourceLoc loc);
}  // namespace detail

}  // namespace kiln
