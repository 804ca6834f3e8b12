// Building a value again on another device (see rebuild_on_device.h).
#include "passes/rebuild_on_device.h"

#include <unordered_map>

namespace kiln {
namespace {

// rebuild_on_device, with the nodes built so far in `memo`.
Value rebuilt_on(Builder& b, Value v, Device device, std::unordered_map<NodeId, Value>& memo) {
  if (auto it = memo.find(v.node); it != memo.end()) return it->second;
  const Node& n = b.graph()[v.node];
  if (n.results.size() != 1) return Value();
  Value out;
  switch (op_info(n.op).category) {
    case OpCategory::Creation: {
      TensorType type = n.results[0];
      type.device = device;
      out = b.op_typed(n.op, {}, n.attrs, type);
      break;
    }
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Reduce:
    case OpCategory::Scan:
    case OpCategory::Movement: {
      std::vector<Value> operands;
      for (Value o : n.operands) {
        Value r = rebuilt_on(b, o, device, memo);
        if (!r) return Value();
        operands.push_back(r);
      }
      out = b.op(n.op, std::move(operands), n.attrs);
      break;
    }
    default:
      return Value();
  }
  memo[v.node] = out;
  return out;
}

}  // namespace

Value rebuild_on_device(Builder& b, Value v, Device device) {
  std::unordered_map<NodeId, Value> memo;
  return rebuilt_on(b, v, device, memo);
}

}  // namespace kiln
