// Runs a Graph node by node with the reference kernels on the CPU. This is
// the oracle for compiled plans, the evaluator of constant folding, and the
// reference for finite-difference gradient checks.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/storage.h"

namespace kiln {

/// A dense CPU array owned by the interpreter's caller.
struct HostArray {
  std::shared_ptr<Storage> storage;
  TensorType type;
  View view() const { return dense_view(storage ? storage->data() : nullptr, type.dtype, type.shape); }
  static HostArray make(const TensorType& t);
  template <class T>
  T* data() const { return static_cast<T*>(storage->data()); }
};

struct InterpretOptions {
  /// Called for `custom` nodes (the frontend runs the user's function).
  std::function<std::vector<HostArray>(const Node&, std::span<const HostArray>)> custom;
};

/// Evaluates g's outputs. `args` and `params` are indexed by the nodes' index
/// attributes. Parameter updates are written into `params` (replacing entries).
std::vector<HostArray> interpret(const Graph& g, std::span<const HostArray> args,
                                 std::vector<HostArray>& params, const InterpretOptions& opts = {});
std::vector<HostArray> interpret(const Graph& g, std::span<const HostArray> args);

}  // namespace kiln
