// Constant folding. Nodes are copied in order; a pure node whose operands (in
// the new graph) are all `constant` or `literal` nodes is evaluated with the
// reference kernels and replaced by a creation node carrying the result, with
// the original node's location. Operands that become unused are left for dce.
#include "passes/constant_fold.h"

#include <cstring>
#include <optional>

#include "passes/graph_copy.h"
#include "runtime/interpreter.h"
#include "runtime/reference.h"

namespace kiln {

namespace {

// Larger operands or results are not evaluated at compile time (the fold would
// cost more than running the op), except uniform results computed from scalars.
constexpr int64_t kMaxEvalElements = int64_t{1} << 22;
// Doubles hold every integer up to 2^53 exactly; larger int64 values keep an integer attribute.
constexpr double kMaxExactInt = 9007199254740992.0;

bool is_constant_data(const Node& n) {
  return n.op == OpKind::constant || n.op == OpKind::literal;
}

bool foldable(const Node& n) {
  OpCategory c = op_info(n.op).category;
  // Checks are not folded: a bad constant index is reported when the plan runs,
  // with the user's line, like any other. Collectives communicate at run time.
  return c != OpCategory::Input && c != OpCategory::Creation && c != OpCategory::Custom &&
         c != OpCategory::Check && c != OpCategory::Collective && !n.operands.empty();
}

// A reduction that folds with an idempotent combine op (maximum, minimum:
// combine(x, x) = x), so its result over a non-empty uniform range is that value.
bool idempotent_reduction(OpKind k) {
  const OpInfo& info = op_info(k);
  return info.scalar == ScalarRule::reduce &&
         (info.combine == OpKind::maximum || info.combine == OpKind::minimum);
}

// Ops that map uniform operands to a uniform result, so they can be evaluated on
// one element: elementwise ops, data movement that adds no new values (not pad),
// and idempotent reductions (max, min) over a non-empty range.
bool uniform_preserving(OpKind k) {
  OpCategory c = op_info(k).category;
  return is_elementwise(k) || (c == OpCategory::Movement && k != OpKind::pad) ||
         idempotent_reduction(k);
}

// A view of a creation node's value. A `constant` is one element broadcast with
// zero strides, so even a large one costs nothing to read.
View creation_view(const Node& n, std::vector<HostArray>& keep, bool as_scalar) {
  const TensorType& t = n.type();
  if (n.op == OpKind::constant) {
    HostArray one = HostArray::make(TensorType{t.dtype, {}, {}});
    reference_kernel(OpKind::constant, n.attrs, {}, one.view());
    keep.push_back(one);
    Shape shape = as_scalar ? Shape{} : t.shape;
    return View{one.storage->data(), t.dtype, shape, Strides(shape.size(), 0)};
  }
  HostArray a = HostArray::make(TensorType{t.dtype, t.shape, {}});
  reference_kernel(OpKind::literal, n.attrs, {}, a.view());
  keep.push_back(a);
  return a.view();
}

// Element i of a dense array as an attribute value (integers stay exact).
AttrValue element(const HostArray& a, int64_t i) {
  return visit_dtype(a.type.dtype, [&](auto zero) -> AttrValue {
    using T = decltype(zero);
    T v = a.data<T>()[i];
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<double>(v);
    else
      return static_cast<int64_t>(v);
  });
}

bool all_equal(const HostArray& a) {
  size_t size = dtype_size(a.type.dtype);
  const char* p = static_cast<const char*>(a.storage->data());
  for (int64_t i = 1; i < a.type.numel(); ++i)
    if (std::memcmp(p, p + i * size, size) != 0) return false;
  return true;
}

// The `constant` value attribute as Builder::constant writes it (a double), so
// folded constants hash-cons with built ones; huge integers stay integers.
AttrValue constant_value(AttrValue v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) {
    double d = static_cast<double>(*i);
    if (d >= -kMaxExactInt && d <= kMaxExactInt) return d;
  }
  return v;
}

// The creation node that replaces `n`, given its value: `values` is either the
// whole result or (when `uniform`) one element of it.
std::optional<Node> creation_node(const Node& n, const HostArray& values, bool uniform) {
  Node c;
  c.results = n.results;
  c.loc = n.loc;
  int64_t count = n.type().numel();
  if (count == 0 || uniform || all_equal(values)) {
    c.op = OpKind::constant;
    c.attrs.set(AttrKey::value, count == 0 ? AttrValue(0.0) : constant_value(element(values, 0)));
    return c;
  }
  if (count > kMaxFoldElements) return std::nullopt;
  c.op = OpKind::literal;
  if (is_floating(n.type().dtype)) {
    std::vector<double> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = std::get<double>(element(values, i));
    c.attrs.set(AttrKey::data, std::move(data));
  } else {
    std::vector<int64_t> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = std::get<int64_t>(element(values, i));
    c.attrs.set(AttrKey::data, std::move(data));
  }
  return c;
}

// Evaluates `n` (from the source graph) on its operands, which are creation
// nodes of `out`. Returns the replacement node, or nothing when the fold is not
// worth it (a large non-uniform result).
std::optional<Node> fold(const Node& n, const std::vector<const Node*>& operands) {
  const TensorType& t = n.type();
  if (t.numel() == 0) return creation_node(n, HostArray{}, true);
  bool uniform = uniform_preserving(n.op);
  for (const Node* o : operands) uniform = uniform && o->op == OpKind::constant;
  if (idempotent_reduction(n.op) && operands[0]->type().numel() == 0) uniform = false;

  std::vector<HostArray> keep;
  std::vector<View> inputs;
  if (!uniform) {
    if (t.numel() > kMaxEvalElements) return std::nullopt;
    for (const Node* o : operands)
      if (o->type().numel() > kMaxEvalElements) return std::nullopt;
  }
  for (const Node* o : operands) inputs.push_back(creation_view(*o, keep, uniform));

  HostArray result = HostArray::make(TensorType{t.dtype, uniform ? Shape{} : t.shape, {}});
  if (uniform && op_info(n.op).category != OpCategory::Unary &&
      op_info(n.op).category != OpCategory::Binary &&
      op_info(n.op).category != OpCategory::Ternary) {
    // Movement, max and min of a uniform value: the value itself.
    copy_to(inputs[0], result.view());
  } else {
    reference_kernel(n.op, n.attrs, inputs, result.view());
  }
  return creation_node(n, result, uniform);
}

}  // namespace

Graph fold_constants(const Graph& g) {
  Graph out;
  ValueMap map(g);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    if (foldable(n) && n.results.size() == 1) {
      std::vector<const Node*> operands;
      for (Value v : n.operands) {
        const Node& o = out[map(v).node];
        if (!is_constant_data(o)) break;
        operands.push_back(&o);
      }
      if (operands.size() == n.operands.size()) {
        try {
          if (std::optional<Node> c = fold(n, operands)) {
            map.set(Value(id), Value(out.add(std::move(*c))));
            continue;
          }
        } catch (Error& e) {
          e.attach(n.loc, op_name(n.op));
          throw;
        }
      }
    }
    copy_node(g, id, out, map);
  }
  copy_outputs(g, out, map);
  return out;
}

}  // namespace kiln
