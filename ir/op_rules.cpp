// The shape and dtype rules named by ops.def, and infer_type, which dispatches
// to them from the table. Each rule checks its operands and says what it
// expected and what came; infer_type prefixes the op's name.
#include <algorithm>

#include "ir/decompose.h"
#include "ir/error.h"
#include "ir/op.h"

namespace kiln {

namespace {

using Types = std::span<const TensorType>;

// ---- Types given by the node itself (Input, Creation, Custom) ----

[[noreturn]] void given_only(OpKind k) {
  detail::fail("internal error: the result type of ", category_name(op_info(k).category),
               " ops is given by the node; infer_type cannot derive it (build them with "
               "Builder::op_typed)");
}
Shape shape_given(OpKind k, Types, const Attrs&) {
  given_only(k);
}
DType dtype_given(OpKind k, Types, const Attrs&) {
  given_only(k);
}

// ---- Dtype rules ----

DType dtype_same(OpKind, Types in, const Attrs&) {
  return in[0].dtype;
}

// neg, abs, relu keep integers integral but reject bool, as PyTorch does; sign accepts bool.
DType dtype_same_numeric(OpKind k, Types in, const Attrs&) {
  KILN_CHECK(in[0].dtype != DType::b8 || k == OpKind::sign,
             "expected a numeric tensor, got bool (cast it first, or use logical_not)");
  return in[0].dtype;
}

DType dtype_to_float(OpKind, Types in, const Attrs&) {
  return is_floating(in[0].dtype) ? in[0].dtype : DType::f32;
}

DType dtype_to_bool(OpKind, Types, const Attrs&) {
  return DType::b8;
}
DType dtype_attr(OpKind k, Types, const Attrs& a) {
  const DType t = a.dtype(AttrKey::dtype);
  check_dtype(t, op_name(k));
  return t;
}
DType dtype_promote(OpKind, Types in, const Attrs&) {
  return promote_types(in[0].dtype, in[1].dtype);
}

// True division: integer operands give f32, as torch.div does.
DType dtype_promote_float(OpKind, Types in, const Attrs&) {
  DType t = promote_types(in[0].dtype, in[1].dtype);
  return is_floating(t) ? t : DType::f32;
}

// philox: a float32 draw unless {dtype} asks for f64 or i64; an i64 draw in
// [low, high) has both bounds, low < high. Key and counter are of any dtype
// (converted to int64).
DType dtype_uniform(OpKind, Types, const Attrs& a) {
  const DType t = a.has(AttrKey::dtype) ? a.dtype(AttrKey::dtype) : DType::f32;
  KILN_CHECK(t == DType::f32 || t == DType::f64 || t == DType::i64,
             "philox: expected dtype f32, f64 or i64, got ", dtype_name(t));
  if (a.has(AttrKey::low) || a.has(AttrKey::high)) {
    KILN_CHECK(t == DType::i64, "philox: low and high bound an i64 draw, got dtype ",
               dtype_name(t));
    const int64_t low = a.i(AttrKey::low), high = a.i(AttrKey::high);
    KILN_CHECK(low < high, "philox: expected low < high, got [", low, ", ", high, ")");
  }
  return t;
}

DType dtype_compare(OpKind, Types, const Attrs&) {
  return DType::b8;
}

DType dtype_where(OpKind, Types in, const Attrs&) {
  KILN_CHECK(in[0].dtype == DType::b8, "expected a bool condition, got ", dtype_name(in[0].dtype));
  return promote_types(in[1].dtype, in[2].dtype);
}

// Sums of bool and integer tensors are int64, as torch.sum.
DType dtype_sum(OpKind, Types in, const Attrs&) {
  return is_floating(in[0].dtype) ? in[0].dtype : DType::i64;
}

DType dtype_index(OpKind, Types, const Attrs&) {
  return DType::i64;
}

// check_index: integer indices (bool is not an index) and a bound >= 0.
DType dtype_integer(OpKind, Types in, const Attrs& a) {
  KILN_CHECK(!is_floating(in[0].dtype) && in[0].dtype != DType::b8,
             "expected integer indices, got ", dtype_name(in[0].dtype));
  const int64_t high = a.i(AttrKey::high);
  KILN_CHECK(high >= 0, "expected a bound (high) >= 0, got ", high);
  (void)a.str(AttrKey::name);
  return in[0].dtype;
}

// check_nonzero: an integer divisor (a float divisor of zero gives inf or NaN).
DType dtype_nonzero(OpKind, Types in, const Attrs& a) {
  KILN_CHECK(!is_floating(in[0].dtype) && in[0].dtype != DType::b8, "expected an integer divisor, got ",
             dtype_name(in[0].dtype));
  (void)a.str(AttrKey::name);
  return in[0].dtype;
}

// check_distribution: float weights of rank >= 1, a count >= 0.
DType dtype_distribution(OpKind, Types in, const Attrs& a) {
  KILN_CHECK(is_floating(in[0].dtype), "expected float weights, got ", dtype_name(in[0].dtype));
  KILN_CHECK(in[0].rank() >= 1, "expected weights of rank >= 1, got a scalar");
  const int64_t count = a.i(AttrKey::count);
  KILN_CHECK(count >= 0, "expected a count >= 0, got ", count);
  (void)a.str(AttrKey::name);
  return in[0].dtype;
}

// Scans: integers and bool add and multiply up in int64 (as torch.cumsum);
// `dim` names a dim (any for a scalar).
DType dtype_scan(OpKind, Types in, const Attrs& a) {
  (void)normalize_dim(a.i(AttrKey::dim), std::max<int64_t>(in[0].rank(), 1));
  return is_floating(in[0].dtype) ? in[0].dtype : DType::i64;
}

// gather and scatter_add: integer indices of the data's rank, no larger than it
// in any dim but `dim` (where they may be any size); scatter_add's source has
// the indices' shape and the base's dtype.
void check_index_operand(const TensorType& data, const TensorType& index, const Attrs& a, const char* what) {
  KILN_CHECK(!is_floating(index.dtype) && index.dtype != DType::b8, "expected integer indices, got ",
             dtype_name(index.dtype));
  KILN_CHECK(index.rank() == data.rank(), "expected indices with as many dims as the ", what, " (",
             data.rank(), "), got ", shape_str(index.shape));
  const int64_t d = normalize_dim(a.i(AttrKey::dim), std::max<int64_t>(data.rank(), 1));
  for (int64_t k = 0; k < data.rank(); ++k)
    KILN_CHECK(k == d || index.shape[k] <= data.shape[k], "indices of shape ", shape_str(index.shape),
               " are larger than the ", what, " ", shape_str(data.shape), " in dim ", k);
}
DType dtype_gather(OpKind, Types in, const Attrs& a) {
  check_index_operand(in[0], in[1], a, "input");
  return in[0].dtype;
}
Shape shape_gather(OpKind, Types in, const Attrs&) {
  return in[1].shape;
}
DType dtype_scatter(OpKind, Types in, const Attrs& a) {
  check_index_operand(in[0], in[1], a, "base");
  KILN_CHECK(in[2].dtype == in[0].dtype, "expected a source of the base's dtype ", dtype_name(in[0].dtype),
             ", got ", dtype_name(in[2].dtype));
  KILN_CHECK(in[2].shape == in[1].shape, "expected a source of the indices' shape ", shape_str(in[1].shape),
             ", got ", shape_str(in[2].shape));
  return in[0].dtype;
}
Shape shape_scatter(OpKind, Types in, const Attrs&) {
  return in[0].shape;
}

// attention(q, k, v) and attention_grad(q, k, v, out, g): float operands of one
// dtype and rank >= 2, equal leading dims, k and v with one length, q and k one
// width; out [.., L, Ev] and g its gradient. The result is attention's output,
// or the gradients of the operands the bitmask `which` names (1 q, 2 k, 4 v),
// flattened and laid end to end in that order.
void check_attention(Types in) {
  const TensorType &q = in[0], &k = in[1], &v = in[2];
  KILN_CHECK(is_floating(q.dtype), "expected floating-point q, k and v, got ", dtype_name(q.dtype));
  for (size_t i = 1; i < in.size(); ++i)
    KILN_CHECK(in[i].dtype == q.dtype, "expected operands of q's dtype ", dtype_name(q.dtype), ", got ",
               dtype_name(in[i].dtype));
  const int64_t r = q.rank();
  KILN_CHECK(r >= 2 && k.rank() == r && v.rank() == r, "expected q, k and v of one rank >= 2, got ",
             shape_str(q.shape), ", ", shape_str(k.shape), " and ", shape_str(v.shape));
  for (int64_t i = 0; i + 2 < r; ++i)
    KILN_CHECK(k.shape[size_t(i)] == q.shape[size_t(i)] && v.shape[size_t(i)] == q.shape[size_t(i)],
               "expected q, k and v with equal leading dims, got ", shape_str(q.shape), ", ", shape_str(k.shape),
               " and ", shape_str(v.shape));
  KILN_CHECK(k.shape[size_t(r - 1)] == q.shape[size_t(r - 1)], "expected k as wide as q (",
             q.shape[size_t(r - 1)], "), got ", shape_str(k.shape));
  KILN_CHECK(v.shape[size_t(r - 2)] == k.shape[size_t(r - 2)], "expected v as long as k (",
             k.shape[size_t(r - 2)], "), got ", shape_str(v.shape));
}
Shape attention_out(Types in) {
  Shape s = in[0].shape;
  s.back() = in[2].shape.back();
  return s;
}
DType dtype_attention(OpKind k, Types in, const Attrs& a) {
  check_attention(in);
  (void)a.f(AttrKey::scale);
  (void)a.i(AttrKey::causal);
  if (k == OpKind::attention_grad) {
    const int64_t which = a.i(AttrKey::which);
    KILN_CHECK(which >= 1 && which <= 7, "expected which a mask in 1..7 (1 q, 2 k, 4 v), got ",
               which);
    KILN_CHECK(in[3].shape == attention_out(in) && in[4].shape == attention_out(in),
               "expected the output and its gradient of shape ", shape_str(attention_out(in)), ", got ",
               shape_str(in[3].shape), " and ", shape_str(in[4].shape));
  }
  return in[0].dtype;
}
Shape shape_attention(OpKind, Types in, const Attrs&) {
  return attention_out(in);
}
Shape shape_attention_grad(OpKind, Types in, const Attrs& a) {
  const int64_t which = a.i(AttrKey::which);
  int64_t n = 0;
  for (size_t i = 0; i < 3; ++i)
    if (which & (int64_t(1) << i)) n += in[i].numel();
  return {n};
}

// cluster_logprob(h, w, t) and cluster_logprob_grad(h, w, t, g): floating h
// [N, H] and w [C, H] of one dtype, int64 targets t [N], g [N] of h's dtype.
// The result is [N], or the gradients the bitmask `which` names (1 h, 2 w),
// flattened and laid end to end in that order.
DType dtype_cluster_logprob(OpKind k, Types in, const Attrs& a) {
  const TensorType &h = in[0], &w = in[1], &t = in[2];
  KILN_CHECK(is_floating(h.dtype), "expected floating-point features h, got ", dtype_name(h.dtype));
  KILN_CHECK(w.dtype == h.dtype, "expected weights w of h's dtype ", dtype_name(h.dtype), ", got ",
             dtype_name(w.dtype));
  KILN_CHECK(t.dtype == DType::i64, "expected int64 targets t, got ", dtype_name(t.dtype));
  KILN_CHECK(h.rank() == 2 && w.rank() == 2 && t.rank() == 1,
             "expected features h [N, H], weights w [C, H] and targets t [N], got ",
             shape_str(h.shape), ", ", shape_str(w.shape), " and ", shape_str(t.shape));
  KILN_CHECK(w.shape[1] == h.shape[1], "expected weights w as wide as h (", h.shape[1], "), got ",
             shape_str(w.shape));
  KILN_CHECK(t.shape[0] == h.shape[0], "expected one target per row of h (", h.shape[0], "), got ",
             shape_str(t.shape));
  (void)a.i(AttrKey::start);
  if (k == OpKind::cluster_logprob_grad) {
    const int64_t which = a.i(AttrKey::which);
    KILN_CHECK(which >= 1 && which <= 3, "expected which a mask in 1..3 (1 h, 2 w), got ", which);
    KILN_CHECK(in[3].dtype == h.dtype && in[3].shape == t.shape,
               "expected an output gradient g of dtype ", dtype_name(h.dtype), " and shape ",
               shape_str(t.shape), ", got ", in[3].str());
  }
  return h.dtype;
}
Shape shape_cluster_logprob(OpKind, Types in, const Attrs&) {
  return {in[0].shape[0]};
}
Shape shape_cluster_logprob_grad(OpKind, Types in, const Attrs& a) {
  const int64_t which = a.i(AttrKey::which);
  return {((which & 1) ? in[0].numel() : 0) + ((which & 2) ? in[1].numel() : 0)};
}

// argsort: `dim` names a dim (any for a scalar, a line of one), `count` is in
// [0, size of dim]; int64 positions, `count` of them along dim.
DType dtype_sort(OpKind, Types in, const Attrs& a) {
  (void)a.i(AttrKey::descending);
  return DType::i64;
}
Shape shape_sort(OpKind, Types in, const Attrs& a) {
  Shape s = in[0].shape;
  const int64_t d = normalize_dim(a.i(AttrKey::dim), std::max<int64_t>(in[0].rank(), 1));
  const int64_t n = s.empty() ? 1 : s[static_cast<size_t>(d)];
  const int64_t count = a.i(AttrKey::count);
  KILN_CHECK(count >= (s.empty() ? 1 : 0) && count <= n, "expected a count in [0, ", n, "] (the size of dim ", d, "), got ",
             count);
  if (!s.empty()) s[static_cast<size_t>(d)] = count;
  return s;
}

// Collectives: a numeric operand; `world` >= 1; a known reduction where one is
// taken (avg only of floating-point values); a root among the ranks.
DType dtype_collective(OpKind k, Types in, const Attrs& a) {
  KILN_CHECK(in[0].dtype != DType::b8, "expected a numeric tensor, got bool");
  const int64_t world = a.i(AttrKey::world);
  KILN_CHECK(world >= 1, "expected a world size >= 1, got ", world);
  if (k == OpKind::all_reduce || k == OpKind::reduce_scatter) {
    ReduceOp r;
    const std::string& name = a.str(AttrKey::reduce);
    KILN_CHECK(parse_reduce_op(name, &r), "expected reduce sum, avg, max or min, got '", name, "'");
    KILN_CHECK(r != ReduceOp::avg || is_floating(in[0].dtype),
               "expected a floating-point tensor for reduce avg, got ", dtype_name(in[0].dtype));
  }
  if (k == OpKind::broadcast) {
    const int64_t root = a.i(AttrKey::root);
    KILN_CHECK(root >= 0 && root < world, "expected a root rank in [0, ", world, "), got ", root);
  }
  return in[0].dtype;
}

// ---- Shape rules ----

Shape shape_same(OpKind, Types in, const Attrs&) {
  return in[0].shape;
}

// rebind(new, old): the same type on both sides (the value replaces the tensor's).
Shape shape_rebind(OpKind, Types in, const Attrs&) {
  KILN_CHECK(in[0] == in[1], "expected the new value's type ", in[1].str(), ", got ", in[0].str());
  return in[0].shape;
}

Shape shape_broadcast(OpKind, Types in, const Attrs&) {
  return broadcast_shapes(in[0].shape, in[1].shape);
}

Shape shape_broadcast3(OpKind, Types in, const Attrs&) {
  const Shape &a = in[0].shape, &b = in[1].shape, &c = in[2].shape;
  try {
    return broadcast_shapes(broadcast_shapes(a, b), c);
  } catch (const Error&) {
    detail::fail("shapes ", shape_str(a), ", ", shape_str(b), " and ", shape_str(c),
                 " cannot be broadcast");
  }
}

// Reduces the listed dims (an empty list reduces nothing).
// A reduction whose identity is a bound rather than a value (max's lowest,
// min's highest) or that gives a position (argmax, argmin) has no result over
// nothing: a reduced dim of size 0 is an error (as in PyTorch), eager and traced
// alike; a sum of nothing is its identity, 0.
void check_nonempty_reduction(OpKind k, const Shape& s, int64_t dim) {
  const Identity id = op_info(k).identity;
  const bool has_value = !is_arg_reduction(k) && (id == Identity::zero || id == Identity::one);
  KILN_CHECK(has_value || s[dim] != 0, "expected reduction dim ", dim,
             " to have a non-zero size, got input shape ", shape_str(s), " (the ", op_name(k),
             " of no elements is undefined)");
}

Shape shape_reduce(OpKind k, Types in, const Attrs& a) {
  const Shape& s = in[0].shape;
  std::vector<int64_t> dims = normalize_dims(a.ints(AttrKey::dims), in[0].rank());
  bool keepdim = a.i(AttrKey::keepdim, 0) != 0;
  Shape out;
  for (int64_t i = 0; i < in[0].rank(); ++i) {
    bool reduced = std::binary_search(dims.begin(), dims.end(), i);
    if (reduced) check_nonempty_reduction(k, s, i);
    if (!reduced)
      out.push_back(s[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

Shape shape_reduce_dim(OpKind k, Types in, const Attrs& a) {
  int64_t dim = normalize_dim(a.i(AttrKey::dim), in[0].rank());
  check_nonempty_reduction(k, in[0].shape, dim);
  Shape out = in[0].shape;
  if (a.i(AttrKey::keepdim, 0) != 0)
    out[dim] = 1;
  else
    out.erase(out.begin() + dim);
  return out;
}

Shape shape_reshape(OpKind, Types in, const Attrs& a) {
  const std::vector<int64_t>& req = a.ints(AttrKey::shape);
  try {
    return infer_reshape(req, in[0].numel());
  } catch (const Error& e) {
    detail::fail("cannot reshape ", shape_str(in[0].shape), " to ", shape_str(req), ": ",
                 e.message());
  }
}

// Target dims of -1 keep the operand's size; new leading dims are added.
Shape shape_expand(OpKind, Types in, const Attrs& a) {
  const Shape& s = in[0].shape;
  Shape t = a.ints(AttrKey::shape);
  KILN_CHECK(t.size() >= s.size(), "cannot expand ", shape_str(s), " to ", shape_str(t),
             ": the target has fewer dims");
  size_t lead = t.size() - s.size();
  for (size_t i = 0; i < t.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(t[i] >= 0, "cannot expand ", shape_str(s), " to ", shape_str(t), ": new dim ", i,
                 " needs a size, got ", t[i]);
      continue;
    }
    int64_t from = s[i - lead];
    if (t[i] == -1) t[i] = from;
    KILN_CHECK(from == t[i] || from == 1, "cannot expand ", shape_str(s), " to ", shape_str(t),
               ": dim ", i - lead, " has size ", from, ", expected 1 or ", t[i]);
  }
  return t;
}

Shape shape_permute(OpKind, Types in, const Attrs& a) {
  const std::vector<int64_t>& perm = a.ints(AttrKey::perm);
  int64_t rank = in[0].rank();
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  KILN_CHECK(ok, "expected a permutation of 0..", rank - 1, " for a tensor of rank ", rank,
             ", got perm ", shape_str(perm));
  Shape out(rank);
  for (int64_t i = 0; i < rank; ++i) out[i] = in[0].shape[perm[i]];
  return out;
}

Shape shape_slice(OpKind, Types in, const Attrs& a) {
  int64_t dim = normalize_dim(a.i(AttrKey::dim), in[0].rank());
  int64_t size = in[0].shape[dim];
  int64_t start = a.i(AttrKey::start), end = a.i(AttrKey::end), step = a.i(AttrKey::step);
  KILN_CHECK(start >= 0 && start <= size && end >= 0 && end <= size,
             "expected start and end in [0, ", size, "] for dim ", dim, " of ",
             shape_str(in[0].shape), ", got start=", start, " end=", end);
  KILN_CHECK(step >= 1, "expected step >= 1, got ", step);
  Shape out = in[0].shape;
  out[dim] = end > start ? (end - start - 1) / step + 1 : 0;  // no sum that could wrap
  return out;
}

Shape shape_unfold(OpKind, Types in, const Attrs& a) {
  return unfold_shape(in[0].shape, a.i(AttrKey::dim), a.i(AttrKey::size), a.i(AttrKey::step),
                      a.i(AttrKey::dilation, 1));
}

// Like jax.lax.pad on one dim: `low` before, `high` after, `interior` between elements.
Shape shape_pad(OpKind, Types in, const Attrs& a) {
  int64_t dim = normalize_dim(a.i(AttrKey::dim), in[0].rank());
  int64_t low = a.i(AttrKey::low), high = a.i(AttrKey::high), interior = a.i(AttrKey::interior);
  KILN_CHECK(low >= 0 && high >= 0 && interior >= 0,
             "expected low, high and interior >= 0, got low=", low, " high=", high,
             " interior=", interior);
  Shape out = in[0].shape;
  int64_t size = out[dim];
  const char* what = "padded size";
  out[dim] = checked_add(checked_add(low, high, what),
                         checked_add(size, checked_mul(std::max<int64_t>(size - 1, 0), interior, what), what),
                         what);
  return out;
}

// all_gather: every rank's operand, concatenated along dim 0.
Shape shape_all_gather(OpKind, Types in, const Attrs& a) {
  KILN_CHECK(in[0].rank() >= 1, "expected a tensor of rank >= 1 (gathered along dim 0), got a scalar");
  Shape s = in[0].shape;
  s[0] *= a.i(AttrKey::world);
  return s;
}

// reduce_scatter: this rank's 1/world of dim 0.
Shape shape_reduce_scatter(OpKind, Types in, const Attrs& a) {
  KILN_CHECK(in[0].rank() >= 1, "expected a tensor of rank >= 1 (scattered along dim 0), got a scalar");
  const int64_t world = a.i(AttrKey::world);
  Shape s = in[0].shape;
  KILN_CHECK(world >= 1 && s[0] % world == 0, "expected dim 0 (", s[0],
             ") divisible by the world size ", world);
  s[0] /= world;
  return s;
}

Shape shape_matmul(OpKind, Types in, const Attrs&) {
  const Shape &a = in[0].shape, &b = in[1].shape;
  KILN_CHECK(a.size() >= 2 && b.size() >= 2, "expected operands of rank >= 2, got ", shape_str(a),
             " and ", shape_str(b));
  KILN_CHECK(a[a.size() - 1] == b[b.size() - 2], "expected a.shape[-1] == b.shape[-2], got ",
             shape_str(a), " and ", shape_str(b));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape out;
  try {
    out = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    detail::fail("batch dims of ", shape_str(a), " and ", shape_str(b), " cannot be broadcast");
  }
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  return out;
}

// A composite's type is its expansion's (ir/decompose.h).
Shape shape_decomp(OpKind k, Types in, const Attrs&) {
  return composite_type(k, in).shape;
}
DType dtype_decomp(OpKind k, Types in, const Attrs&) {
  return composite_type(k, in).dtype;
}

}  // namespace

TensorType infer_type(OpKind k, std::span<const TensorType> operands, const Attrs& attrs) {
  const OpInfo& info = op_info(k);
  try {
    KILN_CHECK(info.arity < 0 || static_cast<int>(operands.size()) == info.arity, "expected ",
               info.arity, info.arity == 1 ? " operand" : " operands", ", got ", operands.size());
    for (size_t i = 1; i < operands.size(); ++i)
      KILN_CHECK(operands[i].device == operands[0].device,
                 "expected all operands on one device, got ", operands[0].device.str(),
                 " (operand 0) and ", operands[i].device.str(), " (operand ", i, ")");
    TensorType t;
    switch (k) {
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, ...) \
  case OpKind::name:                                                \
    t.dtype = dtype_##dtype_rule(k, operands, attrs);               \
    t.shape = shape_##shape_rule(k, operands, attrs);               \
    break;
#include "ir/ops.def"
#undef KILN_OP
    }
    if (!operands.empty()) t.device = operands[0].device;
    return t;
  } catch (const Error& e) {
    throw Error(std::string(info.name) + ": " + e.message());
  }
}

}  // namespace kiln
