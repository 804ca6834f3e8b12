// scatter_add kernels (see lowering.h), deterministic without atomics. The
// outer, parallel loop runs over the output's columns: its positions outside
// `dim`, the innermost dim in blocks of B contiguous elements (B divides that
// extent, so the inner loop has no tail). Each iteration copies its columns of
// the base, then, for each index position m along `dim`, adds the source at
// (m, column) into the row the index names. No two iterations write one
// element, and each element's contributions add up in index order, as the
// reference kernel's do: the same bits in every mode.
#include "codegen/lowering.h"

namespace kiln::lowering {

namespace {

// The block of the innermost dim one iteration handles: the largest of 64, 32,
// ..., 2 dividing its extent, else 1.
int64_t column_block(int64_t extent) {
  for (int64_t b = 64; b > 1; b /= 2)
    if (extent % b == 0) return b;
  return 1;
}

}  // namespace

void Lowering::lower_scatter() {
  // The scatter_add; the group's other members are producers of its operands,
  // evaluated where it reads them.
  NodeId id = kNoNode;
  for (NodeId m : grp_.nodes)
    if (g_.node(m).op == OpKind::scatter_add) {
      if (id != kNoNode) fail("two scatter_adds in one group");
      id = m;
    }
  if (id == kNoNode) fail("no scatter_add");
  const Node& n = g_.node(id);
  setup_buffers();
  const int32_t ob = add_output(Value(id));
  const Shape& out = g_.type(Value(id)).shape;
  const Shape& idx = g_.type(n.operands[1]).shape;
  const int64_t rank = int64_t(out.size());
  if (rank == 0) fail("a scatter_add of a scalar (the frontend adds instead)");
  const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), rank);
  // The innermost dim outside `dim`, blocked when it is the last (contiguous) one.
  const int64_t inner = d == rank - 1 ? -1 : rank - 1;
  const int64_t block = inner < 0 ? 1 : column_block(out[size_t(inner)]);

  Shape outer;
  std::vector<int64_t> outer_dims;
  for (int64_t k = 0; k < rank; ++k) {
    if (k == d) continue;
    outer.push_back(k == inner ? out[size_t(k)] / block : out[size_t(k)]);
    outer_dims.push_back(k);
  }
  kir::Kernel& kernel = kb_.kernel();
  kernel.range = kiln::numel(outer);
  kernel.serial_inner = true;
  const ValueId i0 = kb_.index(0);
  kb_.set_upper_bound(i0, kernel.range);
  const std::vector<ValueId> oc = delinearize(i0, outer);

  // Coordinates in `shape` at row r of `dim` and offset j in the column block.
  auto coords = [&](ValueId r, ValueId j, const Shape& shape) {
    Coords c;
    c.shape = shape;
    c.dims.assign(size_t(rank), kNoValue);
    for (size_t q = 0; q < outer_dims.size(); ++q) {
      const int64_t k = outer_dims[q];
      c.dims[size_t(k)] =
          k == inner ? kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, oc[q], kb_.iconst(block)), j) : oc[q];
    }
    c.dims[size_t(d)] = r;
    return c;
  };
  auto column_loop = [&]() { return block > 1 ? kb_.index(kb_.begin_loop(block)) : kb_.iconst(0); };
  auto end_column_loop = [&]() {
    if (block > 1) kb_.end_loop();
  };

  // The base's columns, copied.
  const ValueId r = kb_.index(kb_.begin_loop(out[size_t(d)]));
  {
    const ValueId j = column_loop();
    Coords c = coords(r, j, out);
    const ValueId v = eval(n.operands[0], c);
    kb_.store(ob, linear(c), v);
    end_column_loop();
  }
  kb_.end_loop();

  // Columns past the indices' extent get nothing added.
  ValueId inside = kNoValue;
  for (size_t q = 0; q < outer_dims.size(); ++q) {
    const int64_t k = outer_dims[q];
    if (k == inner || idx[size_t(k)] == out[size_t(k)]) continue;
    const ValueId here = kb_.binary(ScalarOp::lt, oc[q], kb_.iconst(idx[size_t(k)]));
    inside = inside == kNoValue ? here : kb_.binary(ScalarOp::and_, inside, here);
  }
  if (inside != kNoValue) kb_.begin_if(inside);
  const ValueId m = kb_.index(kb_.begin_loop(idx[size_t(d)]));
  {
    const ValueId j = column_loop();
    Coords p = coords(m, j, idx);
    const bool ragged = inner >= 0 && idx[size_t(inner)] < out[size_t(inner)];
    if (ragged) kb_.begin_if(kb_.binary(ScalarOp::lt, p.dims[size_t(inner)], kb_.iconst(idx[size_t(inner)])));
    const ValueId row = checked_index(eval(n.operands[1], p), out[size_t(d)]);
    const ValueId src = eval(n.operands[2], p);
    Coords a = coords(row, j, out);
    const ValueId at = linear(a);
    kb_.store(ob, at, kb_.binary(ScalarOp::add, kb_.load(ob, at), src));
    if (ragged) kb_.end_if();
    end_column_loop();
  }
  kb_.end_loop();
  if (inside != kNoValue) kb_.end_if();
}

}  // namespace kiln::lowering
