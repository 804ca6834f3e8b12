// What the ops recorded in a trace saved for their gradients, as eager mode's
// tape saves them, and the writes into each storage since: which of those
// values a backward from some roots would read after an in-place write replaced
// them (eager mode's "modified by an in-place operation"), or while they still
// hold their storage's contents. The tracer (frontend/trace_state.h) records
// into it; a storage is one of its tensors, opaque here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln {

class SavedValues {
 public:
  /// A tensor's storage (kept alive while a saved value refers to it).
  using Storage = std::shared_ptr<const void>;

  /// A value node `node` saved: its operand `which`, or its result -1 - which
  /// (grad_analysis.h's SavedValue numbering), in `storage` after `writes` writes.
  struct Ref {
    Storage storage;
    uint64_t writes = 0;
    int64_t which = 0;
    /// A write replaced it (operand 0, `self`) with this op's own result
    /// (x.mul_(y) reads x for y's gradient): eager mode keeps a copy of the old
    /// value for this op (PyTorch's original self), so it never goes stale.
    bool kept = false;
  };

  /// The first saved value a backward reads that a write replaced since.
  struct Stale {
    NodeId node = kNoNode;
    uint64_t expected = 0, found = 0;  // writes into its storage then and now
  };

  /// Writes so far into the storage `s`.
  uint64_t writes(const void* s) const;
  /// An in-place write into `s`.
  void wrote(const void* s) { ++writes_[s]; }
  /// Node `id` saved its operands (in `operands`' storages, in order) and its
  /// result, each as its storage holds it now; `needs`: which operands need a gradient.
  void record(NodeId id, const std::vector<Storage>& operands, Storage result,
              std::vector<bool> needs);
  /// Before an in-place write into `s` of node `id`'s result: if `id` saved
  /// `s`'s current contents as its operand 0, it keeps them (Ref::kept).
  void keep_overwritten(NodeId id, const void* s);
  /// The saved values a backward from `roots` reads (saved_values_read,
  /// grad_analysis.h) that still hold their storage's current contents, or with
  /// `stale`, those a write replaced; with the node that saved each.
  std::vector<std::pair<NodeId, const Ref*>> reads(const Graph& g, std::span<const Value> roots,
                                                   bool stale = false) const;
  /// The first (in node order) stale value a backward from `roots` reads, or none.
  Stale first_stale(const Graph& g, std::span<const Value> roots) const;

 private:
  struct Op {
    std::vector<Ref> refs;
    std::vector<bool> needs;
  };
  std::unordered_map<const void*, uint64_t> writes_;
  std::vector<Op> ops_;  // per node
};

}  // namespace kiln
