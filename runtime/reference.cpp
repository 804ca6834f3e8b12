// reference_kernel: checks operands and dispatches on the op's category to
// the kernels in reference_*.cpp; plus the helpers those kernels share.
#include "runtime/reference.h"

#include "ir/error.h"
#include "runtime/blas.h"
#include "runtime/collective.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"

namespace kiln {

namespace detail {

Strides broadcast_strides(const View& v, const Shape& shape) {
  const int64_t r = static_cast<int64_t>(shape.size()), vr = v.rank();
  KILN_CHECK(vr <= r, "cannot broadcast shape ", shape_str(v.shape), " to ", shape_str(shape));
  Strides s(r, 0);
  for (int64_t i = 0; i < vr; ++i) {
    int64_t d = r - vr + i;
    if (v.shape[i] == shape[d]) {
      s[d] = v.shape[i] == 1 ? 0 : v.strides[i];
    } else {
      KILN_CHECK(v.shape[i] == 1, "cannot broadcast shape ", shape_str(v.shape), " to ",
                 shape_str(shape));
    }
  }
  return s;
}

View scratch(const Shape& shape, DType dt, std::vector<std::shared_ptr<Storage>>& keep) {
  auto s = Storage::allocate(size_t(byte_size(shape, dtype_size(dt))));
  keep.push_back(s);
  return dense_view(s->data(), dt, shape);
}

View as_dtype(const View& v, DType dt, std::vector<std::shared_ptr<Storage>>& keep) {
  if (v.dtype == dt) return v;
  View dst = scratch(v.shape, dt, keep);
  copy_to(v, dst);
  return dst;
}

}  // namespace detail

CollectiveCall collective_call(OpKind k, const Attrs& attrs, const TensorType& in) {
  CollectiveCall c;
  c.op = k;
  c.dtype = in.dtype;
  c.count = in.numel();
  if (attrs.has(AttrKey::reduce)) {
    KILN_CHECK(parse_reduce_op(attrs.str(AttrKey::reduce), &c.reduce), "unknown reduce '",
               attrs.str(AttrKey::reduce), "'");
  }
  c.root = static_cast<int>(attrs.i(AttrKey::root, 0));
  c.shapes = shape_str(in.shape);
  c.what = std::string(op_name(k)) + " of " + in.str();
  if (c.op == OpKind::all_reduce || c.op == OpKind::reduce_scatter)
    c.what += " (" + std::string(reduce_op_name(c.reduce)) + ")";
  if (c.op == OpKind::broadcast) c.what += " from rank " + std::to_string(c.root);
  const int64_t traced = attrs.i(AttrKey::world);
  const int world = collectives::world_size();
  KILN_CHECK(traced == world, op_name(k), " was recorded for a world of ", traced,
             " ranks but runs in a world of ", world,
             " (trace again after distributed::init())");
  return c;
}

void reference_collective(OpKind k, const Attrs& attrs, const View& in, const View& out) {
  std::vector<std::shared_ptr<Storage>> keep;
  View send = in;
  if (!in.contiguous()) {
    send = detail::scratch(in.shape, in.dtype, keep);
    copy_to(in, send);
  }
  const CollectiveCall c = collective_call(k, attrs, TensorType{in.dtype, in.shape, {}});
  if (out.contiguous()) return collectives::run(c, send.data, out.data);
  View recv = detail::scratch(out.shape, out.dtype, keep);
  collectives::run(c, send.data, recv.data);
  copy_to(recv, out);
}

void reference_kernel(OpKind k, const Attrs& attrs, std::span<const View> inputs, const View& out) {
  const OpInfo& info = op_info(k);
  auto expect = [&](size_t n) {
    KILN_CHECK(inputs.size() == n, "reference kernel for ", info.name, " expects ", n,
               " operand(s), got ", inputs.size());
  };
  switch (info.category) {
    case OpCategory::Input:
      KILN_CHECK(false, "no reference kernel for ", info.name,
                 ": graph inputs carry caller data (pass it as an argument or parameter)");
      break;
    case OpCategory::Custom:
      KILN_CHECK(false,
                 "no reference kernel for a custom op: it runs user code "
                 "(the interpreter calls InterpretOptions::custom)");
      break;
    case OpCategory::Creation:
      expect(0);
      return detail::ref_creation(k, attrs, out);
    case OpCategory::Unary:
      expect(1);
      return detail::ref_unary(k, inputs[0], out);
    case OpCategory::Binary:
      expect(2);
      return detail::ref_binary(k, attrs, inputs[0], inputs[1], out);
    case OpCategory::Ternary:
      expect(3);
      return detail::ref_where(inputs[0], inputs[1], inputs[2], out);
    case OpCategory::Reduce:
      expect(1);
      return detail::ref_reduce(k, attrs, inputs[0], out);
    case OpCategory::Scan:
      expect(1);
      return detail::ref_scan(k, attrs, inputs[0], out);
    case OpCategory::Movement:
      expect(static_cast<size_t>(info.arity));  // rebind's second operand only routes gradients
      return detail::ref_movement(k, attrs, inputs[0], out);
    case OpCategory::Matmul:
      expect(2);
      return matmul_cpu(inputs[0], inputs[1], out);
    case OpCategory::Gather:
      expect(2);
      return detail::ref_gather(attrs, inputs[0], inputs[1], out);
    case OpCategory::Scatter:
      expect(3);
      return detail::ref_scatter_add(attrs, inputs[0], inputs[1], inputs[2], out);
    case OpCategory::Sort:
      expect(1);
      return detail::ref_argsort(attrs, inputs[0], out);
    case OpCategory::Attention:
      expect(static_cast<size_t>(info.arity));
      if (k == OpKind::cluster_logprob || k == OpKind::cluster_logprob_grad)
        return detail::ref_cluster_logprob(k, attrs, inputs, out);
      return detail::ref_attention(k, attrs, inputs, out);
    case OpCategory::Check:
      expect(1);
      check_values(k, attrs, inputs[0]);
      return copy_to(inputs[0], out);
    case OpCategory::Collective:
      expect(1);
      return reference_collective(k, attrs, inputs[0], out);
  }
}

}  // namespace kiln
