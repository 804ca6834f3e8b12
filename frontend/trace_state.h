// The state of one trace in progress: the graph being recorded, and the
// concrete tensors captured from outside (which become parameters, read by
// reference at every call). One trace is active per thread at a time.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "frontend/tensor.h"
#include "ir/builder.h"

namespace kiln {

struct TensorImpl;

struct TraceState {
  Graph graph;
  Builder builder{graph};
  /// Captured tensors, in parameter index order.
  std::vector<std::shared_ptr<TensorImpl>> params;
  std::unordered_map<const TensorImpl*, int64_t> param_index;
  /// Parameter index -> the symbolic value it currently holds (after in-place updates).
  std::unordered_map<int64_t, Value> param_current;

  /// The graph value for an operand: symbolic tensors of this trace as they
  /// are, concrete tensors as (new or existing) parameters.
  Value value_of(const Tensor& t, SourceLoc loc);
  /// A symbolic tensor for a value of this trace.
  Tensor wrap(Value v);
};

/// The trace recording on this thread, or nullptr.
TraceState* current_trace();

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
