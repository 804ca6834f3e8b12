// The SSA graph: nodes in an arena, in topological order (an operand is always
// defined by an earlier node). A Graph is a value type: passes take a const
// Graph& and return a new one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/error.h"
#include "ir/op.h"

namespace kiln {

using NodeId = uint32_t;
inline constexpr NodeId kNoNode = UINT32_MAX;

/// One result of one node.
struct Value {
  NodeId node = kNoNode;
  uint32_t index = 0;

  Value() = default;
  Value(NodeId node, uint32_t index = 0) : node(node), index(index) {}
  bool valid() const { return node != kNoNode; }
  explicit operator bool() const { return valid(); }
  friend bool operator==(const Value&, const Value&) = default;
};

struct ValueHash {
  size_t operator()(const Value& v) const { return (size_t(v.node) << 8) ^ v.index; }
};

/// One operation: op kind, operands, attributes, typed results, and the user
/// source line that recorded it.
struct Node {
  OpKind op{};
  std::vector<Value> operands;
  Attrs attrs;
  std::vector<TensorType> results;
  SourceLoc loc;

  const TensorType& type(uint32_t i = 0) const { return results.at(i); }
};

/// An in-place update of a parameter, done after the graph's outputs are computed
/// (an optimizer step inside a trace).
struct ParamUpdate {
  int64_t param;  // the param node's index attribute
  Value value;
  friend bool operator==(const ParamUpdate&, const ParamUpdate&) = default;
};

class Graph {
 public:
  /// Appends a node as given (no checks, no hash-consing: use Builder for that).
  NodeId add(Node n);
  const Node& node(NodeId id) const { return nodes_.at(id); }
  Node& node(NodeId id) { return nodes_.at(id); }
  const Node& operator[](NodeId id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const TensorType& type(Value v) const { return nodes_.at(v.node).results.at(v.index); }

  /// Values the graph returns, in order.
  std::vector<Value> outputs;
  /// Parameter updates performed after the outputs are computed.
  std::vector<ParamUpdate> updates;

  /// Ids of `arg` nodes ordered by their index attribute.
  std::vector<NodeId> args() const;
  /// Ids of `param` nodes ordered by their index attribute.
  std::vector<NodeId> params() const;
  /// The first `param` node of index `index` (the value a traced body first read
  /// of that parameter, before any update), or an invalid Value when there is none.
  Value param_value(int64_t index) const;
  /// Whether v is zero everywhere by construction: a constant 0, possibly expanded
  /// or reshaped.
  bool is_zero_constant(Value v) const;

  /// Number of uses of each node (operands, outputs and updates).
  std::vector<uint32_t> use_counts() const;

  /// Canonical IR text (see ir/printer.h).
  std::string str(bool with_locations = false) const;

 private:
  std::vector<Node> nodes_;
};

std::ostream& operator<<(std::ostream& os, const Graph& g);

/// Rewrites a graph node by node into a fresh graph. `map` returns the new value for an
/// old one; a typical pass copies nodes through a Builder with remapped operands.
class ValueMap {
 public:
  explicit ValueMap(const Graph& g) : map_(g.size()) {}
  void set(Value old_v, Value new_v);
  Value operator()(Value old_v) const;
  bool has(Value old_v) const;

 private:
  std::vector<std::vector<Value>> map_;
};

}  // namespace kiln
