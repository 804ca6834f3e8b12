// Elementwise, copy and matmul-epilogue kernels (see lower.h): one loop over
// the output's elements, flat on the linear index or rows x a contiguous inner loop.
#include "codegen/lowering.h"

#include <algorithm>

namespace kiln::lowering {

void Lowering::lower_map() {
  const std::vector<Value> outs = setup_buffers();
  if (outs.empty()) return;  // a lone matmul: nothing to compute
  Shape space = g_.type(outs[0]).shape;
  for (Value v : outs)
    if (g_.type(v).numel() > kiln::numel(space)) space = g_.type(v).shape;
  const int64_t n = kiln::numel(space);

  std::vector<int32_t> bufs;
  for (Value v : outs) bufs.push_back(add_output(v));
  if (opts_.epilogue_in_place) {
    if (grp_.kind != GroupKind::Matmul) fail("epilogue_in_place needs a matmul group");
    kir::Buffer& out0 = kb_.kernel().buffers[bufs[0]];
    const kir::Buffer& mm = kb_.kernel().buffers[0];
    if (out0.dtype != mm.dtype || out0.numel() != mm.numel())
      fail("the first epilogue output (", dtype_name(out0.dtype), shape_str(out0.shape),
           ") cannot overwrite the matmul result (", dtype_name(mm.dtype), shape_str(mm.shape),
           ")");
    out0.alias = 0;
  }
  for (const auto& [out_v, in_v] : opts_.in_place) {
    if (grp_.kind != GroupKind::Elementwise && grp_.kind != GroupKind::Matmul)
      fail("in-place outputs need an elementwise or matmul group");
    auto o = std::find(outs.begin(), outs.end(), out_v);
    auto in = in_buf_.find(in_v);
    if (o == outs.end() || in == in_buf_.end())
      fail("an in-place pair names a value that is not an output and an input of the group");
    kir::Buffer& ob = kb_.kernel().buffers[bufs[size_t(o - outs.begin())]];
    const kir::Buffer& ib = kb_.kernel().buffers[in->second];
    if (ob.dtype != ib.dtype || ob.numel() != ib.numel())
      fail("an in-place output differs from its input in dtype or size");
    ob.alias = in->second;
  }

  Coords base;
  base.shape = space;
  const ValueId i0 = kb_.index(0);
  if (mode_ == Mode::flat) {
    kb_.kernel().range = n;
    kb_.set_upper_bound(i0, n);
    base.linear = i0;
  } else {
    const int64_t e = space.back();
    kb_.kernel().range = n / e;
    kb_.set_upper_bound(i0, n / e);
    const Shape rows(space.begin(), space.end() - 1);
    std::vector<ValueId> rd = delinearize(i0, rows);
    const ValueId row_base = kb_.binary(ScalarOp::mul, i0, kb_.iconst(e));
    const int32_t loop = kb_.begin_loop(e);
    const ValueId j = kb_.index(loop);
    rd.push_back(j);
    base.dims = rd;
    base.linear = kb_.binary(ScalarOp::add, row_base, j);
  }
  std::vector<Coords> coords;
  std::vector<ValueId> vals;
  for (Value v : outs) {
    Coords c;
    if (g_.type(v).shape == space) {
      c = base;
    } else {
      c.shape = g_.type(v).shape;
      c.linear = base.linear;
    }
    vals.push_back(eval(v, c));
    coords.push_back(c);
  }
  // Stores last, after every load (so an in-place output never feeds a later read).
  for (size_t k = 0; k < outs.size(); ++k) {
    const int64_t m = g_.type(outs[k]).numel();
    const ValueId idx = linear(coords[k]);
    if (m < n) {
      kb_.begin_if(kb_.binary(ScalarOp::lt, idx, kb_.iconst(m)));
      kb_.store(bufs[k], idx, vals[k]);
      kb_.end_if();
    } else {
      kb_.store(bufs[k], idx, vals[k]);
    }
  }
  if (mode_ == Mode::rows) kb_.end_loop();
}

}  // namespace kiln::lowering
