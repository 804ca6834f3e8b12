// Composite ops expanded into a graph (see decompose.h).
#include "ir/decompose.h"

#include <string>

#include "ir/builder.h"
#include "ir/error.h"

namespace kiln {

namespace {

// Ops and numbers through a Builder, at its current source location.
class GraphExpander final : public Expander<Value> {
 public:
  explicit GraphExpander(Builder& b) : b_(b) {}
  Value op(OpKind k, std::vector<Value> operands) override { return b_.op(k, std::move(operands)); }
  Value number(const Value& like, double c) override {
    const TensorType& t = b_.type(like);
    return b_.constant(c, promote_with_scalar(t.dtype, ScalarKind::floating), {}, t.device);
  }

 private:
  Builder& b_;
};

}  // namespace

namespace detail {
void throw_not_composite(OpKind k) {
  throw Error(std::string(op_name(k)) + " is not a composite op (ops.def's decomp)");
}
}  // namespace detail

Value expand_composite(Builder& b, OpKind k, const std::vector<Value>& operands) {
  GraphExpander e(b);
  return expand_composite<Value>(k, e, operands);
}

TensorType composite_type(OpKind k, std::span<const TensorType> operands) {
  Graph g;
  Builder b(g);
  std::vector<Value> args;
  for (size_t i = 0; i < operands.size(); ++i) args.push_back(b.arg(int64_t(i), operands[i]));
  return g.type(expand_composite(b, k, args));
}

}  // namespace kiln
