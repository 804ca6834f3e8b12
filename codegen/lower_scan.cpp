// Scan kernels (cumsum, cumprod, logcumsumexp; see lowering.h). The outer,
// parallel loop runs over lines along `dim` (the dims after it in blocks of B
// contiguous elements, B dividing their extent, so each step of a line is a
// contiguous run); each element is the combine op (ops.def) of the previous
// element of its line and its input, evaluated there (producers fuse in). With
// one column per line (B = 1) the running value is an ordered accumulator, a
// register; with a block of columns it is loaded back from the output (the
// loads of a run vectorise). Lines fold in order from their first element (the
// last with reverse), in the result's dtype, as the reference kernel does.
#include "codegen/lowering.h"

#include <algorithm>

namespace kiln::lowering {

namespace {

int64_t line_block(int64_t extent) {
  for (int64_t b = 64; b > 1; b /= 2)
    if (extent % b == 0) return b;
  return 1;
}

}  // namespace

void Lowering::lower_scan() {
  NodeId id = kNoNode;
  for (NodeId m : grp_.nodes)
    if (is_scan(g_.node(m).op)) {
      if (id != kNoNode) fail("two scans in one group");
      id = m;
    }
  if (id == kNoNode) fail("no scan");
  const Node& n = g_.node(id);
  setup_buffers();
  const int32_t ob = add_output(Value(id));
  const TensorType& t = g_.type(Value(id));
  const Shape& s = t.shape;
  const int64_t rank = int64_t(s.size());
  const int64_t d = rank == 0 ? 0 : normalize_dim(n.attrs.i(AttrKey::dim), rank);
  const bool reverse = n.attrs.i(AttrKey::reverse, 0) != 0;
  const int64_t len = rank == 0 ? 1 : s[size_t(d)];
  // The line space: the dims before d, then the dims after it flattened, in blocks.
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (k < d) outer *= s[size_t(k)];
    if (k > d) inner *= s[size_t(k)];
  }
  const int64_t block = line_block(inner);
  kir::Kernel& kernel = kb_.kernel();
  kernel.range = len == 0 ? 0 : outer * (inner / block);
  kernel.serial_inner = true;
  const ValueId i0 = kb_.index(0);
  kb_.set_upper_bound(i0, kernel.range);
  const std::vector<ValueId> ob_dims = delinearize(i0, Shape{outer, inner / block});
  const ValueId row = ob_dims[0],
                first_col = kb_.binary(ScalarOp::mul, ob_dims[1], kb_.iconst(block));

  const kir::Immediate id_v = kir::identity_of(n.op, t.dtype);
  const ValueId identity =
      is_floating(t.dtype) ? kb_.constant(t.dtype, id_v.f) : kb_.iconst(id_v.i, t.dtype);
  const ScalarOp combine = kir::combine_of(n.op);

  // Element (row, j, col) of the scan's [outer, len, inner] view of the output.
  auto at = [&](ValueId j, ValueId col) {
    Coords c;
    c.shape = s;
    c.linear = kb_.binary(
        ScalarOp::add,
        kb_.binary(ScalarOp::mul,
                   kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, row, kb_.iconst(len)), j),
                   kb_.iconst(inner)),
        col);
    return c;
  };
  auto column = [&]() {
    return block > 1 ? kb_.binary(ScalarOp::add, first_col, kb_.index(kb_.begin_loop(block)))
                     : first_col;
  };
  auto end_column = [&]() {
    if (block > 1) kb_.end_loop();
  };
  if (block == 1) {
    // acc = identity; for each element in order: acc = combine(acc, x); store acc.
    const int32_t acc = kb_.add_accumulator(n.op, t.dtype, /*ordered=*/true);
    kb_.acc_init(acc);
    const ValueId i = kb_.index(kb_.begin_loop(len));
    Coords c = at(reverse ? kb_.binary(ScalarOp::sub, kb_.iconst(len - 1), i) : i, first_col);
    kb_.acc_update(acc, kb_.cast(eval(n.operands[0], c), t.dtype));
    kb_.store(ob, linear(c), kb_.acc_value(acc));
    kb_.end_loop();
    return;
  }
  // The line's first element (its last with reverse): the identity folded with it.
  {
    const ValueId col = column();
    Coords c = at(kb_.iconst(reverse ? len - 1 : 0), col);
    kb_.store(ob, linear(c),
              kb_.binary(combine, identity, kb_.cast(eval(n.operands[0], c), t.dtype)));
    end_column();
  }
  // Each later element: the previous one, loaded back, folded with it.
  const ValueId i = kb_.binary(
      ScalarOp::add, kb_.index(kb_.begin_loop(std::max<int64_t>(len - 1, 0))), kb_.iconst(1));
  const ValueId j = reverse ? kb_.binary(ScalarOp::sub, kb_.iconst(len - 1), i) : i;
  const ValueId prev_j = reverse ? kb_.binary(ScalarOp::add, j, kb_.iconst(1))
                                 : kb_.binary(ScalarOp::sub, j, kb_.iconst(1));
  {
    const ValueId col = column();
    Coords c = at(j, col);
    Coords p = at(prev_j, col);
    const ValueId x = kb_.cast(eval(n.operands[0], c), t.dtype);
    kb_.store(ob, linear(c), kb_.binary(combine, kb_.load(ob, linear(p)), x));
    end_column();
  }
  kb_.end_loop();
}

}  // namespace kiln::lowering
