// Builder: typed, located, hash-consed node creation, and the small helpers
// passes and the tracer use (constants, casts, reshapes, sum_to).
#include "ir/builder.h"

#include "ir/decompose.h"

#include <algorithm>
#include <numeric>

namespace kiln {

namespace {
size_t mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

bool type_given(OpKind k) {
  OpCategory c = op_info(k).category;
  return c == OpCategory::Input || c == OpCategory::Creation || c == OpCategory::Custom;
}
}  // namespace

size_t Builder::KeyHash::operator()(const Key& k) const {
  size_t h = static_cast<size_t>(k.op);
  for (Value v : k.operands) h = mix(h, ValueHash()(v));
  h = mix(h, k.attrs.hash());
  for (const TensorType& t : k.results) {
    h = mix(h, static_cast<size_t>(t.dtype));
    h = mix(h, (static_cast<size_t>(t.device.type) << 8) | static_cast<uint8_t>(t.device.index));
    for (int64_t d : t.shape) h = mix(h, static_cast<size_t>(d));
  }
  return h;
}

Builder::Builder(Graph& g) : g_(g) {
  for (NodeId id = 0; id < g_.size(); ++id) {
    const Node& n = g_[id];
    if (!has_identity(n.op)) index_.emplace(Key{n.op, n.operands, n.attrs, n.results}, id);
  }
}

NodeId Builder::add_node(OpKind k, std::vector<Value> operands, Attrs attrs,
                         std::vector<TensorType> results) {
  Key key{k, std::move(operands), std::move(attrs), std::move(results)};
  const bool shared = !has_identity(k) && hash_cons;
  if (shared) {
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
  }
  Node n;
  n.op = k;
  n.operands = key.operands;
  n.attrs = key.attrs;
  n.results = key.results;
  n.loc = loc;
  NodeId id = g_.add(std::move(n));
  if (shared) index_.emplace(std::move(key), id);
  return id;
}

Value Builder::op(OpKind k, std::vector<Value> operands, Attrs attrs) {
  std::vector<TensorType> types;
  types.reserve(operands.size());
  try {
    KILN_CHECK(!type_given(k), "internal error: the result type of ",
               category_name(op_info(k).category), " ops must be given (use Builder::op_typed)");
    for (Value v : operands) {
      KILN_CHECK(v.valid() && v.node < g_.size() && v.index < g_[v.node].results.size(),
                 "internal error: operand refers to no value (node ", v.node, " result ", v.index,
                 ")");
      types.push_back(g_.type(v));
    }
    // A composite becomes its expansion's nodes (ir/decompose.h).
    if (is_composite(k)) return expand_composite(*this, k, operands);
    TensorType t = infer_type(k, types, attrs);
    (void)t.bytes();  // a result too large to exist is an error here, at the user's line
    return Value(add_node(k, std::move(operands), std::move(attrs), {std::move(t)}));
  } catch (Error& e) {
    e.attach(loc, op_name(k));
    throw;
  }
}

Value Builder::op_typed(OpKind k, std::vector<Value> operands, Attrs attrs, TensorType given) {
  if (!type_given(k)) {
    Value v = op(k, std::move(operands), std::move(attrs));
    if (g_.type(v) != given) {
      Error e("internal error: op_typed was given " + given.str() + " but the op's rules give " +
              g_.type(v).str());
      e.attach(loc, op_name(k));
      throw e;
    }
    return v;
  }
  return Value(op_multi(k, std::move(operands), std::move(attrs), {std::move(given)}));
}

NodeId Builder::op_multi(OpKind k, std::vector<Value> operands, Attrs attrs,
                         std::vector<TensorType> results) {
  int arity = op_info(k).arity;
  if (arity >= 0 && static_cast<size_t>(arity) != operands.size()) {
    Error e("expected " + std::to_string(arity) + " operands, got " +
            std::to_string(operands.size()));
    e.attach(loc, op_name(k));
    throw e;
  }
  for (const TensorType& r : results) {
    try {
      (void)r.bytes();  // creation ops are named by what the user called: no op prefix
    } catch (Error& e) {
      e.attach(loc);
      throw;
    }
  }
  return add_node(k, std::move(operands), std::move(attrs), std::move(results));
}

Value Builder::arg(int64_t index, TensorType t) {
  return op_typed(OpKind::arg, {}, Attrs{{AttrKey::index, index}}, std::move(t));
}

Value Builder::param(int64_t index, TensorType t, std::string name) {
  Attrs a{{AttrKey::index, index}};
  if (!name.empty()) a.set(AttrKey::name, std::move(name));
  return op_typed(OpKind::param, {}, std::move(a), std::move(t));
}

Value Builder::constant(double v, DType dt, Shape shape, Device dev) {
  // Store the value as the dtype holds it, so equal constants hash-cons.
  double exact = visit_dtype(dt, [&](auto zero) {
    using T = decltype(zero);
    return static_cast<double>(static_cast<T>(v));
  });
  return op_typed(OpKind::constant, {}, Attrs{{AttrKey::value, exact}},
                  TensorType{dt, std::move(shape), dev});
}

Value Builder::scalar_like(Value v, double c) {
  const TensorType& t = type(v);
  return constant(c, t.dtype, {}, t.device);
}

Value Builder::zeros_like(Value v) {
  TensorType t = type(v);
  return constant(0.0, t.dtype, t.shape, t.device);
}

Value Builder::ones_like(Value v) {
  TensorType t = type(v);
  return constant(1.0, t.dtype, t.shape, t.device);
}

Value Builder::cast(Value a, DType t) {
  if (type(a).dtype == t) return a;
  return op(OpKind::cast, {a}, Attrs{{AttrKey::dtype, t}});
}

Value Builder::sum(Value x, std::vector<int64_t> dims, bool keepdim) {
  if (dims.empty()) return x;
  try {
    dims = normalize_dims(dims, type(x).rank());
  } catch (Error& e) {
    e.attach(loc, "sum");
    throw;
  }
  return op(OpKind::sum, {x},
            Attrs{{AttrKey::dims, std::move(dims)}, {AttrKey::keepdim, int64_t{keepdim}}});
}

Value Builder::reshape(Value x, Shape s) {
  try {
    s = infer_reshape(s, type(x).numel());
  } catch (Error& e) {
    Error wrapped("cannot reshape " + shape_str(type(x).shape) + " to " + shape_str(s) + ": " +
                  e.message());
    wrapped.attach(loc, "reshape");
    throw wrapped;
  }
  if (s == type(x).shape) return x;
  return op(OpKind::reshape, {x}, Attrs{{AttrKey::shape, std::move(s)}});
}

Value Builder::expand(Value x, Shape s) {
  const Shape& from = type(x).shape;
  size_t lead = s.size() >= from.size() ? s.size() - from.size() : 0;
  for (size_t i = lead; i < s.size(); ++i)
    if (s[i] == -1) s[i] = from[i - lead];
  if (s == from) return x;
  return op(OpKind::expand, {x}, Attrs{{AttrKey::shape, std::move(s)}});
}

Value Builder::permute(Value x, std::vector<int64_t> perm) {
  int64_t rank = type(x).rank();
  for (int64_t& p : perm)
    if (p < 0) p += rank;
  bool identity = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t i = 0; identity && i < rank; ++i) identity = perm[i] == i;
  if (identity) return x;
  return op(OpKind::permute, {x}, Attrs{{AttrKey::perm, std::move(perm)}});
}

Value Builder::transpose_last(Value x) {
  int64_t rank = type(x).rank();
  if (rank < 2) {
    Error e("expected a tensor of rank >= 2 to transpose, got " + type(x).str());
    e.attach(loc, "permute");
    throw e;
  }
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return permute(x, std::move(perm));
}

Value Builder::sum_to(Value x, const Shape& shape) {
  Shape from = type(x).shape;
  if (from == shape) return x;
  if (!broadcastable(shape, from)) {
    Error e("cannot sum " + shape_str(from) + " down to " + shape_str(shape) +
            ": the target does not broadcast to the source");
    e.attach(loc, "sum");
    throw e;
  }
  size_t lead = from.size() - shape.size();
  std::vector<int64_t> dims;
  // Size-1 source dims need no sum: the final reshape drops or keeps them.
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && (i < lead || shape[i - lead] == 1)) dims.push_back(static_cast<int64_t>(i));
  return reshape(sum(x, std::move(dims), false), shape);
}

}  // namespace kiln
