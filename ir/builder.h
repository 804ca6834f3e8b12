// Builder: the one way passes and the tracer create nodes. It infers result
// types from the op table, attaches source locations, and hash-conses pure
// nodes, so building the same expression twice yields the same value (CSE
// nearly for free).
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

class Builder {
 public:
  /// Builds into g, indexing g's existing nodes for hash-consing.
  explicit Builder(Graph& g);

  Graph& graph() { return g_; }
  const TensorType& type(Value v) const { return g_.type(v); }

  /// Location attached to nodes built without an explicit one.
  SourceLoc loc;
  /// Hash-cons the nodes built now (the default). The tracer turns it off for
  /// the user's ops: each recorded op is its own node, as each eager op is its
  /// own tape node, so what it saved for its gradient is its own; the cse pass
  /// merges equal nodes afterwards.
  bool hash_cons = true;

  /// Adds (or finds) a node. Result type from the op table, or `given` for
  /// Input/Creation/Custom ops. Type errors throw kiln::Error with `loc` attached.
  Value op(OpKind k, std::vector<Value> operands, Attrs attrs = {});
  Value op_typed(OpKind k, std::vector<Value> operands, Attrs attrs, TensorType given);
  /// Multi-result node (custom calls).
  NodeId op_multi(OpKind k, std::vector<Value> operands, Attrs attrs, std::vector<TensorType> results);

  // Inputs.
  Value arg(int64_t index, TensorType t);
  Value param(int64_t index, TensorType t, std::string name = {});

  // Creation.
  Value constant(double v, DType dt, Shape shape = {}, Device dev = {});
  /// A scalar constant of v's dtype and device (for x * 2 and the like).
  Value scalar_like(Value v, double c);
  Value zeros_like(Value v);
  Value ones_like(Value v);

  // Elementwise.
  Value unary(OpKind k, Value x) { return op(k, {x}); }
  Value binary(OpKind k, Value a, Value b) { return op(k, {a, b}); }
  Value add(Value a, Value b) { return op(OpKind::add, {a, b}); }
  Value sub(Value a, Value b) { return op(OpKind::sub, {a, b}); }
  Value mul(Value a, Value b) { return op(OpKind::mul, {a, b}); }
  Value div(Value a, Value b) { return op(OpKind::div, {a, b}); }
  Value neg(Value a) { return op(OpKind::neg, {a}); }
  Value cast(Value a, DType t);
  Value where(Value c, Value a, Value b) { return op(OpKind::where, {c, a, b}); }

  // Reductions and movement.
  Value sum(Value x, std::vector<int64_t> dims, bool keepdim);
  Value reshape(Value x, Shape s);
  Value expand(Value x, Shape s);
  Value permute(Value x, std::vector<int64_t> perm);
  /// Swaps the last two dims.
  Value transpose_last(Value x);
  /// Sums a broadcast gradient back down to `shape` (reverse of broadcasting).
  Value sum_to(Value x, const Shape& shape);
  Value matmul(Value a, Value b) { return op(OpKind::matmul, {a, b}); }

 private:
  struct Key {
    OpKind op;
    std::vector<Value> operands;
    Attrs attrs;
    std::vector<TensorType> results;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  NodeId add_node(OpKind k, std::vector<Value> operands, Attrs attrs, std::vector<TensorType> results);

  Graph& g_;
  std::unordered_map<Key, NodeId, KeyHash> index_;
};

/// Sets a builder's location for the nodes built in its scope; restores the
/// previous one after, also when building throws.
class LocScope {
 public:
  LocScope(Builder& b, SourceLoc loc) : b_(b), saved_(b.loc) { b.loc = loc; }
  ~LocScope() { b_.loc = saved_; }
  LocScope(const LocScope&) = delete;
  LocScope& operator=(const LocScope&) = delete;

 private:
  Builder& b_;
  SourceLoc saved_;
};

}  // namespace kiln
