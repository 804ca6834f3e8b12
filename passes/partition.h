// The forward/backward partition of a traced call: the pipeline's first stage
// (passes/pipeline.h), run as the call is traced. A call whose outputs require
// grad becomes two graphs, as JAX splits a VJP: the forward, which returns the
// call's outputs and then the values its backward reads, and the backward,
// from those values and the outputs' gradients to the gradients of the
// arguments and captured tensors they reach. Either way traced custom-function
// nodes give way to their forward's results (strip_traced_custom).
#pragma once

#include <string>
#include <vector>

#include "ir/builder.h"
#include "passes/autodiff.h"
#include "passes/saved_values.h"

namespace kiln {

/// What the partition needs to know of a traced call besides its graph.
struct PartitionRequest {
  /// Split off a backward (the call's outputs require grad, or it gives tensors
  /// a new history); without, the graph stays one plan.
  bool split = false;
  /// The values a backward through the call differentiates, and per root the
  /// call output it is (numbering its seed argument).
  std::vector<Value> roots;
  std::vector<size_t> root_outputs;
  /// Per argument and per parameter index: it is a leaf that requires grad.
  std::vector<char> arg_requires, param_requires;
  /// Per node: a backward() inside the traced body freed what its op saved.
  std::vector<char> freed;
  /// The call's argument count (the backward's own args are numbered from it),
  /// and the arguments it writes in place (their values read are saved).
  int64_t n_args = 0;
  std::vector<int64_t> written_args;
  /// The gradients of custom nodes (autograd::Function calls).
  CustomVjp custom;
  /// What the traced ops saved and the writes into their storages since (the
  /// tracer's record), and the storages the caller holds after the call (its
  /// arguments, captured tensors, outputs): SplitLayout's stale_roots and
  /// held_reads. None: neither is looked for.
  const SavedValues* saved = nullptr;
  std::vector<const void*> held;
};

/// A root's first node whose saved values a backward would read (grad_analysis.h's
/// freed_read): its op and source line, for the error a backward through it raises.
struct RootRead {
  size_t root = 0;  // index into PartitionRequest::roots
  NodeId node = kNoNode;
  OpKind op{};
  SourceLoc loc;
};

/// A root's first saved value that an in-place write inside the body replaced
/// (SavedValues::first_stale): a backward through it raises, as eagerly
/// ("modified by an in-place operation"). `node` saved it.
struct StaleRead : RootRead {
  uint64_t expected = 0, found = 0;  // writes into its storage then and now
};

/// A value a root's backward reads that lives on after the call, still current,
/// in storage PartitionRequest::held[held]: a backward through the root raises
/// if that storage was written since the call, as eagerly.
struct HeldRead : RootRead {
  size_t held = 0;
};

/// What the split made of a call besides its two graphs: what a caller that
/// runs them keeps.
struct SplitLayout {
  bool split = false;
  /// Every root's gradient reads what a backward() inside the body freed (a
  /// training step that returns its loss): a backward through the call can only
  /// fail, so none is built and nothing is saved.
  bool backward_freed = false;
  size_t saved_begin = 0, saved = 0;  // forward outputs [saved_begin, +saved) are saved values
  /// The arguments (by index) and parameters (by index) a gradient reaches and
  /// that require grad: the backward's outputs, in this order.
  std::vector<int64_t> wrt_args, wrt_params;
  /// The backward's output types, one per wrt tensor (also when backward_freed).
  std::vector<TensorType> gradient_types;
  /// Per wrt tensor: the roots whose gradient reaches it.
  std::vector<std::vector<size_t>> wrt_reached_by;
  /// Per root whose backward reads values a backward() inside the body freed
  /// (freed_roots), or would read values a later backward frees (reading_roots).
  std::vector<RootRead> freed_roots, reading_roots;
  std::vector<StaleRead> stale_roots;  // per root, the first (PartitionRequest::saved)
  std::vector<HeldRead> held_reads;    // in root order
  /// Per root, its type: that of its seed, the backward's gradient of it.
  std::vector<TensorType> root_types;
  /// Per root, the call output it is (PartitionRequest::root_outputs).
  std::vector<size_t> root_outputs;
};

struct Partition : SplitLayout {
  /// Returns the traced graph's outputs, then the `saved` values the backward reads.
  Graph forward;
  /// Args: the call's arguments, then the saved values, then one seed per root;
  /// outputs: one gradient per wrt tensor (wrt_args, then wrt_params). Empty
  /// without a split or when backward_freed.
  Graph backward;
};

/// Partitions the graph `traced` builds into (the graph as traced, its outputs
/// set). With a split, the gradient nodes are built through `traced`, so they
/// hash-cons with the nodes the trace built as it would have; the graph is left
/// with them appended. Without, `forward` is the graph (custom nodes stripped).
Partition partition(Builder& traced, const PartitionRequest& req);

/// The stage's text: the forward graph, then the backward as comment lines
/// ("// backward: ..."), so that the text parses as the forward.
std::string partition_str(const Partition& p);

}  // namespace kiln
