// The op table, generated from ops.def, and TensorType's text.
#include "ir/op.h"

#include "ir/error.h"

namespace kiln {

namespace {

#define KILN_COST_cheap false
#define KILN_COST_costly true
constexpr OpInfo kOps[] = {
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, domain) \
  {#name,                                                                               \
   arity,                                                                               \
   OpCategory::category,                                                                \
   std::string_view(#vjp) != "none",                                                    \
   KILN_COST_##cost,                                                                    \
   KILN_SCALAR_RULE(scalar),                                                            \
   KILN_SCALAR_REDUCE(scalar),                                                          \
   KILN_DOMAIN(domain)},
#include "ir/ops.def"
#undef KILN_OP
};
#undef KILN_COST_cheap
#undef KILN_COST_costly
static_assert(std::size(kOps) == kNumOps);

}  // namespace

const OpInfo& op_info(OpKind k) {
  return kOps[static_cast<int>(k)];
}

bool parse_op_name(std::string_view s, OpKind* out) {
  for (int i = 0; i < kNumOps; ++i) {
    if (s == kOps[i].name) {
      *out = static_cast<OpKind>(i);
      return true;
    }
  }
  return false;
}

const char* category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Input:
      return "Input";
    case OpCategory::Creation:
      return "Creation";
    case OpCategory::Unary:
      return "Unary";
    case OpCategory::Binary:
      return "Binary";
    case OpCategory::Ternary:
      return "Ternary";
    case OpCategory::Reduce:
      return "Reduce";
    case OpCategory::Scan:
      return "Scan";
    case OpCategory::Movement:
      return "Movement";
    case OpCategory::Matmul:
      return "Matmul";
    case OpCategory::Gather:
      return "Gather";
    case OpCategory::Scatter:
      return "Scatter";
    case OpCategory::Sort:
      return "Sort";
    case OpCategory::Check:
      return "Check";
    case OpCategory::Collective:
      return "Collective";
    case OpCategory::Custom:
      return "Custom";
  }
  return "?";
}

bool is_elementwise(OpKind k) {
  OpCategory c = op_info(k).category;
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
}

bool has_identity(OpKind k) {
  switch (k) {
    case OpKind::arg:
    case OpKind::param:
    case OpKind::custom:
      return true;
    default:
      return false;
  }
}

const std::vector<OpKind>& all_ops() {
  static const std::vector<OpKind> ops = [] {
    std::vector<OpKind> v;
    for (int i = 0; i < kNumOps; ++i) v.push_back(static_cast<OpKind>(i));
    return v;
  }();
  return ops;
}

std::string TensorType::str() const {
  std::string prefix;
  if (device.is_cuda())
    prefix = device.index == 0 ? "cuda:" : "cuda:" + std::to_string(device.index) + ":";
  return prefix + dtype_name(dtype) + shape_str(shape);
}

const char* reduce_op_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

bool parse_reduce_op(std::string_view s, ReduceOp* out) {
  for (ReduceOp r : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min})
    if (s == reduce_op_name(r)) {
      *out = r;
      return true;
    }
  return false;
}

}  // namespace kiln
